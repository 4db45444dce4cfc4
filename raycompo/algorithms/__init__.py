"""Algorithms by name. Each is a small module with no Ray in it; a module that defines a
subclass of `Algorithm` with a `name` is found automatically. The registry (built-ins and
installed packages' entry points: `raycompo.list_algorithms()`) and a user's own algorithm,
named by a spec ('file.py:Class', 'package.module:Class'), are `raycompo.configuration.plugins`'s: it sits
above this package."""

from __future__ import annotations

from raycompo.algorithms.base import Algorithm, LocalSettings, local_sgd

__all__ = ["Algorithm", "LocalSettings", "local_sgd"]
