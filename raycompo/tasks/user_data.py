"""Tasks on a user's own data: the settings and the behaviour shared by the classes that
`raycompo.tasks.from_data` (`task_from_arrays`, `task_from_clients`) creates.

The classes here set no `name`, so the task registry never lists them; each call of a
factory makes a subclass with a name, the data as class attributes (torch tensors), and
settings defaults taken from the call. The data travel with the class: Ray pickles a class
that is not importable by value (cloudpickle), so every actor rebuilds the same partition.

Seeding: the partition draws from `numpy_rng(seed, DATA)` and the validation sets from
`numpy_rng(seed, DATA, VAL_STREAM)`, where seed is `partition_seed` if set, else the run's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from raycompo.data.partition import label_matched_sample
from raycompo.data.partitioners import PARTITIONERS, partition_indices, partitioner_params
from raycompo.data.user_arrays import data_sha256
from raycompo.seeding import DATA, numpy_rng
from raycompo.settings import require
from raycompo.tasks.base import ClassificationTask, ClientData, index_clients
from raycompo.tasks.user_spec import build_model

VAL_STREAM = 1
"""`numpy_rng(seed, DATA, VAL_STREAM)` draws the validation sets (apart from the partition)."""


def _check_common(val_fraction: float, partition_seed: int | None) -> None:
    require(0.0 < val_fraction < 1.0, f"val_fraction must be in (0, 1), got {val_fraction}")
    require(partition_seed is None or partition_seed >= 0, f"partition_seed must be >= 0, got {partition_seed}")


@dataclass
class ArraysSettings:
    """Settings of a task made by `task_from_arrays` (its call sets the defaults)."""

    n_clients: int = 10
    """Number of clients the pooled data are split over."""
    partition: str = "iid"
    """Partitioner (raycompo.data.partitioners): iid, dirichlet, shards, dominant or step."""
    val_fraction: float = 0.2
    """Share of each client's samples held out as its validation set (unused when
    validation arrays are given)."""
    partition_seed: int | None = None
    """Seed of the partition and the validation sets (None: the run's seed)."""
    dirichlet_alpha: float = 0.5
    """dirichlet: concentration alpha of the per-class Dir(alpha) client proportions (small:
    few classes per client; large: near iid)."""
    dirichlet_min_size: int = 10
    """dirichlet: every client holds at least this many samples (the draw is repeated)."""
    shards_per_client: int = 2
    """shards: label-sorted shards per client (McMahan et al. 2017: 2)."""
    rho: float = 0.5
    """dominant: fraction of client i's samples from class i mod C (ComFedL journal: 0.28)."""
    dominant_size: int | None = None
    """dominant: samples per client (None: the largest the class counts allow)."""
    step_keep: int = 100
    """step: samples kept of each minority class (Qi et al. 2020: the last 100)."""
    step_minority: int | None = None
    """step: number of minority classes, labels 0..step_minority-1 (None: C // 2)."""

    def validate(self) -> None:
        require(self.n_clients >= 1, f"n_clients must be >= 1, got {self.n_clients}")
        require(
            self.partition in PARTITIONERS,
            f"unknown partitioner {self.partition!r}; choose one of: {', '.join(PARTITIONERS)}",
        )
        _check_common(self.val_fraction, self.partition_seed)
        require(self.dirichlet_alpha > 0, f"dirichlet_alpha must be > 0, got {self.dirichlet_alpha}")
        require(self.dirichlet_min_size >= 1, f"dirichlet_min_size must be >= 1, got {self.dirichlet_min_size}")
        require(self.shards_per_client >= 1, f"shards_per_client must be >= 1, got {self.shards_per_client}")
        require(0.0 <= self.rho <= 1.0, f"rho must be in [0, 1], got {self.rho}")
        require(self.dominant_size is None or self.dominant_size >= 1, f"dominant_size must be >= 1, got {self.dominant_size}")
        require(self.step_keep >= 1, f"step_keep must be >= 1, got {self.step_keep}")
        require(self.step_minority is None or self.step_minority >= 0, f"step_minority must be >= 0, got {self.step_minority}")

    def partition_params(self) -> dict[str, Any]:
        """The chosen partitioner's parameters with their values here."""
        return {k: getattr(self, k, v) for k, v in partitioner_params(self.partition).items()}


@dataclass
class ClientsSettings:
    """Settings of a task made by `task_from_clients` (its call sets the defaults)."""

    val_fraction: float = 0.2
    """Share of each client's samples held out as its validation set (unused when
    validation arrays are given)."""
    partition_seed: int | None = None
    """Seed of the validation split (None: the run's seed)."""

    def validate(self) -> None:
        _check_common(self.val_fraction, self.partition_seed)


def split_validation(parts: list[np.ndarray], fraction: float, rng: np.random.Generator) -> tuple[list, list]:
    """Each client's indices split at random into (train, val): round(fraction * n_i)
    validation samples, at least one of each."""
    train, val = [], []
    for cid, idx in enumerate(parts):
        require(
            len(idx) >= 2,
            f"client {cid} has {len(idx)} sample(s): it needs at least 2 to hold out a validation set",
        )
        n_val = min(max(1, round(fraction * len(idx))), len(idx) - 1)
        perm = rng.permutation(idx)
        train.append(perm[n_val:])
        val.append(perm[:n_val])
    return train, val


class UserDataTask(ClassificationTask):
    """A classification task on a user's tensors: model and loss as given to the factory.

    Subclasses (made by the factories) set `num_classes`, `in_features`, `data_sha256`,
    `spec` = {'model', 'loss', 'sample_losses'} and their data."""

    num_classes: ClassVar[int]
    in_features: ClassVar[int]
    data_sha256: ClassVar[str]
    spec: ClassVar[dict[str, Any]] = {"model": "logistic", "loss": None, "sample_losses": True}

    def build_module(self) -> torch.nn.Module:
        return build_model(self.spec["model"], self.in_features, self.num_classes)

    def data_seed(self) -> int:
        """The seed of the partition and validation draws."""
        s = self.settings.partition_seed
        return self.seed if s is None else s

    def _loss(self, logits: torch.Tensor, y: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
        fn = self.spec["loss"]
        if fn is None:
            return F.cross_entropy(logits, y, reduction=reduction)
        return fn(logits, y) if reduction == "mean" else fn(logits, y, reduction=reduction)

    def loss(self, w: torch.Tensor, batch: Any) -> torch.Tensor:
        """Mean loss of model w on a batch: cross-entropy, or the factory's `loss`."""
        x, y = batch
        return self._loss(self.model(w, x), y)

    @classmethod
    def cannot_batch(cls) -> str | None:
        """Cross-entropy (no `loss` given) batches; a user's loss function does not."""
        if cls.spec["loss"] is not None:
            return f"task {cls.name} uses the loss function it was given (vectorized cohorts compute cross-entropy)"
        return None

    @classmethod
    def cannot_batch_samples(cls) -> str | None:
        """As `cannot_batch`, for the per-sample losses (FedDRO's family)."""
        return cls.cannot_batch()

    @classmethod
    def cannot_batch_evaluate(cls) -> str | None:
        """Its `evaluate` is ClassificationTask's with the task's loss: batched with cross-entropy."""
        return cls.cannot_batch()

    def sample_losses(self, w: torch.Tensor, batch: Any) -> torch.Tensor:
        """Per-sample losses; only with cross-entropy or a reduction-aware custom loss."""
        if not self.spec["sample_losses"]:
            raise NotImplementedError(f"task {self.name}: the custom loss takes no `reduction` keyword")
        x, y = batch
        return self._loss(self.model(w, x), y, reduction="none")

    @torch.no_grad()
    def evaluate(self, w: torch.Tensor, client: ClientData) -> dict[str, float]:
        """train_loss, train_acc, val_loss, val_acc with the task's loss."""
        train_logits = self.model(w, client.x)
        logits = self.model(w, client.x_val)
        return {
            "train_loss": self._loss(train_logits, client.y).item(),
            "val_loss": self._loss(logits, client.y_val).item(),
            "val_acc": (logits.argmax(1) == client.y_val).double().mean().item(),
            "train_acc": (train_logits.argmax(1) == client.y).double().mean().item(),
        }

    def split_indices(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Each client's (training, validation) sample indices."""
        raise NotImplementedError

    def _record(self, how: str, params: dict[str, Any], validation: str) -> dict[str, Any]:
        train, val = self.split_indices()
        return {
            "task": self.name,
            "partitioner": how,
            "params": params,
            "seed": self.data_seed(),
            "seed_from": "run seed" if self.settings.partition_seed is None else "partition_seed",
            "streams": "partition: numpy_rng(seed, DATA); validation: numpy_rng(seed, DATA, 1)",
            "n_clients": len(train),
            "validation": validation,
            "val_fraction": self.settings.val_fraction,
            "settings": asdict(self.settings),
            "num_classes": self.num_classes,
            "train_sizes": [len(t) for t in train],
            "val_sizes": [len(v) for v in val],
            "data_sha256": self.data_sha256,
            "indices_sha256": data_sha256(*(torch.as_tensor(a) for a in [*train, *val])),
        }


class ArraysTask(UserDataTask):
    """A pooled data set (x, y) split over clients by a partitioner; validation sets are a
    `val_fraction` of each client's samples, or, when validation arrays (x_val, y_val) are
    given, drawn from them with the class proportions of each client's training set
    (`label_matched_sample`; len(y_val) // n_clients per client, at least one; sets of
    different clients may overlap; classes the validation pool lacks are left out)."""

    Settings = ArraysSettings
    x: ClassVar[torch.Tensor]
    y: ClassVar[torch.Tensor]
    x_val: ClassVar[torch.Tensor | None] = None
    y_val: ClassVar[torch.Tensor | None] = None

    @property
    def n_clients(self) -> int:
        return self.settings.n_clients

    def split_indices(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        s = self.settings
        seed = self.data_seed()
        parts = partition_indices(
            s.partition, self.y.numpy(), s.n_clients, numpy_rng(seed, DATA), self.num_classes,
            **s.partition_params(),
        )
        rng = numpy_rng(seed, DATA, VAL_STREAM)
        if self.y_val is None:
            return split_validation(parts, s.val_fraction, rng)
        size = max(1, len(self.y_val) // s.n_clients)
        pool_classes = torch.bincount(self.y_val, minlength=self.num_classes) > 0
        val = []
        for cid, idx in enumerate(parts):
            target = self.y[torch.as_tensor(idx)]
            target = target[pool_classes[target]]  # classes the pool has
            require(len(target) > 0, f"the validation arrays hold none of client {cid}'s classes")
            val.append(label_matched_sample(self.y_val, target, size, self.num_classes, rng))
        return parts, val

    def partition(self) -> list[ClientData]:
        train, val = self.split_indices()
        if self.x_val is None:
            return index_clients(self.x, self.y, self.x, self.y, train, val)
        return index_clients(self.x, self.y, self.x_val, self.y_val, train, val)

    def partition_record(self) -> dict[str, Any]:
        """What re-creates the partition: partitioner, parameters, seed, sizes, hashes."""
        s = self.settings
        validation = "split" if self.y_val is None else "label-matched from the validation arrays"
        return self._record(s.partition, s.partition_params(), validation)


class ClientsTask(UserDataTask):
    """Per-client data as given; validation sets as given, or a `val_fraction` of each
    client's samples."""

    Settings = ClientsSettings
    clients_data: ClassVar[tuple[tuple[torch.Tensor, torch.Tensor], ...]]
    clients_val: ClassVar[tuple[tuple[torch.Tensor, torch.Tensor], ...] | None] = None

    @property
    def n_clients(self) -> int:
        return len(self.clients_data)

    def split_indices(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Indices into each client's own arrays (validation: into its own val arrays if given)."""
        parts = [np.arange(len(y)) for _, y in self.clients_data]
        if self.clients_val is not None:
            return parts, [np.arange(len(y)) for _, y in self.clients_val]
        return split_validation(parts, self.settings.val_fraction, numpy_rng(self.data_seed(), DATA, VAL_STREAM))

    def partition(self) -> list[ClientData]:
        train, val = self.split_indices()
        out = []
        for cid, ((x, y), t, v) in enumerate(zip(self.clients_data, train, val)):
            xv, yv = (x, y) if self.clients_val is None else self.clients_val[cid]
            t, v = torch.as_tensor(t), torch.as_tensor(v)
            out.append(ClientData(cid, x[t], y[t], xv[v], yv[v]))
        return out

    def partition_record(self) -> dict[str, Any]:
        """What re-creates the clients' data: seed, sizes and hashes."""
        validation = "split" if self.clients_val is None else "given"
        return self._record("given", {}, validation)
