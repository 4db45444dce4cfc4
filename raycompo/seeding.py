"""Deterministic random streams.

Every random draw in a run comes from a generator seeded by a key such as
(seed, client, round, step). The results therefore do not depend on which host
(process, actor, machine) runs a client, nor on the backend.
"""

from __future__ import annotations

import numpy as np
import torch

# Stream tags keep draws of different purposes independent.
SERVER = 1
CLIENT = 2
DATA = 3
INIT = 4
CLIENT_DATA = 5
"""Per-client data generated on demand from (seed, CLIENT_DATA, client id), e.g. the
synthetic task: a client's data never depends on which other clients are built."""
SYSTEM = 6
"""The simulated system's draws (raycompo/system/): devices, availability, candidates for a
cohort, keyed by (seed, SYSTEM, purpose, client or round, ...)."""
COMPRESS = 7
"""A contribution's compression draws (raycompo/compression/: QSGD's levels, rand-k's
entries), keyed by (seed, COMPRESS, client, round, exchange of the round, key)."""
PRIVACY = 8
"""The DP mechanism's Gaussian noise, keyed by (seed, PRIVACY, round, exchange, key)."""
DISPATCH = 9
"""A client's repeat dispatch at one model version (asynchronous runs): its draws are keyed by
(seed, CLIENT, client, version, DISPATCH, k) for its k-th repeat (`client_prefix`)."""


_M64 = (1 << 64) - 1


def _splitmix64(z: int) -> int:
    """One step of splitmix64 (Steele et al. 2014): a fast, well-mixed 64-bit bijection."""
    z = (z + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def derive_seed(*key: int) -> int:
    """A 63-bit seed from a tuple of non-negative integers (order matters).

    Pure Python and a few microseconds: it runs at every local step of every client."""
    return fold(0, *key) >> 1


def fold(h: int, *key: int) -> int:
    """The key's 64-bit state from state `h`: derive_seed(*a, *b) == fold(fold(0, *a), *b) >> 1,
    so a prefix (seed, client, round) is folded once and each step adds its own parts."""
    for k in key:
        h = _splitmix64(h ^ (int(k) & _M64))
    return h


def client_prefix(seed: int, client: int, round_: int, dispatch: int = 0) -> int:
    """The 64-bit state of a client's draws in a round: fold(seed, CLIENT, client, round),
    then (DISPATCH, k) for its k-th repeat dispatch at one model version (k > 0; a first
    dispatch keys its draws as a synchronous round does)."""
    h = fold(0, seed, CLIENT, client, round_)
    return h if dispatch == 0 else fold(h, DISPATCH, dispatch)


FOLD_MANY_PYTHON = 16
"""`fold_many` of this many prefixes or fewer folds them one by one in Python: numpy's
per-call cost is more than the arithmetic on so few."""


def fold_many(prefixes: np.ndarray, *key: int | np.ndarray) -> np.ndarray:
    """`fold(p, *key)` for every 64-bit state p of `prefixes` (uint64) at once; a part of
    the key may be an array of one int per prefix (e.g. the chunk's client ids). numpy's
    uint64 arithmetic wraps modulo 2^64, as `_splitmix64`'s masks do, so each entry is
    bit-identical to the pure-Python fold (tests/test_batched_step.py)."""
    if len(prefixes) <= FOLD_MANY_PYTHON and not any(isinstance(k, np.ndarray) for k in key):
        return np.array([fold(int(p), *key) for p in prefixes], dtype=np.uint64)  # a few: faster in Python
    h = np.array(prefixes, dtype=np.uint64)
    _fold_into(h, key)
    return h


def fold_ids(prefix: int, ids: np.ndarray, *key: int | np.ndarray) -> np.ndarray:
    """`fold(prefix, c, *key)` for every c of `ids` (int64) at once: `fold_many` of a
    prefix shared by all, without building the array of prefixes (bit-identical)."""
    h = np.asarray(ids, dtype=np.int64).view(np.uint64) ^ np.uint64(int(prefix) & _M64)  # a new array
    splitmix_into(h)
    _fold_into(h, key)
    return h


def _fold_into(h: np.ndarray, key: tuple[int | np.ndarray, ...]) -> None:
    """Each part of `key` folded into the 64-bit states `h`, in place (`fold`'s loop)."""
    for k in key:
        if isinstance(k, np.ndarray):
            h ^= np.asarray(k, dtype=np.int64).view(np.uint64) if k.dtype != np.uint64 else k
        else:
            h ^= np.uint64(int(k) & _M64)
        splitmix_into(h)


# splitmix64's constants as numpy scalars, made once (a conversion per call costs more than
# the arithmetic on a cohort's ids)
_GAMMA, _MIX1, _MIX2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def splitmix_into(h: np.ndarray) -> None:
    """`_splitmix64` of each 64-bit state of `h` (any shape), in place (numpy's uint64 arithmetic wraps
    modulo 2^64 as the masks do)."""
    h += _GAMMA
    h ^= h >> _S30
    h *= _MIX1
    h ^= h >> _S27
    h *= _MIX2
    h ^= h >> _S31


def generator_from(prefix: int, *rest: int) -> torch.Generator:
    """`generator(*key, *rest)` where prefix = fold(0, *key)."""
    g = torch.Generator()
    g.manual_seed(fold(prefix, *rest) >> 1)
    return g


def generator(*key: int) -> torch.Generator:
    """A CPU torch generator seeded by `key`."""
    g = torch.Generator()
    g.manual_seed(derive_seed(*key))
    return g


def numpy_rng(*key: int) -> np.random.Generator:
    return np.random.default_rng(derive_seed(*key))
