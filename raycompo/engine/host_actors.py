"""Where a RayPool's client-host actors come from, and where they go when its run ends.

* `FreshHosts` (the default): each run starts its own host actors and kills them at its
  end; no actor outlives its run.
* `ReusedHosts`: the host actors are kept, idle, after a run and reset (`Host.reset`: new
  config, seed, algorithm and client block; empty client states) for the next run in
  this process that asks for the same shape: the same placement group (or none), number
  of hosts and resources per host, in the same Ray session. A sweep's trial actor holds
  one (`shared_hosts()`), so its trials do not pay each host's start-up (a Ray worker
  process, torch's import and first use, the data load) again; see tune/trainable.py.
  Another shape kills the idle hosts and starts new ones; so does a run whose hosts
  failed or timed out. Idle hosts die with this process at the latest (Ray ends the
  actors a process owns with it, and their placement group's removal ends them too).

Results do not depend on which is used: `Host.reset` leaves a host as a new one would be
(tests/test_host_reuse.py). Every wait is bounded by the run's --host-timeout and names
the late hosts (the pool's `wait`).
"""

from __future__ import annotations

import atexit
import threading
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from raycompo.configuration.config import Resolved
from raycompo.engine.actor_failures import ACTOR_FAILURES
from raycompo.engine.host import Host
from raycompo.engine.placement import Placement

Wait = Callable[[list, str, list], list]
"""(futures, what, host indices) -> answers; raises HostTimeoutError naming the late hosts."""

CLOSE_WAIT_S = 30.0
"""How long a release waits for hosts to drop their run's state before killing them."""


class HostSource(Protocol):
    """What RayPool needs: host actors for a run, ready (data loaded), and their release."""

    def acquire(self, resolved: Resolved, placement: Placement, placement_group: Any, namespace: str | None,
                wait: Wait, run: str | None = None) -> list[Any]:
        """`run` names the run in the actors' repr (the dashboard's Repr column)."""
        ...

    def release(self, actors: list[Any], healthy: bool) -> None:
        """`healthy`: every call of the run on these hosts answered in time."""
        ...


def host_args(resolved: Resolved, placement: Placement, j: int) -> tuple:
    """Host j's arguments after `resolved`: (client ids, device, torch threads, state budget)."""
    cfg = resolved.config
    return (placement.blocks[j], None, max(1, int(cfg.cpus_per_actor)), cfg.state_budget_bytes(placement.n_hosts))


def create_hosts(resolved: Resolved, placement: Placement, placement_group: Any, namespace: str | None,
                 run: str | None = None) -> list[Any]:
    """New host actors `clients-<j>` (in `namespace`), created and not waited for: they
    start (a worker process, torch's import, the data) while the caller goes on."""
    import ray

    actor_cls = ray.remote(Host)
    actors: list[Any] = []
    try:
        for j in range(placement.n_hosts):
            opts: dict[str, Any] = {"name": f"clients-{j}", **placement.actor_options(j, placement_group)}
            if namespace:
                opts["namespace"] = namespace
                wait_name_free(f"clients-{j}", namespace)
            actors.append(actor_cls.options(**opts).remote(resolved, *host_args(resolved, placement, j), run=run))
    except BaseException:
        kill(actors)
        raise
    return actors


def wait_ready(actors: list[Any], wait: Wait) -> list[Any]:
    """`actors` once every one is ready (`Host.ready`); all killed if one fails (bad data or
    settings: the error is raised as itself) or is late."""
    try:
        # fail early: data, settings; and never wait forever for resources to free up
        wait([a.ready.remote() for a in actors], "start (actors pending for free resources, or loading data)",
             list(range(len(actors))))
    except BaseException:
        kill(actors)
        raise
    return actors


def start_hosts(resolved: Resolved, placement: Placement, placement_group: Any, namespace: str | None,
                wait: Wait, run: str | None = None) -> list[Any]:
    """New host actors `clients-<j>` (in `namespace`), once they are ready (`wait_ready`)."""
    return wait_ready(create_hosts(resolved, placement, placement_group, namespace, run), wait)


NAME_FREE_TIMEOUT_S = 30.0
"""How long a new host waits for its name to be released by a killed one of the same name."""


def wait_name_free(name: str, namespace: str, timeout_s: float = NAME_FREE_TIMEOUT_S) -> None:
    """Return once no live actor holds `name` in `namespace` (a killed run's host releases
    its name a moment after `ray.kill`); a RuntimeError naming it after `timeout_s`."""
    taken = names_still_taken([name], namespace, timeout_s)
    if taken:
        raise RuntimeError(f"actor name {name!r} in namespace {namespace!r} still taken after {timeout_s:g} s")


def names_still_taken(names: list[str], namespace: str | None, timeout_s: float) -> list[str]:
    """Wait (at most `timeout_s`) until no live actor holds any of `names` in `namespace`
    (None: this job's); the names still taken then."""
    import time

    import ray

    deadline = time.monotonic() + timeout_s
    taken = list(names)
    while True:
        still = []
        for name in taken:
            try:
                ray.get_actor(name, namespace=namespace)
                still.append(name)
            except ValueError:
                pass  # no such actor: free
        taken = still
        if not taken or time.monotonic() >= deadline:
            return taken
        time.sleep(0.05)


def kill(actors: list[Any]) -> None:
    import ray

    for a in actors:
        try:
            ray.kill(a)
        except Exception:
            pass  # already gone


