"""Where the driver (a `Federation`) lives: in this process, or as the Ray actor `driver`.

Both are used the same way by the run loop: `RemoteDriver` forwards any method call to
the actor and waits for it with `ray_get`, so there is no hand-written proxy per method.
"""

from __future__ import annotations

import functools
from typing import Any

from raycompo.configuration.backends import Backend
from raycompo.configuration.config import Resolved
from raycompo.engine import dashboard_start
from raycompo.engine.federation import Federation
from raycompo.engine.pool_factory import pool_factory

CLOSE_TIMEOUT_S = 10.0
"""How long closing waits for the driver actor to end its hosts before killing it, and then
again at most for the killed actors' names to be released (a warning if they are not)."""


class RemoteDriver:
    """A `Federation` running in the actor `driver`; method calls block until they return."""

    def __init__(self, actor: Any, hosts: list[Any] | None = None, namespace: str | None = None):
        self._actor = actor
        self._hosts = hosts or []
        """Host actors this process started for the driver (`PrestartedHosts`): this
        process owns them, so closing kills them as well."""
        self._namespace = namespace

    # No timeout on the driver's own calls: a round may legitimately take long, and every
    # wait inside it (on host actors) is bounded by --host-timeout; Ctrl-C ends it at once.
    def __getattr__(self, name: str) -> Any:
        from raycompo.engine.ray_pool import ray_get

        method = getattr(self._actor, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return ray_get(method.remote(*args, **kwargs))

        return call

    def close(self) -> None:
        import ray

        from raycompo.engine.ray_pool import ray_get

        try:  # the driver kills its hosts; never wait long on a driver that is stuck
            ray_get(self._actor.close.remote(), timeout=CLOSE_TIMEOUT_S)
        except Exception:
            pass  # dead or stuck: killing it ends the hosts it started (they fate-share with it)
        ray.kill(self._actor)
        if self._hosts:  # the hosts started here are this process's: they end here
            from raycompo.engine.host_actors import kill

            kill(self._hosts)
        self._wait_gone()

    def _wait_gone(self) -> None:
        """`ray.kill` returns before the actors end: wait (bounded) until their names are
        released, so that when a run returns, none of its actors can still be found."""
        import logging

        from raycompo.engine.host_actors import names_still_taken

        names = ["driver"] + [f"clients-{j}" for j in range(len(self._hosts))]
        taken = names_still_taken(names, self._namespace, CLOSE_TIMEOUT_S)
        if taken:
            logging.getLogger(__name__).warning(
                "actors %s of namespace %r still alive %g s after they were killed", taken, self._namespace,
                CLOSE_TIMEOUT_S)


def start_driver(resolved: Resolved, backend: Backend, where: str = "actor", namespace: str | None = None,
                 placement_group: Any = None, run: str | None = None, hosts: Any = None) -> Any:
    """A started driver: a Federation here (`where="local"`, or a backend without Ray) or
    a RemoteDriver around the actor `driver` in `namespace`. `run` (default: the
    namespace) names the run in the actors' repr, which the Ray dashboard shows. `hosts`:
    where the Ray pool's host actors come from (engine/host_actors.py; default: started
    for the run); it lives in this process, so it needs `where="local"`."""
    run = run or namespace
    if not backend.uses_ray:  # (`hosts` here: a population's seat, engine/population.py)
        factory = pool_factory(backend.name)
        return Federation(resolved, factory if hosts is None else functools.partial(factory, hosts=hosts), run=run)
    fed = _start_on_ray(resolved, backend, where, namespace, placement_group, run, hosts)
    dashboard_start.actors_started()  # the dashboard waited for the run's actors (engine/dashboard_start.py)
    return fed


def _start_on_ray(resolved: Resolved, backend: Backend, where: str, namespace: str | None, placement_group: Any,
                  run: str | None, hosts: Any) -> Any:
    """`start_driver` with Ray: the driver here or in its actor, and the pool's hosts."""
    factory = functools.partial(pool_factory(backend.name), namespace=namespace, placement_group=placement_group, run=run,
                                hosts=hosts)
    if where == "local":
        return Federation(resolved, factory, run=run)
    if hosts is not None:
        raise ValueError("hosts= (reused host actors) needs driver='local': the driver actor cannot use this process's")
    import ray

    from raycompo.engine.host_actors import PrestartedHosts, create_hosts, wait_name_free
    from raycompo.engine.placement import plan_placement

    # The hosts start now, beside the driver actor (each a worker process importing torch
    # and loading its data), rather than after it: the driver only waits for them.
    placement = plan_placement(resolved.config, resolved.n_clients, extra_bundles=0 if placement_group is None else 1)
    prestarted = create_hosts(resolved, placement, placement_group, namespace, run)
    factory = functools.partial(factory, hosts=PrestartedHosts(prestarted))
    try:
        if namespace:  # a recovery's new driver: the dead one's name may still be held a moment
            wait_name_free("driver", namespace)
        actor = ray.remote(Federation).options(name="driver", namespace=namespace, num_cpus=0)
        fed = RemoteDriver(actor.remote(resolved, factory, start=False, run=run), hosts=prestarted,
                           namespace=namespace)
    except BaseException:
        from raycompo.engine.host_actors import kill

        kill(prestarted)
        raise
    try:
        fed.start()
    except BaseException:
        fed.close()  # the caller never gets a handle to close
        raise
    return fed
