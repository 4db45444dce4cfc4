"""Synthetic(alpha, beta): a population-scale heterogeneous task (issue 12).

The construction of FedProx (Li et al., "Federated Optimization in Heterogeneous
Networks", MLSys 2020, section 5.1 and its `generate_synthetic.py`): for client k,

    u_k ~ N(0, alpha^2),  W_k in R^{10x60}, b_k in R^10 with entries ~ N(u_k, 1)
    B_k ~ N(0, beta^2),   v_k in R^60 with entries ~ N(B_k, 1)
    x ~ N(v_k, Sigma), Sigma diagonal, Sigma_jj = j^-1.2 (j = 1..60)
    y = argmax softmax(W_k x + b_k)

alpha (setting `model_spread`) controls how much the local models differ, beta
(`feature_spread`; named apart from the algorithms' alpha and beta) how much the local features
differ; `iid=true` is FedProx's Synthetic-IID (one W, b for everyone from N(0, 1), x ~
N(0, Sigma)). Model: multinomial logistic regression, as in the paper.

What differs from FedProx:

- **Generated on demand.** Client k's data is drawn from its own stream (seed,
  CLIENT_DATA, k): it costs nothing until the client is needed, does not depend on which
  other clients are built with it, nor on `n_clients` (a population of 10^6 is the first
  10^6 clients of an endless sequence). FedProx draws all clients from one stream.
- **Sizes.** FedProx: n_k = int(lognormal(4, 2)) + 50 (30 clients; the heavy tail can
  reach 10^5 samples at 10^6 clients); here n_k = min(min_samples + lognormal(
  size_log_mean, size_log_sigma), max_samples), the cap ours (default 1,000).
- **Validation.** FedProx splits each client's samples 90/10; here each client gets
  `val_per_client` extra samples from its own distribution.
- alpha and beta are standard deviations, as in FedProx's code (its paper writes
  N(0, alpha) with alpha a variance).

A large population is meant to be hosted lazily (the engine's ClientDataCache over
`clients(ids)`); `partition()` builds every client and is only for small populations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from raycompo.models import LogisticRegression
from raycompo.seeding import CLIENT_DATA, numpy_rng
from raycompo.settings import require
from raycompo.tasks.base import ClassificationTask, ClientData


@dataclass
class SyntheticSettings:
    n_clients: int = 1000
    """Number of clients n (FedProx: 30); any size, nothing is built until a client is needed."""
    model_spread: float = 1.0
    """Model heterogeneity: std of u_k, the mean of client k's W_k and b_k (FedProx: 0, 0.5, 1)."""
    feature_spread: float = 1.0
    """Feature heterogeneity: std of B_k, the mean of client k's feature means v_k (FedProx: 0, 0.5, 1)."""
    iid: bool = False
    """FedProx's Synthetic-IID: one W, b ~ N(0, 1) shared by all clients, x ~ N(0, Sigma)."""
    n_features: int = 60
    """Input dimension d (FedProx: 60)."""
    n_classes: int = 10
    """Number of classes (FedProx: 10)."""
    min_samples: int = 50
    """Samples of every client before the lognormal part (FedProx: 50)."""
    size_log_mean: float = 4.0
    """Mean of the log of the lognormal part of a client's size (FedProx: 4)."""
    size_log_sigma: float = 2.0
    """Std of the log of the lognormal part of a client's size (FedProx: 2)."""
    max_samples: int = 1000
    """Cap on a client's training samples (ours; FedProx has none)."""
    val_per_client: int = 20
    """Validation samples per client, from the client's own distribution."""

    def validate(self) -> None:
        require(self.n_clients >= 1, f"n_clients must be >= 1, got {self.n_clients}")
        require(self.model_spread >= 0 and self.feature_spread >= 0, f"model_spread (alpha), feature_spread (beta) must be >= 0, got {self.model_spread}, {self.feature_spread}")
        require(self.n_features >= 1, f"n_features must be >= 1, got {self.n_features}")
        require(self.n_classes >= 2, f"n_classes must be >= 2, got {self.n_classes}")
        require(self.min_samples >= 1, f"min_samples must be >= 1, got {self.min_samples}")
        require(
            self.max_samples >= self.min_samples,
            f"max_samples ({self.max_samples}) must be >= min_samples ({self.min_samples})",
        )
        require(self.size_log_sigma >= 0, f"size_log_sigma must be >= 0, got {self.size_log_sigma}")
        require(self.val_per_client >= 1, f"val_per_client must be >= 1, got {self.val_per_client}")


class Synthetic(ClassificationTask):
    name = "synthetic"
    Settings = SyntheticSettings
    # FedProx section 5.1 on Synthetic: lr 0.01, batch 10, 20 local epochs (here tau = 20
    # local steps), 10 clients per round. The KL-DRO temperature gamma is not in FedProx;
    # ours is 2 (with gamma 1, ComFedL's exp(loss / gamma) weights diverge at lr 0.01 on
    # Synthetic(1, 1)).
    algo_defaults = {
        "lr": 0.01,
        "tau": 20,
        "batch_size": 10,
        "clients_per_round": 10,
        "comfedl": {"gamma": 2.0},
    }

    @property
    def n_clients(self) -> int:
        return self.settings.n_clients

    def client_bytes(self) -> int:
        """Memory of the largest client's data (engine/memory.py): max_samples + val_per_client
        rows of n_features float32 and an int64 label, plus the tensors' overhead."""
        s = self.settings
        return (s.max_samples + s.val_per_client) * (4 * s.n_features + 8) + 1024

    def build_module(self) -> torch.nn.Module:
        return LogisticRegression(self.settings.n_features, self.settings.n_classes)

    def partition(self) -> list[ClientData]:
        """Every client (small populations only; see `clients`)."""
        return self.clients(list(range(self.n_clients)))

    def clients(self, ids: list[int]) -> list[ClientData]:
        """The clients `ids`, each built from (seed, client id) alone."""
        n = self.n_clients
        bad = [i for i in ids if not 0 <= int(i) < n]
        if bad:
            raise ValueError(f"{self.name}: client ids must be in [0, {n}), got {bad[:5]}")
        return [self.client(int(i)) for i in ids]

    def client(self, cid: int) -> ClientData:
        s = self.settings
        rng = numpy_rng(self.seed, CLIENT_DATA, cid)
        d, k = s.n_features, s.n_classes
        if s.iid:
            shared = numpy_rng(self.seed, CLIENT_DATA)
            w, b = shared.normal(0, 1, (k, d)), shared.normal(0, 1, k)
            v = np.zeros(d)
        else:
            u_k = rng.normal(0, s.model_spread)
            b_k = rng.normal(0, s.feature_spread)
            w, b = rng.normal(u_k, 1, (k, d)), rng.normal(u_k, 1, k)
            v = rng.normal(b_k, 1, d)
        size = min(s.min_samples + rng.lognormal(s.size_log_mean, s.size_log_sigma), s.max_samples)
        n = int(size)
        std = np.arange(1, d + 1, dtype=np.float64) ** -0.6  # sqrt(Sigma_jj) = j^-0.6
        x = v + rng.standard_normal((n + s.val_per_client, d)) * std
        y = np.argmax(x @ w.T + b, axis=1)  # argmax of the softmax = argmax of the logits
        xt = torch.as_tensor(x, dtype=torch.float32)
        yt = torch.as_tensor(y, dtype=torch.long)
        return ClientData(cid, xt[:n], yt[:n], xt[n:], yt[n:])
