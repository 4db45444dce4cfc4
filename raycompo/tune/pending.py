"""How many trials Ray Tune keeps pending: as many as the cluster runs at once.

Tune creates a trial, and asks Ray for its placement group, only while fewer than
`TUNE_MAX_PENDING_TRIALS_PG` trials are pending. With a searcher (every raycompo sweep has
one) and no `max_concurrent_trials`, that is 1 (tune_controller.py:
`_get_max_pending_trials`). So on 2 slots the second trial was created only once the first
was running, after its actor's start (a new process importing torch, Tune and raycompo:
2-3 s here), and its own actor then started alone, 2-3 s later. And where a finished
trial's actor was free by then, Tune gave it to that trial (`reuse_actors`) and removed the
actor it had started for it, and the sweep's end waited for that removal (up to 5 s, 2 s
here). `pending_trials` lets Tune create as many trials as the cluster's resources hold
at once, so their actors start together; a user's own TUNE_MAX_PENDING_TRIALS_PG is kept.

Measured (`python -m raycompo.bench population --sweep`, 29 November 2026, 2 CPUs, beside
the commit before in the same minutes): the 16-trial grid one trial at a time 12.7 s, where
it took 22-25 s; as populations of 8, 8.3 s where it took 10.3-10.9 s (docs/benchmarks.md).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

ENV = "TUNE_MAX_PENDING_TRIALS_PG"


def trial_needs(bundles: list[dict[str, float]]) -> dict[str, float]:
    """What one trial's placement group of `bundles` needs in all, by resource."""
    need: dict[str, float] = {}
    for bundle in bundles:
        for key, value in bundle.items():
            need[key] = need.get(key, 0.0) + float(value)
    return need


def trials_at_once(bundles: list[dict[str, float]], resources: dict[str, float]) -> int:
    """How many placement groups of `bundles` (one trial's) the cluster's `resources` hold
    together: the fewest over the resources a trial needs; at least 1 (a trial that does
    not fit is refused before, `sweep.check_resources`)."""
    need = trial_needs(bundles)
    fits = [math.floor(resources.get(key, 0.0) / value + 1e-9) for key, value in need.items() if value > 0]
    return max(1, min(fits)) if fits else 1


_LOCK = threading.Lock()
_ACTIVE = [0]
"""Blocks of `pending_trials` open in this process (sweeps in threads): the variable is
set by the first and removed by the last."""


@contextmanager
def pending_trials(n: int) -> Iterator[None]:
    """Within the block, Tune keeps up to `n` trials pending (the TuneController reads
    TUNE_MAX_PENDING_TRIALS_PG when it starts); a value the user set is kept. A process-wide
    variable: sweeps run at once in threads of one process share the first one's value.
    Through Ray Client (`ray://`) the fit runs remotely and Tune keeps its default."""
    with _LOCK:
        if _ACTIVE[0] == 0 and ENV in os.environ:  # the user's own
            owner = False
        else:
            owner = True
            if _ACTIVE[0] == 0:
                os.environ[ENV] = str(max(1, n))
            _ACTIVE[0] += 1
    try:
        yield
    finally:
        if owner:
            with _LOCK:
                _ACTIVE[0] -= 1
                if _ACTIVE[0] == 0:
                    os.environ.pop(ENV, None)
