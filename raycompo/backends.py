"""The one backend registry: a backend's name -> how its pool is made and whether it
needs Ray. `--backend`, `RunConfig.backend`, the runner and the sweeps all read it.

A new backend (a vectorized or GPU-batched pool, say) is one entry here and a class
that implements `engine.pools.Pool`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raycompo.config import Resolved
    from raycompo.engine.pools import Pool


@dataclass(frozen=True)
class Backend:
    name: str
    description: str
    uses_ray: bool
    """Whether the run starts (or joins) Ray, with its driver as an actor."""
    make_pool: Callable[..., Pool]
    """(resolved, namespace=None, placement_group=None, run=None, hosts=None) -> Pool; `run`
    names the run in the host actors' repr; `hosts`: where a Ray pool's host actors come
    from (engine/host_actors.py), ignored by other backends."""


def _inline(resolved: Resolved, **_: Any) -> Pool:
    from raycompo.engine.pools import InlinePool

    return InlinePool(resolved)


def _ray(resolved: Resolved, namespace: str | None = None, placement_group: Any = None, run: str | None = None,
        hosts: Any = None) -> Pool:
    from raycompo.engine.ray_pool import RayPool

    return RayPool(resolved, namespace=namespace, placement_group=placement_group, run=run, hosts=hosts)


REGISTRY: dict[str, Backend] = {
    "ray": Backend("ray", "client hosts as Ray actors, the driver as an actor", True, _ray),
    "inline": Backend("inline", "one process, sequential: the reference", False, _inline),
}


def backend_names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def get_backend(name: str) -> Backend:
    from raycompo.errors import ConfigError

    if name not in REGISTRY:
        raise ConfigError(f"unknown backend {name!r}; choose one of: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def make_pool(resolved: Resolved, **options: Any) -> Pool:
    """The pool of `resolved.config.backend` (options: namespace, placement_group, run, hosts)."""
    return get_backend(resolved.config.backend).make_pool(resolved, **options)
