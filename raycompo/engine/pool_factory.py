"""How each backend's pool is made: the backend's name -> a function that makes its `Pool`.
Beside pools.py (the protocol and the inline pool) and ray_pool.py (Ray's), above both, so
that neither imports the other."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raycompo.configuration.backends import get_backend
from raycompo.configuration.config import Resolved
from raycompo.engine.pools import InlinePool, Pool


def _ray_pool(resolved: Resolved, namespace: str | None = None, placement_group: Any = None, run: str | None = None,
              hosts: Any = None) -> Pool:
    from raycompo.engine.ray_pool import RayPool  # imports Ray: only when a Ray pool is made

    return RayPool(resolved, namespace=namespace, placement_group=placement_group, run=run, hosts=hosts)


def _inline_pool(resolved: Resolved, hosts: Any = None, **_: Any) -> Pool:
    """An `InlinePool`; with `hosts`, a seat of a population (engine/population.py): its pool."""
    return InlinePool(resolved) if hosts is None else hosts.inline_pool(resolved)


POOLS: dict[str, Callable[..., Pool]] = {"ray": _ray_pool, "inline": _inline_pool}
"""Backend name (`raycompo.configuration.backends.REGISTRY`) -> (resolved, namespace=None,
placement_group=None, run=None, hosts=None) -> Pool; `run` names the run in the host
actors' repr; `hosts`: where a Ray pool's host actors come from (engine/host_actors.py), or
an inline run's seat in a population (engine/population.py: its pool meets the others')."""


def pool_factory(backend: str) -> Callable[..., Pool]:
    """How the pool of the backend named `backend` is made (see `POOLS`)."""
    return POOLS[get_backend(backend).name]


def make_pool(resolved: Resolved, **options: Any) -> Pool:
    """The pool of `resolved.config.backend` (options: namespace, placement_group, run, hosts)."""
    return pool_factory(resolved.config.backend)(resolved, **options)
