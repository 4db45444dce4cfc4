"""Algorithms by name. Each is a small module with no Ray in it; a module that defines a
subclass of `Algorithm` with a `name` is found automatically. A user's own algorithm is
named by a spec ('file.py:Class', 'package.module:Class') or an entry point: see
`raycompo.plugins`."""

from __future__ import annotations

from raycompo.algorithms.base import Algorithm, LocalSettings, local_sgd


def algorithms() -> dict[str, type[Algorithm]]:
    """Every registered algorithm by name: the built-ins and installed packages' entry points."""
    from raycompo.plugins import registered

    return registered("algorithm")


def algorithm_class(spec: str | type) -> type[Algorithm]:
    """The algorithm a name, 'file.py:Class' or 'package.module:Class' spec names."""
    from raycompo.plugins import load

    return load("algorithm", spec)


__all__ = ["Algorithm", "LocalSettings", "algorithm_class", "algorithms", "local_sgd"]
