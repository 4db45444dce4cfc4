"""The counter-based keyed mini-batch sampler (issue 41): a client's b indices without
replacement as the b smallest keyed hashes h(seed, i) over its n points.

`randperm(n)[:b]` from a generator reseeded per (client, step) costs two torch calls per
client and step; the keyed sampler draws r rows (clients x steps) with a fixed number of
torch operations, whatever r, and gives the same indices on the CPU and on CUDA, bit for
bit (integer arithmetic only). It is the run setting `sampler="keyed"`
(RunConfig.sampler); "randperm" (the default) keeps the draws every reproduction was made
with.

The hash: with k = splitmix64(seed), h(seed, i) = splitmix64(k + i * GAMMA), the i-th output
of the splitmix64 stream seeded at k (Steele et al. 2014). For a fixed seed it is a bijection
of i (GAMMA is odd; splitmix64's mix is a bijection), so a row has no ties, and the b smallest
of n distinct uniform hashes are a uniform b-subset in uniform order. torch has no uint64:
the arithmetic is done in int64 (wrap-around multiplication, logical right shifts masked by
hand), and the unsigned order is compared as signed by flipping the top bit (a bijection too).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from raycompo.seeding import _M64, _splitmix64

SAMPLERS = ("randperm", "keyed")
"""How a client's mini-batch indices are drawn from its generator (RunConfig.sampler):
'randperm' (`randperm(n_i)[:b]`, the default every reproduction was made with) or 'keyed'
(`keyed_indices`)."""
GAMMA = 0x9E3779B97F4A7C15
"""splitmix64's increment (odd): the stream's step between consecutive indices."""
BLOCK_ELEMENTS = 2**24
"""At most this many hashes (rows x n_max int64, 128 MiB) are held at once; more rows are
drawn in blocks of rows."""
MASKED = torch.iinfo(torch.int64).max
"""The key of an index i >= n_r (past a row's points): never among the b < n_r smallest."""


def _signed(c: int) -> int:
    """A 64-bit unsigned constant as the int64 with the same bits."""
    return c - (1 << 64) if c >= 1 << 63 else c


_G, _M1, _M2, _TOP = _signed(GAMMA), _signed(0xBF58476D1CE4E5B9), _signed(0x94D049BB133111EB), _signed(1 << 63)


def _shr(h: torch.Tensor, s: int) -> torch.Tensor:
    """The logical right shift of int64 bits (torch's >> is arithmetic: it copies the sign)."""
    return (h >> s) & ((1 << (64 - s)) - 1)


def _mix(z: torch.Tensor) -> torch.Tensor:
    """splitmix64's output function of int64 states (a new tensor): the bits of `_splitmix64`
    after its increment."""
    z = (z ^ _shr(z, 30)) * _M1
    z = (z ^ _shr(z, 27)) * _M2
    return z ^ _shr(z, 31)


def keyed_hash(seeds: torch.Tensor, n: int) -> torch.Tensor:
    """(r, n) int64: h(seed_r, i) for i < n, its top bit flipped, so that the signed order of
    the entries is the unsigned order of the hashes. `seeds` (r,) int64 holds each row's
    64-bit seed's bits (a seed >= 2**63 as a negative int64)."""
    k = _mix(seeds.to(torch.int64) + _G)  # splitmix64(seed)
    i = torch.arange(n, dtype=torch.int64, device=seeds.device)
    return _mix(k.unsqueeze(1) + (i + 1) * _G) ^ _TOP  # splitmix64(k + i GAMMA)


def keyed_hash_reference(seed: int, i: int) -> int:
    """h(seed, i) as an unsigned 64-bit int, in pure Python (`seeding._splitmix64`): what
    `keyed_hash` computes in torch (tests/test_keyed_sampler.py checks them bit for bit)."""
    return _splitmix64((_splitmix64(seed & _M64) + i * GAMMA) & _M64)


def keyed_indices(seeds: torch.Tensor, sizes: torch.Tensor | Sequence[int], b: int,
                  block_elements: int = BLOCK_ELEMENTS) -> torch.Tensor:
    """(r, b) int64 on `seeds`' device: row r's b indices drawn without replacement from
    range(n_r), the indices of the b smallest h(seed_r, i) over i < n_r, by increasing hash.
    A row with b >= n_r takes all its points in order (arange(n_r)), its entries past n_r
    are -1. `seeds` (r,) int64 (a 64-bit seed's bits), `sizes` (r,) the n_r >= 1. The rows
    are drawn in blocks of at most `block_elements` hashes: the number of torch operations
    depends on memory, not on r otherwise."""
    if b < 1:
        raise ValueError(f"a mini-batch of b >= 1 points is drawn, got b={b}")
    device = seeds.device
    n = torch.as_tensor(np.asarray(sizes, dtype=np.int64) if not isinstance(sizes, torch.Tensor) else sizes,
                        dtype=torch.int64).to(device)
    if seeds.dim() != 1 or n.shape != seeds.shape:
        raise ValueError(f"seeds and sizes are one per row: shapes {tuple(seeds.shape)} and {tuple(n.shape)}")
    r = len(seeds)
    out = torch.empty((r, b), dtype=torch.int64, device=device)
    if r == 0:
        return out
    n_max = int(n.max())
    if int(n.min()) < 1:
        raise ValueError("every row draws from n_r >= 1 points")
    width = max(n_max, b)  # topk of b needs b columns: past n_max, masked
    per_block = max(1, block_elements // width)
    cols = torch.arange(width, dtype=torch.int64, device=device)
    for lo in range(0, r, per_block):
        s, m = seeds[lo:lo + per_block], n[lo:lo + per_block]
        h = keyed_hash(s, width)
        h.masked_fill_(cols >= m.unsqueeze(1), MASKED)
        out[lo:lo + per_block] = torch.topk(h, b, dim=1, largest=False, sorted=True).indices
    # rows of n_r <= b: all their points, in order (no draw), as the per-client path reads them
    small = n <= b
    if bool(small.any()):
        whole = torch.where(cols[:b] < n.unsqueeze(1), cols[:b], -1)
        out = torch.where(small.unsqueeze(1), whole, out)
    return out


def as_int64(seed: int) -> int:
    """A 64-bit seed (0 <= seed < 2**64, e.g. `torch.Generator.initial_seed()`) as the int64
    with the same bits."""
    return _signed(int(seed) & _M64)


def keyed_draw(seed: int, n: int, b: int) -> torch.Tensor:
    """One row: b < n indices of range(n) drawn with the 64-bit `seed` (`keyed_indices`
    with r = 1), a CPU int64 tensor."""
    return keyed_indices(torch.tensor([as_int64(seed)], dtype=torch.int64), [n], b)[0]
