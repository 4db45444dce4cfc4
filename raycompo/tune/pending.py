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

Measured (`python -m raycompo.bench population --sweep`, 29 November 2026, 2 CPUs): the
16-trial grid one trial at a time 12.5 s, where it took 20.3 s; as populations of 8, 7.7 s
where it took 10.9 s (docs/benchmarks.md).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager

ENV = "TUNE_MAX_PENDING_TRIALS_PG"


def trials_at_once(bundles: list[dict[str, float]], resources: dict[str, float]) -> int:
    """How many placement groups of `bundles` (one trial's) the cluster's `resources` hold
    together: the fewest over the resources a trial needs; at least 1 (a trial that does
    not fit is refused before, `sweep.check_resources`)."""
    need: dict[str, float] = {}
    for bundle in bundles:
        for key, value in bundle.items():
            need[key] = need.get(key, 0.0) + float(value)
    fits = [math.floor(resources.get(key, 0.0) / value + 1e-9) for key, value in need.items() if value > 0]
    return max(1, min(fits)) if fits else 1


@contextmanager
def pending_trials(n: int) -> Iterator[None]:
    """Within the block, Tune keeps up to `n` trials pending (the TuneController reads
    TUNE_MAX_PENDING_TRIALS_PG when it starts); a value the user set is kept."""
    if ENV in os.environ:
        yield
        return
    os.environ[ENV] = str(max(1, n))
    try:
        yield
    finally:
        os.environ.pop(ENV, None)
