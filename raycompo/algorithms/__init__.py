"""Algorithms by name. Each is a small module with no Ray in it; a module that defines a
subclass of `Algorithm` with a `name` is found automatically."""

from __future__ import annotations

import sys

from raycompo.algorithms.base import Algorithm, LocalSettings, local_sgd
from raycompo.registry import discover, lookup


def algorithms() -> dict[str, type[Algorithm]]:
    return discover(sys.modules[__name__], Algorithm)


def algorithm_class(name: str) -> type[Algorithm]:
    return lookup(algorithms(), name, "algorithm")


__all__ = ["Algorithm", "LocalSettings", "algorithm_class", "algorithms", "local_sgd"]
