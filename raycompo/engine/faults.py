"""Fault injection: kill one of a run's named actors after a given round, to test and to
measure the recovery from a dead actor (tests/test_durability.py,
`python -m raycompo.bench recovery`)."""

from __future__ import annotations

import time

from raycompo.engine.observers import Observer, Row, RunInfo


class KillActor(Observer):
    """Kills the run's actor `name` ('clients-<j>' or 'driver') right after round `after`
    is written, at most `times` times (replays reach that round again), as a dead process
    would: `ray.kill(..., no_restart=True)`. `killed_at`: time.perf_counter() of each kill."""

    def __init__(self, name: str, after: int, times: int = 1, namespace: str | None = None):
        self.name, self.after, self.times, self.namespace = name, after, times, namespace
        self.killed_at: list[float] = []

    def on_start(self, info: RunInfo) -> None:
        self.namespace = self.namespace or info.namespace

    def on_row(self, row: Row) -> None:
        if row["round"] == self.after and len(self.killed_at) < self.times:
            import ray

            ray.kill(ray.get_actor(self.name, namespace=self.namespace), no_restart=True)
            self.killed_at.append(time.perf_counter())
