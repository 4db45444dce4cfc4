"""Partitioners: how a pooled labelled data set is split over clients.

Each partitioner is a plain function

    fn(labels: np.ndarray, n_clients: int, rng: np.random.Generator, **params) -> list[np.ndarray]

returning one array of sample indices per client. The arrays are disjoint; every random draw
comes from `rng`, so a partition is a function of (labels, n_clients, params, rng's seed).
Parameters are keyword-only and named as the flat settings keys that set them (so
`--set dirichlet_alpha=0.1` reaches `dirichlet`); `num_classes`, where a partitioner takes
it, comes from the task (None: the largest label + 1). `PARTITIONERS` maps names to them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np
import torch

from raycompo.data.dominant import dominant_need, dominant_split
from raycompo.data.step_imbalance import equal_split, step_imbalance_indices
from raycompo.errors import ConfigError
from raycompo.settings import require

Partitioner = Callable[..., list[np.ndarray]]

DIRICHLET_MAX_DRAWS = 1000
"""Draws of a Dirichlet partition before it gives up on `dirichlet_min_size`."""

TASK_PARAMS = ("num_classes",)
"""Keyword parameters that the task passes (from its data), not settings."""


def _labels(labels) -> np.ndarray:
    y = np.asarray(labels).astype(np.int64, copy=False)
    require(y.ndim == 1, f"labels must be one-dimensional, got shape {y.shape}")
    return y


def _classes(y: np.ndarray, num_classes: int | None) -> int:
    return int(num_classes) if num_classes is not None else (int(y.max()) + 1 if len(y) else 0)


def _enough(n: int, n_clients: int, per_client: int = 1, why: str = "") -> None:
    require(n_clients >= 1, f"n_clients must be >= 1, got {n_clients}")
    require(
        n >= n_clients * per_client,
        f"too few samples: {n} samples cannot give {n_clients} clients {per_client} each{why}; "
        "lower n_clients or use more data",
    )


def iid(labels: np.ndarray, n_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Uniform random split: a random permutation cut into `n_clients` parts whose sizes
    differ by at most one (every sample is used)."""
    y = _labels(labels)
    _enough(len(y), n_clients)
    return np.array_split(rng.permutation(len(y)), n_clients)


def dirichlet(
    labels: np.ndarray,
    n_clients: int,
    rng: np.random.Generator,
    *,
    dirichlet_alpha: float = 0.5,
    dirichlet_min_size: int = 10,
    num_classes: int | None = None,
) -> list[np.ndarray]:
    """Label skew (Hsu et al. 2019), as NIID-Bench (Li et al. 2022) and FedLab's
    `hetero_dir_partition` build it: for each class k, proportions p_k ~ Dir(alpha 1_n) over
    the clients, and class k's samples are cut in those proportions; small alpha gives each
    client few classes, large alpha approaches iid.

    Two details of that construction are kept: a client that already holds its share N / n
    gets no more samples (its proportion is zeroed and the others renormalized), which keeps
    sizes from running away; and the whole draw is repeated until every client holds at
    least `dirichlet_min_size` samples (NIID-Bench and FedLab: 10). After
    DIRICHLET_MAX_DRAWS draws it raises ConfigError. Every sample is used."""
    y = _labels(labels)
    require(dirichlet_alpha > 0, f"dirichlet_alpha must be > 0, got {dirichlet_alpha}")
    require(dirichlet_min_size >= 1, f"dirichlet_min_size must be >= 1, got {dirichlet_min_size}")
    n = len(y)
    _enough(n, n_clients, dirichlet_min_size, " (dirichlet_min_size)")
    by_class = [np.flatnonzero(y == k) for k in range(_classes(y, num_classes))]
    for _ in range(DIRICHLET_MAX_DRAWS):
        parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
        sizes = np.zeros(n_clients, dtype=np.int64)
        for idx in by_class:
            idx = rng.permutation(idx)
            p = rng.dirichlet(np.full(n_clients, float(dirichlet_alpha)))
            open_ = sizes < n / n_clients  # clients still below their share N / n
            p = np.where(open_, p, 0.0)
            if not np.isfinite(p).all() or p.sum() <= 0:  # all mass on full clients: spread it
                p = open_.astype(float)
            cuts = (np.cumsum(p / p.sum()) * len(idx)).astype(np.int64)[:-1]
            for j, chunk in enumerate(np.split(idx, cuts)):
                parts[j].append(chunk)
                sizes[j] += len(chunk)
        if sizes.min() >= dirichlet_min_size:
            return [np.concatenate(p) if p else np.empty(0, np.int64) for p in parts]
    raise ConfigError(
        f"the dirichlet partition left a client with fewer than dirichlet_min_size={dirichlet_min_size} "
        f"samples in {DIRICHLET_MAX_DRAWS} draws (alpha {dirichlet_alpha}, {n_clients} clients, "
        f"{n} samples); raise dirichlet_alpha, or lower dirichlet_min_size or n_clients"
    )


