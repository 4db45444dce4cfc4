"""Fault injection: kill one of a run's named actors after a given round (`KillActor`) or
while it restores a checkpoint (`KillOnRestore`), to test and to
measure the recovery from a dead actor (tests/test_durability.py,
`python -m raycompo.bench recovery`)."""

from __future__ import annotations

import os
import time

from raycompo.watch.observers import Observer, Row, RunInfo


class KillActor(Observer):
    """Kills the run's actor `name` ('clients-<j>' or 'driver') right after round `after`
    is written, at most `times` times (replays reach that round again), as a dead process
    would: `ray.kill(..., no_restart=True)`, and returns once its process has ended
    (`kill`), so that what follows the row (e.g. the checkpoint of the next round, when it
    came in the same driver call) cannot read the actor it killed. `killed_at`:
    time.perf_counter() of each kill."""

    def __init__(self, name: str, after: int, times: int = 1, namespace: str | None = None):
        self.name, self.after, self.times, self.namespace = name, after, times, namespace
        self.killed_at: list[float] = []

    def on_start(self, info: RunInfo) -> None:
        self.namespace = self.namespace or info.namespace

    def on_row(self, row: Row) -> None:
        if row["round"] == self.after and len(self.killed_at) < self.times:
            self.killed_at.append(kill(self.name, self.namespace))


def kill(name: str, namespace: str | None, timeout: float = 30.0) -> float:
    """Kill the run's actor `name` as a dead process would, and wait (at most `timeout`
    seconds; then a RuntimeError) until Ray has released its name and, when the actor runs
    on this machine, its process has ended: Ray frees the name before the process exits,
    and a process that still runs may still answer a call. Returns time.perf_counter() of
    the kill."""
    import ray

    from raycompo.engine.host_actors import names_still_taken

    actor = ray.get_actor(name, namespace=namespace)
    pid = ray.get(actor.__ray_call__.remote(lambda _self: os.getpid()), timeout=timeout)
    ray.kill(actor, no_restart=True)
    at = time.perf_counter()
    deadline = time.monotonic() + timeout
    if names_still_taken([name], namespace, timeout) or not _ended(pid, deadline):
        raise RuntimeError(f"actor {name!r} of namespace {namespace!r} still alive {timeout:g} s after it was killed")
    return at


def _ended(pid: int, deadline: float) -> bool:
    """Whether process `pid` ended (or is not on this machine: nothing to wait for) by
    `deadline` (time.monotonic()); an exited process its parent has not reaped counts."""
    import psutil

    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


class KillOnRestore:
    """A context manager: while it is active, each restore of a checkpoint (the recovery's
    or `resume=True`'s) first kills the run's actor `name` ('clients-<j>' or 'driver'), at
    most `times` times: a death *during* recovery, once the new driver and hosts have
    started and before their states are loaded. It wraps `restore` of the driver as this
    process calls it (`RemoteDriver` for the driver actor, `Federation` for a local one).
    `killed_at`: time.perf_counter() of each kill.

        with KillOnRestore("clients-0", namespace=ns):
            run(cfg, namespace=ns, observers=[KillActor("clients-1", after=3)])
    """

    def __init__(self, name: str, namespace: str, times: int = 1):
        self.name, self.namespace, self.times = name, namespace, times
        self.killed_at: list[float] = []
        self._saved: list[tuple[type, object]] = []

    def __enter__(self) -> KillOnRestore:
        from raycompo.engine.driver import RemoteDriver
        from raycompo.engine.federation import Federation

        for cls in (Federation, RemoteDriver):
            original = cls.__dict__.get("restore")
            self._saved.append((cls, original))
            cls.restore = self._wrap(original)  # type: ignore[attr-defined]
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, original in self._saved:
            if original is None:
                del cls.restore  # type: ignore[attr-defined]
            else:
                cls.restore = original  # type: ignore[attr-defined]
        self._saved = []

    def _wrap(self, original):
        pid = os.getpid()

        def restore(fed, ckpt):
            # only here: a driver actor started while this is active may carry a copy along
            if os.getpid() == pid and len(self.killed_at) < self.times:
                self.killed_at.append(kill(self.name, self.namespace))
            if original is not None:
                return original(fed, ckpt)
            return fed.__getattr__("restore")(ckpt)  # RemoteDriver: forwarded to the driver actor

        return restore
