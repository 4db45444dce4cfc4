"""Rows of a chunk cut into groups of similar sizes, each padded to its largest within a
byte bound: how `CohortBatch.whole_losses` reads every client's whole data when the whole
chunk, padded to its largest client, does not fit (clients of 50 to thousands of samples).

A row of n samples goes to the bucket ceil(log2 n): within a bucket sizes differ by at most
2x, so padding at most doubles the bytes read; a bucket is split into groups of at most
`bound // (largest n * row_bytes)` rows (at least 1). The groups' count depends on the
range of sizes and on the bytes, not on the number of rows: a constant number of tensor
operations per group, none per client."""

from __future__ import annotations

import numpy as np


def size_groups(sizes: np.ndarray, row_bytes: int, bound: int) -> list[np.ndarray]:
    """The rows (indices into `sizes`) of each group, ascending within a group; every row in
    exactly one group. `row_bytes`: the bytes of one padded sample; `bound`: at most this
    many bytes per group (but never less than one row per group)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if len(sizes) == 0:
        return []
    bucket = np.ceil(np.log2(np.maximum(sizes, 1))).astype(np.int64)
    order = np.argsort(bucket, kind="stable")
    edges = np.flatnonzero(np.diff(bucket[order])) + 1
    groups: list[np.ndarray] = []
    for rows in np.split(order, edges):  # one bucket each: at most ~log2(largest n) of them
        per_group = max(1, bound // max(int(sizes[rows].max()) * row_bytes, 1))
        groups.extend(np.split(rows, np.arange(per_group, len(rows), per_group)))
    return groups
