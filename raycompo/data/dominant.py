"""The rho-dominant partition of the ComFedL journal (section 5.2): client i holds a
fraction rho of its images from class i and (1 - rho) / (C - 1) from each other class
(class i mod C when there are more clients than classes: `dominant_split`)."""

from __future__ import annotations

import numpy as np

from raycompo.errors import ConfigError


def dominant_counts(n: int, rho: float, num_classes: int, dominant: int) -> np.ndarray:
    """Per-class image counts of a client of size n whose dominant class is `dominant`.

    Targets are rho * n for the dominant class and (1 - rho) / (C - 1) * n for the others;
    they are rounded by largest remainder, ties broken by class offset from the dominant
    class, so the counts sum to n and, over C clients with dominant classes 0..C-1, every
    class is used exactly n times."""
    targets = np.full(num_classes, (1.0 - rho) * n / (num_classes - 1))
    targets[dominant] = rho * n
    counts = np.floor(targets + 1e-9).astype(np.int64)
    short = n - int(counts.sum())
    offsets = (np.arange(num_classes) - dominant) % num_classes
    order = sorted(
        range(num_classes), key=lambda k: (-round(targets[k] - counts[k], 9), offsets[k])
    )
    for k in order[:short]:
        counts[k] += 1
    return counts


def dominant_partition(
    labels: np.ndarray,
    n_per_client: int,
    rho: float,
    num_classes: int,
    rng: np.random.Generator,
    what: str = "images",
) -> list[np.ndarray]:
    """Disjoint index sets, one per client i = 0..C-1, drawn without replacement from the
    class pools of `labels` with `dominant_counts(n_per_client, rho, C, i)` per class."""
    return dominant_split(labels, num_classes, n_per_client, rho, num_classes, rng, what)


def dominant_need(n_clients: int, n_per_client: int, rho: float, num_classes: int) -> np.ndarray:
    """Per-client class counts, shape (n_clients, C): client i's dominant class is i mod C."""
    return np.stack(
        [dominant_counts(n_per_client, rho, num_classes, i % num_classes) for i in range(n_clients)]
    )


def dominant_split(
    labels: np.ndarray,
    n_clients: int,
    n_per_client: int,
    rho: float,
    num_classes: int,
    rng: np.random.Generator,
    what: str = "images",
) -> list[np.ndarray]:
    """`dominant_partition` for any number of clients: client i's dominant class is i mod C.

    With n_clients = C it makes the same draws as `dominant_partition` (that calls it)."""
    labels = np.asarray(labels)
    pools = [rng.permutation(np.flatnonzero(labels == k)) for k in range(num_classes)]
    counts = dominant_need(n_clients, n_per_client, rho, num_classes)
    need = counts.sum(0)
    for k in range(num_classes):
        if need[k] > len(pools[k]):
            raise ConfigError(
                f"the rho-dominant partition needs {need[k]} {what} of class {k}, the pool has {len(pools[k])}; "
                f"lower the per-client size ({n_per_client})"
            )
    taken = np.zeros(num_classes, dtype=np.int64)
    out = []
    for i in range(n_clients):
        parts = []
        for k in range(num_classes):
            parts.append(pools[k][taken[k] : taken[k] + counts[i, k]])
            taken[k] += counts[i, k]
        out.append(rng.permutation(np.concatenate(parts)))
    return out
