"""Keyed draws of the simulated system: one number from a key, in O(1), in pure Python.

Every property of a client (its device, its time zone, whether it is online in a slot) is a
function of (seed, purpose, client id, ...) through `raycompo.seeding.fold`: nothing is a
table of n rows, a client's draw never depends on which other clients were looked at, and
the inline and Ray backends (where the system lives in the driver) see the same numbers.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from raycompo.seeding import SYSTEM, fold

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