def drop_run_state(actors: list[Any]) -> bool:
    """Ask the hosts to drop their run's client states and spill files (`Host.close`);
    whether all did within CLOSE_WAIT_S (a dead or stuck host did not)."""
    import ray

    try:
        futures = [a.close.remote() for a in actors]
        done, pending = ray.wait(futures, num_returns=len(futures), timeout=CLOSE_WAIT_S)
        if pending:
            return False
        ray.get(done)
        return True
    except Exception:
        return False


class FreshHosts:
    """Start the run's hosts; kill them at its end (what a run does by default)."""

    def acquire(self, resolved: Resolved, placement: Placement, placement_group: Any, namespace: str | None,
                wait: Wait, run: str | None = None) -> list[Any]:
        return start_hosts(resolved, placement, placement_group, namespace, wait, run)

    def release(self, actors: list[Any], healthy: bool) -> None:
        drop_run_state(actors)
        kill(actors)


class PrestartedHosts:
    """Host actors the caller created (`create_hosts`) while the driver actor starts, so
    the driver and its hosts start in parallel (engine/driver.py). The driver waits for
    them to be ready and kills them at its end, like FreshHosts. They belong to the caller,
    not to the driver: `RemoteDriver.close` kills them too, so a driver that died does not
    leave them behind."""

    def __init__(self, actors: list[Any]):
        self.actors = actors

    def acquire(self, resolved: Resolved, placement: Placement, placement_group: Any, namespace: str | None,
                wait: Wait, run: str | None = None) -> list[Any]:
        if len(self.actors) != placement.n_hosts:  # the driver's plan differs from the caller's
            kill(self.actors)
            return start_hosts(resolved, placement, placement_group, namespace, wait, run)
        return wait_ready(self.actors, wait)

    def release(self, actors: list[Any], healthy: bool) -> None:
        drop_run_state(actors)
        kill(actors)


class ReusedHosts:
    """Host actors kept from one run to the next in this process (see the module doc).
    At most one idle set is kept; a run that finds it leased (runs at once in one process)
    gets fresh hosts, kept in turn when it ends. `starts` / `resets` count the host sets
    started and reset (tests and benchmarks read them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: tuple[tuple, list[Any]] | None = None
        self._lent: dict[int, tuple[tuple, list[Any]]] = {}
        self.starts = 0
        self.resets = 0

    @staticmethod
    def shape(resolved: Resolved, placement: Placement, placement_group: Any) -> tuple:
        """What must match for hosts to be reused: the Ray session (node and job of this
        process), the placement group, and the hosts' number and resources."""
        import ray

        ctx = ray.get_runtime_context()
        pg = placement_group.id.hex() if placement_group is not None else None
        nodes = tuple(placement.node_ids) if placement_group is None else ()
        return (ctx.get_node_id(), ctx.get_job_id(), pg, placement.extra_bundles, placement.n_hosts,
                placement.cpus_per_actor, placement.gpus_per_actor, placement.strategy, nodes,
                max(1, int(resolved.config.cpus_per_actor)))

    def acquire(self, resolved: Resolved, placement: Placement, placement_group: Any, namespace: str | None,
                wait: Wait, run: str | None = None) -> list[Any]:
        """The idle hosts reset for `resolved` if their shape matches, else new ones, named
        in a namespace of their own (`raycompo-hosts-<id>`: they outlive the run's; a new
        one per set, as a killed set's names may not be free yet)."""

        key = self.shape(resolved, placement, placement_group)
        with self._lock:
            idle, self._idle = self._idle, None
        if idle is not None and idle[0] != key:
            kill(idle[1])
            idle = None
        actors = None
        if idle is not None:
            actors = idle[1]
            futures = [a.reset.remote(resolved, *host_args(resolved, placement, j)) for j, a in enumerate(actors)]
            try:
                wait(futures, "reset for a new run (loading data)", list(range(len(actors))))
                self.resets += 1
            except ACTOR_FAILURES:
                kill(actors)  # a host died or hangs while idle: start new ones
                actors = None
            except BaseException:
                kill(actors)  # bad data or settings: as a fresh start would fail
                raise
        if actors is None:
            # Ray reads an actor's repr once: reused hosts name the run that started them
            label = f"{run}, then the trials after it" if run else None
            actors = start_hosts(resolved, placement, placement_group, f"raycompo-hosts-{uuid.uuid4().hex[:8]}", wait, label)
            self.starts += 1
        with self._lock:
            self._lent[id(actors)] = (key, actors)
        return actors

    def release(self, actors: list[Any], healthy: bool) -> None:
        """Keep `actors` idle for the next run if the run went well and they dropped its
        state in time; otherwise kill them."""
        with self._lock:
            lent = self._lent.pop(id(actors), None)
        if lent is None or not healthy or not drop_run_state(actors):
            kill(actors)
            return
        with self._lock:
            older, self._idle = self._idle, lent
        if older is not None:
            kill(older[1])

    def close(self) -> None:
        """Kill the idle hosts (leased ones end with their run)."""
        with self._lock:
            idle, self._idle = self._idle, None
        if idle is not None:
            kill(idle[1])

    @property
    def idle(self) -> list[Any]:
        with self._lock:
            return list(self._idle[1]) if self._idle is not None else []


_SHARED: ReusedHosts | None = None


def shared_hosts() -> ReusedHosts:
    """This process's ReusedHosts (created on first use; its idle hosts are killed at exit)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = ReusedHosts()
        atexit.register(_close_shared)
    return _SHARED


def _close_shared() -> None:
    if _SHARED is not None:
        try:
            _SHARED.close()
        except Exception:
            pass  # Ray already shut down: the hosts ended with it
