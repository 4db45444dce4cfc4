"""Keyed meta-batches (issue 41): which of a client's training tasks a meta-iteration samples,
and the fresh points x ~ U[lo, hi] of each, as counter-based draws (raycompo/keyed.py), so
that a chunk's every client is drawn with a fixed number of tensor operations and a client
alone (`SinusoidClient.batch`) draws the same, bit for bit.

With `seed` the step's generator seed (`c.rng(t).initial_seed()`, as every mini-batch draw):

* the picks: `size` of the client's n tasks, by position, without replacement: the keyed
  sampler's b smallest hashes h(seed, i), i < n (`keyed_indices`; all n in order where
  size is None or >= n);
* the points: slot j's `count` points (support, then query) are entries j * count ..
  (j + 1) * count - 1 of the uniform row keyed by fold(seed, POINTS) (`keyed_uniform`), a
  stream apart from the picks' hashes, mapped to [lo, hi) in float64, then rounded to
  float32 (which may round a point within 2^-24 hi of hi up to hi: the points lie in [lo, hi]).

An entry depends only on (seed, its index), so a client's row is the same whatever the
chunk's widest client (a row of fewer picks is a prefix of a wider one)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from raycompo.keyed import as_int64, keyed_draw, keyed_indices, keyed_uniform
from raycompo.seeding import fold, fold_many

POINTS = 1
"""The fold tag of a step's points: their stream is keyed by fold(seed, POINTS)."""


class Picks(NamedTuple):
    """A chunk's meta-batch draws of one step, as rows: R = the chunk's sampled tasks."""

    owner: torch.Tensor
    """(R,) int64: each row's client, by position in the chunk (client-major, slot-minor)."""
    position: torch.Tensor
    """(R,) int64: the row's task, by position in its client's task list."""
    x: torch.Tensor
    """(R, count, 1) float32: the row's points, support first."""
    per_client: np.ndarray
    """(k,) int64: the tasks each client sampled (min(size, n_i))."""


def _to_range(u: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """Uniforms in [0, 1) (float64) as float32 points in [lo, hi] (float64's [lo, hi), rounded to float32)."""
    return u.mul_(hi - lo).add_(lo).to(torch.float32)


def draw_one(seed: int, n: int, size: int | None, count: int, lo: float, hi: float) -> tuple[list[int], torch.Tensor]:
    """One client's meta-batch: its picks (task positions) and their points (m, count, 1),
    `draw_many`'s row for this seed, bit for bit (the picks computed in numpy: `keyed_draw`)."""
    m = n if size is None else min(size, n)
    picks = list(range(n)) if m == n else keyed_draw(seed, n, m).tolist()
    u = keyed_uniform(torch.tensor([as_int64(fold(seed, POINTS))], dtype=torch.int64), m * count)
    return picks, _to_range(u, lo, hi).view(m, count, 1)


def draw_many(seeds: torch.Tensor, sizes: np.ndarray, size: int | None, count: int, lo: float, hi: float) -> Picks:
    """The chunk's meta-batches of one step: `seeds` (k,) int64 each client's step seed (its
    64 bits; drawn on the CPU, as the per-client path does), `sizes` (k,) its number of
    tasks. A fixed number of operations, whatever k."""
    seeds = seeds.to("cpu", torch.int64)
    k = len(sizes)
    widths = sizes if size is None else np.minimum(sizes, size)
    b = int(widths.max())
    picks = keyed_indices(seeds, torch.from_numpy(sizes), b).view(-1)  # (k, b) rows; past a row's width: -1
    taken = picks >= 0
    owner = torch.arange(k, dtype=torch.int64).repeat_interleave(torch.from_numpy(widths))
    point_seeds = torch.from_numpy(fold_many(seeds.numpy().view(np.uint64), POINTS).view(np.int64))
    u = keyed_uniform(point_seeds, b * count).view(k * b, count)
    x = _to_range(u[taken], lo, hi).unsqueeze(-1)
    return Picks(owner, picks[taken], x, widths.astype(np.int64))
