"""A tiny deterministic instance of FedDRO's problem (2) for Theorem 4.1.

    g_k(x) = a_k . x + b_k  (d_g = 1),   f(y) = y^2 / 2,   h = 0,
    Phi(x) = (a-bar . x + b-bar)^2 / 2.

With heterogeneous (a_k, b_k), a client's own minimizer of f(g_k(x)) differs from the
global one, and vanilla FedAvg for CO (Algorithm 1, I > 1) has a fixed point where
grad Phi != 0 (Theorem 4.1), while FedDRO, sharing y at every step, converges.

Each client holds `samples` rows (A_i, b_i) = (a_k, b_k) + noise * N(0, 1); with
noise = 0 (default) every value is exact, whatever the batch size. The parameters are
drawn from numpy's default_rng(seed) (so the instance does not
depend on the engine's seed derivation): a_k = 1 + spread * N(0, 1), b_k = spread * N(0, 1) (per coordinate).
The initial model is x^0 = (x0, ..., x0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from raycompo.problems.global_composition import GlobalComposition
from raycompo.settings import require
from raycompo.tasks.base import ClientData, Task


@dataclass
class ToyCOSettings:
    n_clients: int = 4
    """Number of clients K."""
    dim: int = 1
    """Dimension d of x."""
    spread: float = 1.0
    """Heterogeneity: scale of the clients' deviations in a_k and b_k."""
    samples: int = 4
    """Rows (A_i, b_i) per client."""
    noise: float = 0.0
    """Per-row noise around (a_k, b_k); 0: deterministic."""
    x0: float = 1.0
    """Initial value of every coordinate of x."""

    def validate(self) -> None:
        require(self.n_clients >= 1 and self.dim >= 1 and self.samples >= 1, f"n_clients, dim and samples must be >= 1, got {self.n_clients}, {self.dim} and {self.samples}")
        require(self.spread >= 0 and self.noise >= 0, f"spread and noise must be >= 0, got {self.spread} and {self.noise}")


@dataclass
class LinearQuadratic(GlobalComposition):
    """g_i(x) = A_i . x + b_i per row, f(y) = |y|^2 / 2, h = 0."""

    def g_samples(self, w, batch):
        A, b = batch
        return (A @ w + b).reshape(-1, 1)

    def f(self, y):
        return (y**2).sum() / 2


class _Point(nn.Module):
    def __init__(self, dim: int, x0: float):
        super().__init__()
        self.x = nn.Parameter(torch.full((dim,), float(x0)))


class ToyCO(Task):
    name = "toy-co"
    Settings = ToyCOSettings
    default_metric = ("grad_norm", "min")
    capabilities = frozenset({"global_composition"})

    @property
    def n_clients(self) -> int:
        return self.settings.n_clients

    def build_module(self) -> nn.Module:
        return _Point(self.settings.dim, self.settings.x0)

    def global_composition(self, algo_settings=None) -> GlobalComposition:
        return LinearQuadratic()

    def clients(self, ids: list[int]) -> list[ClientData]:
        s = self.settings
        rng = np.random.default_rng(self.seed)  # plain numpy: the instance is fixed by the seed alone
        a = 1.0 + s.spread * rng.standard_normal((s.n_clients, s.dim))
        b = s.spread * rng.standard_normal(s.n_clients)
        out = []
        for k in range(s.n_clients):
            A = a[k] + s.noise * rng.standard_normal((s.samples, s.dim))
            bb = b[k] + s.noise * rng.standard_normal(s.samples)
            A_t, b_t = torch.as_tensor(A, dtype=torch.float64), torch.as_tensor(bb, dtype=torch.float64)
            out.append(ClientData(k, A_t, b_t, A_t, b_t))
        return [out[i] for i in ids]

    def init_weights(self) -> torch.Tensor:
        return torch.full((self.settings.dim,), float(self.settings.x0), dtype=torch.float64)

    def loss(self, w, batch):
        A, b = batch
        return ((A @ w + b) ** 2).mean() / 2

    @torch.no_grad()
    def evaluate(self, w, client: ClientData) -> dict[str, float]:
        gk = float((client.x @ w.to(client.x.dtype) + client.y).mean())
        return {"g_k": gk, "train_loss": gk**2 / 2}
