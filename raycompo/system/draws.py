"""Keyed draws of the simulated system: one number from a key, in O(1), in pure Python.

Every property of a client (its device, its time zone, whether it is online in a slot) is a
function of (seed, purpose, client id, ...) through `raycompo.seeding.fold`: nothing is a
table of n rows, a client's draw never depends on which other clients were looked at, and
the inline and Ray backends (where the system lives in the driver) see the same numbers.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from itertools import repeat
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
    arr = np.asarray(ids, dtype=np.int64)
    h = fold_ids(pre, arr, *key)
    return ((h >> np.uint64(11)).astype(np.float64) + 0.5) / _TWO_53


def units_each(pres: Sequence[int], ids: Sequence[int]) -> np.ndarray:
    """`units(pre, ids)` for each prefix of `pres`, rows in that order, in one pass."""
    arr = np.asarray(ids, dtype=np.int64).view(np.uint64)
    h = np.array(pres, dtype=np.uint64)[:, None] ^ arr[None, :]  # fold(pre, c)'s first xor, every pair
    splitmix_into(h)
    return ((h >> np.uint64(11)).astype(np.float64) + 0.5) / _TWO_53


def indices(pre: int, size: int, first: int, count: int, *key: int) -> np.ndarray:
    """`index(pre, size, *key, i)` for i = first .. first + count - 1, bit for bit (int64)."""
    h = fold_ids(fold(pre, *key), np.arange(first, first + count, dtype=np.int64))
    return (h % np.uint64(size)).astype(np.int64)


def exp_normals(u: np.ndarray, sigmas: Sequence[float]) -> np.ndarray:
    """exp(sigma_r * Z) for each uniform number of row r of `u` (rows from `units_each`), Z
    standard normal by inversion: Python's own inverse CDF and exp per number (mapped in C),
    the product sigma_r * Z in numpy (the same IEEE product), so bit for bit `lognormal`'s
    factor (`median * factor` is `lognormal`; sigma 0: exactly 1)."""
    flat = u.ravel().tolist()
    if _INV_CDF is None:
        z = np.array([_STD_NORMAL.inv_cdf(x) for x in flat])
    else:
        z = np.array(list(map(_INV_CDF, flat, repeat(0.0), repeat(1.0))))
    scaled = z.reshape(u.shape) * np.array(sigmas, dtype=np.float64)[:, None]
    return np.array(list(map(math.exp, scaled.ravel().tolist()))).reshape(u.shape)
