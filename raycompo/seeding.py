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


def derive_seed(*key: int) -> int:
    """A 63-bit seed from a tuple of non-negative integers."""
    words = [int(k) & 0xFFFFFFFF for k in key]
    return int(np.random.SeedSequence(words).generate_state(1, dtype=np.uint64)[0] >> 1)


def generator(*key: int) -> torch.Generator:
    """A CPU torch generator seeded by `key`."""
    g = torch.Generator()
    g.manual_seed(derive_seed(*key))
    return g


def numpy_rng(*key: int) -> np.random.Generator:
    return np.random.default_rng(derive_seed(*key))
