"""The one backend registry: a backend's name -> what it is and whether it needs Ray.
`--backend`, `RunConfig.backend`, the runner and the sweeps all read it.

This module is names only (it sits below `config`, which checks a run's backend against
it); how each backend's pool is made lives in the engine (`engine.pool_factory.POOLS`, the only
layer that imports Ray). A new backend (a vectorized or GPU-batched pool, say) is one
entry here and one in `engine.pool_factory.POOLS`, with a class that implements
`engine.pools.Pool`; tests/test_backends.py checks that the two tables name the same
backends.
"""

from __future__ import annotations

from dataclasses import dataclass

from raycompo.errors import ConfigError


@dataclass(frozen=True)
class Backend:
    name: str
    description: str
    uses_ray: bool
    """Whether the run starts (or joins) Ray, with its driver as an actor."""


REGISTRY: dict[str, Backend] = {
    "ray": Backend("ray", "client hosts as Ray actors, the driver as an actor", True),
    "inline": Backend("inline", "one process, sequential: the reference", False),
}


def backend_names() -> tuple[str, ...]:
    """The registered backends' names ('ray', 'inline')."""
    return tuple(REGISTRY)


def get_backend(name: str) -> Backend:
    """The backend called `name`; a ConfigError naming the registered ones otherwise."""
    if name not in REGISTRY:
        raise ConfigError(f"unknown backend {name!r}; choose one of: {', '.join(REGISTRY)}")
    return REGISTRY[name]
