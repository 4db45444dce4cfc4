"""Keyed draws of the simulated system: one number from a key, in O(1), in pure Python.

Every property of a client (its device, its time zone, whether it is online in a slot) is a
function of (seed, purpose, client id, ...) through `raycompo.seeding.fold`: nothing is a
table of n rows, a client's draw never depends on which other clients were looked at, and
the inline and Ray backends (where the system lives in the driver) see the same numbers.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from itertools import chain, repeat
from operator import mul
from statistics import NormalDist

import numpy as np

from raycompo.seeding import SYSTEM, fold, fold_ids, splitmix_into

# Purposes: independent streams of the system's draws.
DEVICE_CLASS = 1
DEVICE_FLOPS = 2
UPLINK = 3
DOWNLINK = 4
LATENCY = 5
ZONE = 6
DAY = 7
SLOT = 8
CANDIDATE = 9
DEVICE_ROW = 10

_STD_NORMAL = NormalDist()
_TWO_53 = float(1 << 53)
_S11 = np.uint64(11)
_INV_CDF = getattr(statistics, "_normal_dist_inv_cdf", None)
"""`NormalDist().inv_cdf` without its method call (what it computes, bit for bit)."""


def prefix(seed: int, purpose: int) -> int:
    """The folded state of (seed, SYSTEM, purpose): each draw adds its own key parts."""
    return fold(0, seed, SYSTEM, purpose)


def unit(pre: int, *key: int) -> float:
    """A uniform number in (0, 1) from `prefix` state `pre` and `key` (53 random bits)."""
    return ((fold(pre, *key) >> 11) + 0.5) / _TWO_53


def index(pre: int, size: int, *key: int) -> int:
    """A uniform integer in [0, size) (64 random bits mod size: bias below size / 2^64)."""
    return fold(pre, *key) % size


def lognormal(pre: int, median: float, sigma: float, *key: int) -> float:
    """median * exp(sigma * Z), Z standard normal by inversion of `unit`; sigma 0: the median."""
    if sigma == 0:
        return median
    return median * math.exp(sigma * _STD_NORMAL.inv_cdf(unit(pre, *key)))


def units(pre: int, ids: Sequence[int] | np.ndarray, *key: int | np.ndarray) -> np.ndarray:
    """`unit(pre, c, *key)` for every c of `ids` at once, bit for bit (numpy's uint64
    arithmetic is `fold`'s; the int -> float conversion of 53 bits is exact)."""
    return units_of(fold_ids(pre, np.asarray(ids, dtype=np.int64), *key))


def folds(pre: int, ids: Sequence[int] | np.ndarray, *key: int | np.ndarray) -> np.ndarray:
    """The folded 64-bit states of `unit(pre, c, *key)` for every c of `ids` (uint64): compare
    them with `below(p)` for `unit(...) < p`."""
    return fold_ids(pre, np.asarray(ids, dtype=np.int64), *key)


def units_of(h: np.ndarray) -> np.ndarray:
    """`unit`'s number of each folded 64-bit state of `h` (its top 53 bits, centred, over 2^53)."""
    u = (h >> _S11).astype(np.float64)
    u += 0.5
    u /= _TWO_53
    return u


def below(p: float) -> np.uint64 | None:
    """The folded states whose `unit` is below `p` are those below this bound (None: all):
    one integer comparison in place of `units_of(h) < p`, bit for bit. unit(h) < p holds when
    float(h >> 11) + 0.5 < p * 2^53, true for the top bits k below some K (the sum rounds
    up with k): K is found here with the float arithmetic `units_of` uses."""
    if not p > 0:  # (NaN too) no unit is below
        return np.uint64(0)
    if p > 1:  # every unit is
        return None
    target = p * _TWO_53
    k = min(max(math.ceil(target - 0.5), 0), 1 << 53)
    while k > 0 and float(k - 1) + 0.5 >= target:
        k -= 1
    while k < (1 << 53) and float(k) + 0.5 < target:
        k += 1
    return None if k >= 1 << 53 else np.uint64(k << 11)


def units_each(pres: Sequence[int], ids: Sequence[int]) -> np.ndarray:
    """`units(pre, ids)` for each prefix of `pres`, rows in that order, in one pass."""
    arr = np.asarray(ids, dtype=np.int64).view(np.uint64)
    h = np.array(pres, dtype=np.uint64)[:, None] ^ arr[None, :]  # fold(pre, c)'s first xor, every pair
    splitmix_into(h)
    return units_of(h)


def indices(pre: int, size: int, first: int, count: int, *key: int) -> np.ndarray:
    """`index(pre, size, *key, i)` for i = first .. first + count - 1, bit for bit (int64)."""
    h = np.arange(first, first + count, dtype=np.uint64)
    h ^= np.uint64(fold(pre, *key))
    splitmix_into(h)
    h %= np.uint64(size)
    return h.view(np.int64)  # below size < 2^63: the same numbers


def exp_normals(u: np.ndarray, sigmas: Sequence[float]) -> np.ndarray:
    """exp(sigma_r * Z) for each uniform number of row r of `u` (rows from `units_each`), Z
    standard normal by inversion: Python's own inverse CDF, product and exp per number (mapped
    in C, no array between them), so bit for bit `lognormal`'s factor (`median * factor` is
    `lognormal`; sigma 0: exactly 1)."""
    flat = u.ravel().tolist()
    if _INV_CDF is None:
        z: Iterable[float] = map(_STD_NORMAL.inv_cdf, flat)
    else:
        z = map(_INV_CDF, flat, repeat(0.0), repeat(1.0))
    if u.ndim != 2 or len(sigmas) != u.shape[0]:
        raise ValueError(f"exp_normals: one sigma per row of u, got {len(sigmas)} for u of shape {u.shape}")
    row = u.shape[1]
    scale = chain.from_iterable(repeat(float(s), row) for s in sigmas)
    return np.fromiter(map(math.exp, map(mul, scale, z)), dtype=np.float64, count=len(flat)).reshape(u.shape)