def shards(
    labels: np.ndarray, n_clients: int, rng: np.random.Generator, *, shards_per_client: int = 2
) -> list[np.ndarray]:
    """Pathological non-iid split of McMahan et al. (2017): sort the samples by label
    (random order within a label), cut them into n_clients * shards_per_client contiguous
    shards (sizes differ by at most one; every sample is used), and give each client
    `shards_per_client` shards chosen at random. When every class has at least a shard's
    worth of samples, a shard spans at most two labels, so a client sees at most
    2 * shards_per_client labels."""
    y = _labels(labels)
    require(shards_per_client >= 1, f"shards_per_client must be >= 1, got {shards_per_client}")
    n_shards = n_clients * shards_per_client
    _enough(len(y), n_clients, shards_per_client, " (one per shard)")
    order = np.lexsort((rng.random(len(y)), y))
    pieces = np.array_split(order, n_shards)
    owners = rng.permutation(n_shards).reshape(n_clients, shards_per_client)
    return [np.concatenate([pieces[s] for s in row]) for row in owners]


def largest_dominant_size(counts: np.ndarray, n_clients: int, rho: float) -> int:
    """The largest per-client size the rho-dominant split can draw from class pools of sizes
    `counts` (client i's dominant class i mod C), at most sum(counts) // n_clients."""
    c = len(counts)
    # Class k's share of one client's samples, summed over clients: rho for each client
    # dominated by k, (1 - rho) / (C - 1) for the others; need_k(m) is about m * share_k.
    dominated = np.bincount(np.arange(n_clients) % c, minlength=c)
    share = dominated * rho + (n_clients - dominated) * (1 - rho) / (c - 1)
    bound = min((counts[k] / share[k] for k in range(c) if share[k] > 0), default=np.inf)
    m = int(min(counts.sum() // n_clients, np.floor(bound)))
    # Rounding moves each class's need by at most n_clients: step down to a feasible size.
    while m > 0 and (dominant_need(n_clients, m, rho, c).sum(0) > counts).any():
        m -= 1
    return m


def dominant(
    labels: np.ndarray,
    n_clients: int,
    rng: np.random.Generator,
    *,
    rho: float = 0.5,
    dominant_size: int | None = None,
    num_classes: int | None = None,
) -> list[np.ndarray]:
    """The ComFedL journal's rho-dominant split (section 5.2; `raycompo.data.dominant`):
    client i holds `dominant_size` samples, a fraction rho from class i mod C and
    (1 - rho) / (C - 1) from each other class (largest-remainder rounding), drawn without
    replacement. `dominant_size` None: the largest size the class pools allow. Samples
    beyond the clients' quotas are left out."""
    y = _labels(labels)
    c = _classes(y, num_classes)
    require(c >= 2, f"the dominant partition needs at least 2 classes, got {c}")
    require(0.0 <= rho <= 1.0, f"rho must be in [0, 1], got {rho}")
    require(dominant_size is None or dominant_size >= 1, f"dominant_size must be >= 1, got {dominant_size}")
    _enough(len(y), n_clients)
    size = dominant_size
    if size is None:
        size = largest_dominant_size(np.bincount(y, minlength=c), n_clients, rho)
        require(size >= 1, f"the class pools are too small for a rho={rho} dominant split over {n_clients} clients")
    return dominant_split(y, n_clients, size, rho, c, rng, what="samples")


def step(
    labels: np.ndarray,
    n_clients: int,
    rng: np.random.Generator,
    *,
    step_keep: int = 100,
    step_minority: int | None = None,
    num_classes: int | None = None,
) -> list[np.ndarray]:
    """FedDRO's step imbalance (Qi et al. 2020; `raycompo.data.step_imbalance`): each
    minority class (labels below `step_minority`, None: C // 2) keeps only its last
    `step_keep` samples in the data's order, the other classes keep all of theirs; the kept
    samples are then split uniformly at random into equal parts (the remainder of the
    division by n_clients is left out, as in FedDRO's tasks)."""
    y = _labels(labels)
    c = _classes(y, num_classes)
    require(step_keep >= 1, f"step_keep must be >= 1, got {step_keep}")
    require(step_minority is None or 0 <= step_minority <= c, f"step_minority must be in [0, {c}], got {step_minority}")
    kept = step_imbalance_indices(torch.from_numpy(y), c, step_keep, step_minority)
    return [kept[p] for p in equal_split(len(kept), n_clients, rng)]


PARTITIONERS: dict[str, Partitioner] = {
    "iid": iid,
    "dirichlet": dirichlet,
    "shards": shards,
    "dominant": dominant,
    "step": step,
}
"""Partitioner name -> function."""


def get_partitioner(name: str) -> Partitioner:
    """The partitioner called `name`; ConfigError listing the valid names otherwise."""
    if name not in PARTITIONERS:
        raise ConfigError(f"unknown partitioner {name!r}; choose one of: {', '.join(PARTITIONERS)}")
    return PARTITIONERS[name]


def partitioner_params(name: str) -> dict[str, object]:
    """The settings parameters of partitioner `name` and their defaults (keyword-only
    parameters, without TASK_PARAMS)."""
    sig = inspect.signature(get_partitioner(name))
    return {
        p.name: p.default
        for p in sig.parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in TASK_PARAMS
    }


def partition_indices(
    name: str,
    labels: np.ndarray,
    n_clients: int,
    rng: np.random.Generator,
    num_classes: int | None = None,
    **params,
) -> list[np.ndarray]:
    """Run partitioner `name` with `params` (unknown ones are a ConfigError), and check that
    it gave `n_clients` disjoint, non-empty index sets."""
    fn = get_partitioner(name)
    check_params(name, params)
    if "num_classes" in inspect.signature(fn).parameters:
        params = {**params, "num_classes": num_classes}
    parts = [np.asarray(p, dtype=np.int64) for p in fn(labels, n_clients, rng, **params)]
    require(len(parts) == n_clients, f"partitioner {name!r} made {len(parts)} parts for {n_clients} clients; "
                                           "it must return one array of sample indices per client")
    for cid, p in enumerate(parts):
        require(len(p) > 0, f"partitioner {name!r} left client {cid} with no samples; lower n_clients or change its parameters")
    every = np.concatenate(parts)
    require(len(np.unique(every)) == len(every), f"partitioner {name!r} gave a sample to two clients; each sample goes to one client at most")
    return parts


def check_params(name: str, params: dict) -> None:
    """A ConfigError naming the parameters that partitioner `name` does not take."""
    known = partitioner_params(name)
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ConfigError(
            f"partitioner {name!r} has no parameter(s) {', '.join(unknown)}; "
            f"its parameters: {', '.join(known) or 'none'}"
        )
