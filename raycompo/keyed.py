"""Counter-based keyed draws (issue 41): random numbers as hashes of (seed, i), so that many
rows (clients x steps, a chunk's members) are drawn with a fixed number of tensor operations,
the same bits on the CPU and on CUDA, whatever rows are drawn together.

* `keyed_indices` (the keyed mini-batch sampler, tasks/sampler.py; rand-k's entries): a row's
  b indices without replacement as the b smallest keyed hashes h(seed, i) over its n points.
  `randperm(n)[:b]` from a generator reseeded per (client, step) costs two torch calls per
  client and step; `keyed_indices` draws r rows with a fixed number of torch operations
  (GROUPS groups of rows of similar n, about sum(n_r) hashes, whatever r; a few rows on the
  CPU at once in numpy); one row alone (the per-client path, `keyed_draw`) is computed in
  numpy, the same bits.
* `keyed_uniform` (QSGD's random levels): h(seed, i)'s top 53 bits as a float64 in [0, 1).

The hash: with k = splitmix64(seed), h(seed, i) = splitmix64(k + i * GAMMA), the i-th output
of the splitmix64 stream seeded at k (Steele et al. 2014). For a fixed seed it is a bijection
of i (GAMMA is odd; splitmix64's mix is a bijection), so a row has no ties, and the b smallest
of n distinct uniform hashes are a uniform b-subset in uniform order. torch has no uint64:
the arithmetic is done in int64 (wrap-around multiplication, logical right shifts masked by
hand), and the unsigned order is compared as signed by flipping the top bit (a bijection too).
numpy's uint64 needs neither (`keyed_draw`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from raycompo.seeding import _M64, _splitmix64

GAMMA = 0x9E3779B97F4A7C15
"""splitmix64's increment (odd): the stream's step between consecutive indices."""
BLOCK_ELEMENTS = 2**24
"""At most this many hashes (rows x width int64, 128 MiB) are held at once; more rows are
drawn in blocks of rows (a row of more points alone)."""
SMALL_ROWS = 64
"""A chunk on the CPU of at most this many drawing rows is drawn in numpy, padded to its n_max
(`_numpy_draw`): there torch's per-operation cost outweighs the arithmetic (a vectorized
round of 5-client chunks and 5 steps draws 25 rows at a time)."""
GROUPS = 5
"""The drawing rows (n_r > b) are hashed in this many groups by size: of widths n_max / 2^j,
j < GROUPS - 1, the rows within a factor 2 of it, and the rest at once (`_groups`)."""
MASKED = torch.iinfo(torch.int64).max
"""The key of an index i >= n_r (past a row's points): never among the b < n_r smallest."""


def _signed(c: int) -> int:
    """A 64-bit unsigned constant as the int64 with the same bits."""
    return c - (1 << 64) if c >= 1 << 63 else c


_G, _M1, _M2, _TOP = (
    _signed(GAMMA),
    _signed(0xBF58476D1CE4E5B9),
    _signed(0x94D049BB133111EB),
    _signed(1 << 63),
)


def _shr(h: torch.Tensor, s: int) -> torch.Tensor:
    """The logical right shift of int64 bits (torch's >> is arithmetic: it copies the sign)."""
    return (h >> s) & ((1 << (64 - s)) - 1)


def _mix(z: torch.Tensor) -> torch.Tensor:
    """splitmix64's output function of int64 states (a new tensor): the bits of `_splitmix64`
    after its increment."""
    z = (z ^ _shr(z, 30)) * _M1
    z = (z ^ _shr(z, 27)) * _M2
    return z ^ _shr(z, 31)


def _mix_(z: torch.Tensor, scratch: torch.Tensor) -> torch.Tensor:
    """`_mix` in place: z's states become their outputs, `scratch` (z's shape) is
    overwritten; no temporary (a third of `_mix`'s memory traffic)."""
    for s, m in ((30, _M1), (27, _M2), (31, 0)):
        torch.bitwise_right_shift(z, s, out=scratch)
        z.bitwise_xor_(scratch.bitwise_and_((1 << (64 - s)) - 1))
        if m:
            z.mul_(m)
    return z


_G_U, _M1_U, _M2_U = np.uint64(GAMMA), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix_np(z: np.ndarray, scratch: np.ndarray | None = None) -> np.ndarray:
    """`_mix` in place on uint64 states (numpy shifts are logical, products wrap around);
    `scratch` (z's shape) is overwritten where given."""
    t = np.empty_like(z) if scratch is None else scratch
    for shift, m in ((30, _M1_U), (27, _M2_U), (31, None)):
        z ^= np.right_shift(z, np.uint64(shift), out=t)
        if m is not None:
            z *= m
    return z


def _hash_rows(
    keys: torch.Tensor, steps: torch.Tensor, buffers: torch.Tensor | None = None
) -> torch.Tensor:
    """(r, w) int64: splitmix64(k_r + (i + 1) GAMMA)'s bits, top bit flipped, of the keys
    k_r = splitmix64(seed_r) and `steps` (w,) = (i + 1) GAMMA for i < w; written into
    `buffers` (2, at least r w: the hashes and scratch) where given."""
    shape = (len(keys), len(steps))
    if buffers is None:
        buffers = torch.empty((2, shape[0] * shape[1]), dtype=torch.int64, device=keys.device)
    z, scratch = (buf[: shape[0] * shape[1]].view(shape) for buf in buffers)
    torch.add(steps.unsqueeze(0), keys.unsqueeze(1), out=z)
    return _mix_(z, scratch).bitwise_xor_(_TOP)


def keyed_hash(seeds: torch.Tensor, n: int) -> torch.Tensor:
    """(r, n) int64: h(seed_r, i) for i < n, its top bit flipped, so that the signed order of
    the entries is the unsigned order of the hashes. `seeds` (r,) int64 holds each row's
    64-bit seed's bits (a seed >= 2**63 as a negative int64)."""
    keys = _mix(seeds.to(torch.int64) + _G)  # splitmix64(seed)
    return _hash_rows(keys, torch.arange(1, n + 1, dtype=torch.int64, device=seeds.device).mul_(_G))


def keyed_hash_reference(seed: int, i: int) -> int:
    """h(seed, i) as an unsigned 64-bit int, in pure Python (`seeding._splitmix64`): what
    `keyed_hash` computes in torch (tests/test_keyed_sampler.py checks them bit for bit)."""
    return _splitmix64((_splitmix64(seed & _M64) + i * GAMMA) & _M64)


UNIT = 2.0**-53
"""A float64 uniform's spacing: `keyed_uniform` is (the hash's top 53 bits) x UNIT."""


CACHE_ELEMENTS = 2**16
"""On the CPU `keyed_uniform` hashes in numpy, in blocks of at most this many entries (512 KiB
of uint64 each, its scratch as much, `_hash_blocks`): a hash's dozen passes stay in the
cache, not in memory (for a 10^6-entry row 2-4x faster than torch's int64 at once; a batched
chunk's mini-batch draws, `_torch_draw`, measured no faster so, and stay in torch: a fixed
number of operations whatever the chunk's size)."""


def keyed_uniform(seeds: torch.Tensor, n: int, block_elements: int = BLOCK_ELEMENTS) -> torch.Tensor:
    """(r, n) float64 on `seeds`' device, uniform on [0, 1): entry (r, i) is the top 53 bits
    of `keyed_hash(seeds, n)`'s entry (r, i) (unsigned: its top bit flipped back) times
    2^-53, a multiple of 2^-53 as `torch.rand`'s float64 draws are. On a GPU hashed in
    blocks of rows of at most `block_elements` entries (a row alone where it is longer); on
    the CPU in numpy, in blocks of at most CACHE_ELEMENTS (`_uniform_np`)."""
    device = seeds.device
    keys = _mix(seeds.to(torch.int64) + _G)  # splitmix64(seed)
    out = torch.empty((len(keys), n), dtype=torch.float64, device=device)
    if device.type == "cpu":
        _uniform_np(keys.numpy().view(np.uint64), out.numpy())
        return out
    steps = torch.arange(1, n + 1, dtype=torch.int64, device=device).mul_(_G)
    per = max(1, block_elements // max(n, 1))
    buffers = torch.empty((2, min(len(keys), per) * n), dtype=torch.int64, device=device)
    for lo in range(0, len(keys), per):
        h = _hash_rows(keys[lo:lo + per], steps, buffers)
        h.bitwise_xor_(_TOP).bitwise_right_shift_(11).bitwise_and_((1 << 53) - 1)  # top 53 bits, logical shift
        out[lo:lo + per].copy_(h).mul_(UNIT)  # exact: below 2^53
    return out


def _uniform_np(keys: np.ndarray, out: np.ndarray) -> None:
    """`keyed_uniform`'s rows of the uint64 `keys` (r,) into the float64 `out` (r, n)."""
    for lo, hi, c, w, block in _hash_blocks(keys, out.shape[1]):
        np.right_shift(block, np.uint64(11), out=block)  # the top 53 bits
        np.multiply(block, UNIT, out=out[lo:hi, c:c + w])  # exact: below 2^53


def _hash_blocks(keys: np.ndarray, n: int) -> Iterator[tuple[int, int, int, int, np.ndarray]]:
    """(lo, hi, c, w, block): the unsigned hashes h(seed_r, i) of rows lo <= r < hi (their
    keys k_r = splitmix64(seed_r), uint64) and columns c <= i < c + w, block by block of at
    most CACHE_ELEMENTS entries (whole rows where they fit, else pieces of one), so that the
    hash's dozen passes stay in the cache; `block` (hi - lo, w) is overwritten by the next."""
    cols = max(1, min(n, CACHE_ELEMENTS))
    rows = max(1, CACHE_ELEMENTS // cols)
    z = np.empty(rows * cols, dtype=np.uint64)
    scratch = np.empty_like(z)
    for lo in range(0, len(keys), rows):
        hi = min(lo + rows, len(keys))
        for c in range(0, n, cols):
            w = min(cols, n - c)
            zb, sb = z[: (hi - lo) * w].reshape(hi - lo, w), scratch[: (hi - lo) * w].reshape(hi - lo, w)
            np.multiply(np.arange(c + 1, c + w + 1, dtype=np.uint64), _G_U, out=sb[0])  # (i + 1) GAMMA
            np.add(sb[0][None, :], keys[lo:hi, None], out=zb)
            yield lo, hi, c, w, _mix_np(zb, sb)


def _as_sizes(
    sizes: torch.Tensor | Sequence[int], seeds: torch.Tensor
) -> tuple[torch.Tensor, np.ndarray]:
    """The rows' n_r as an int64 tensor on `seeds`' device and as a numpy array, checked."""
    host = sizes.detach().cpu().numpy() if isinstance(sizes, torch.Tensor) else np.asarray(sizes)
    host = host.astype(np.int64, copy=False)
    if seeds.dim() != 1 or host.shape != tuple(seeds.shape):
        raise ValueError(
            f"seeds and sizes are one per row: shapes {tuple(seeds.shape)} and {host.shape}"
        )
    if len(host) and int(host.min()) < 1:
        raise ValueError("every row draws from n_r >= 1 points")
    return torch.from_numpy(host).to(seeds.device), host


def _groups(n: np.ndarray, b: int, limit: int) -> list[tuple[int, int, int]]:
    """(lo, hi, width) blocks of rows [lo, hi) of the ascending sizes `n` (all > b): GROUPS
    groups, the rows of n_max / 2^(j+1) < n_r <= n_max / 2^j and the rest, each padded to
    its largest n_r, in blocks of at most `limit` hashes (at least one row). An empty group
    is one empty block of width b: the number of blocks, hence of torch operations, does not
    depend on the sizes (below `limit`)."""
    cuts = np.atleast_1d(
        np.searchsorted(n, n[-1] / 2.0 ** np.arange(GROUPS - 1, 0, -1), side="right")
    )
    bounds = [0] + [int(c) for c in cuts] + [len(n)]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        per = max(1, limit // (int(n[hi - 1]) if hi > lo else b))
        for start in range(lo, max(hi, lo + 1), per):
            end = min(start + per, hi)
            out.append((start, end, int(n[end - 1]) if end > start else b))
    return out


def _numpy_draw(seeds: torch.Tensor, n: np.ndarray, b: int) -> torch.Tensor:
    """(r, b) int64: the rows of CPU `seeds` and sizes n_r > b, padded to n_max, in numpy's
    uint64 at once: the same bits as `_torch_draw` (`argpartition` then `argsort` of the b
    smallest: the topk of b), for a few rows, where numpy's per-call cost is the least."""
    keys = _mix_np(seeds.to(torch.int64).numpy().view(np.uint64) + _G_U)  # splitmix64(seed)
    width = int(n.max())
    h = _mix_np(np.arange(1, width + 1, dtype=np.uint64) * _G_U + keys[:, None])
    h[np.arange(width) >= n[:, None]] = np.uint64(_M64)  # past a row's points: never drawn
    first = np.argpartition(h, b - 1, axis=1)[:, :b]
    order = np.argsort(np.take_along_axis(h, first, 1), axis=1)
    return torch.from_numpy(np.take_along_axis(first, order, 1).astype(np.int64, copy=False))


def _torch_draw(
    seeds: torch.Tensor, n: torch.Tensor, b: int, spans: list[tuple[int, int, int]]
) -> torch.Tensor:
    """(r, b) int64 on `seeds`' device: the rows of sizes `n` (ascending, > b), block by block
    of `spans` (`_groups`), each hashed in place and one topk of b."""
    keys = _mix(seeds.to(torch.int64) + _G)  # splitmix64(seed)
    i = torch.arange(int(n[-1]), dtype=torch.int64, device=seeds.device)
    steps = (i + 1).mul_(_G)  # (i + 1) GAMMA: the stream's i-th state less k
    most = max((hi - lo) * width for lo, hi, width in spans)
    buffers = torch.empty((2, most), dtype=torch.int64, device=seeds.device)  # hashes, scratch
    parts = []
    for lo, hi, width in spans:
        h = _hash_rows(keys[lo:hi], steps[:width], buffers)
        h.masked_fill_(i[:width] >= n[lo:hi, None], MASKED)  # past a row's points: never drawn
        parts.append(torch.topk(h, b, dim=1, largest=False, sorted=True).indices)
    return torch.cat(parts)


def keyed_indices(
    seeds: torch.Tensor,
    sizes: torch.Tensor | Sequence[int],
    b: int,
    block_elements: int = BLOCK_ELEMENTS,
) -> torch.Tensor:
    """(r, b) int64 on `seeds`' device: row r's b indices drawn without replacement from
    range(n_r), the indices of the b smallest h(seed_r, i) over i < n_r, by increasing hash.
    A row with b >= n_r takes all its points in order (arange(n_r)), its entries past n_r
    are -1. `seeds` (r,) int64 (a 64-bit seed's bits), `sizes` (r,) the n_r >= 1.

    Only the rows of n_r > b are hashed, in GROUPS groups of similar n_r (`_groups`: each
    row padded to at most twice its points, but for the last group's), each one `topk` of
    b: a fixed number of torch operations, whatever r and the sizes, and about sum(n_r)
    hashes rather than r n_max. Past `block_elements` hashes a group is drawn in blocks of
    rows. The indices depend on neither the groups nor the blocks. A chunk of few drawing
    rows on the CPU (SMALL_ROWS) is drawn in numpy at once (`_numpy_draw`), the same
    indices."""
    if b < 1:
        raise ValueError(f"a mini-batch of b >= 1 points is drawn, got b={b}")
    device = seeds.device
    n, host = _as_sizes(sizes, seeds)
    cols = torch.arange(b, dtype=torch.int64, device=device)
    # rows of n_r <= b: all their points, in order (no draw), as the per-client path reads them
    out = torch.where(cols < n.unsqueeze(1), cols, -1)
    drawing = np.flatnonzero(host > b)
    if not len(drawing):
        return out
    if device.type == "cpu" and len(drawing) <= SMALL_ROWS:
        at = torch.from_numpy(drawing)
        return out.index_copy_(0, at, _numpy_draw(seeds.index_select(0, at), host[drawing], b))
    order = drawing[np.argsort(host[drawing], kind="stable")]  # drawing rows by ascending n_r
    at = torch.from_numpy(order).to(device)
    spans = _groups(host[order], b, block_elements)
    drawn = _torch_draw(seeds.index_select(0, at), n.index_select(0, at), b, spans)
    return out.index_copy_(0, at, drawn)


def as_int64(seed: int) -> int:
    """A 64-bit seed (0 <= seed < 2**64, e.g. `torch.Generator.initial_seed()`) as the int64
    with the same bits."""
    return _signed(int(seed) & _M64)


def keyed_draw(seed: int, n: int, b: int) -> torch.Tensor:
    """One row: b < n indices of range(n) drawn with the 64-bit `seed`, a CPU int64 tensor:
    `keyed_indices` with r = 1, bit for bit, computed in numpy's uint64 (a few operations of
    about a microsecond each, where torch's per-operation cost on one row adds up to 0.2 ms:
    the per-client path draws one row per client and step). b >= n: `keyed_indices`' row."""
    if not 1 <= b < n:
        return keyed_indices(torch.tensor([as_int64(seed)], dtype=torch.int64), [n], b)[0]
    z: np.ndarray = np.arange(1, n + 1, dtype=np.uint64)
    z *= _G_U
    z += np.uint64(_splitmix64(int(seed) & _M64))  # splitmix64(seed) + (i + 1) GAMMA
    h = _mix_np(z)  # unsigned: no top bit to flip
    first = np.argpartition(h, b - 1)[:b]  # the b smallest, in no order
    return torch.from_numpy(first[np.argsort(h[first])].astype(np.int64, copy=False))
