"""Name -> class registries filled by importing every module of a package.

A new task or algorithm is one new module with a class that sets `name`; nothing else
needs editing.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from raycompo.errors import ConfigError


def _subclasses(base: type) -> list[type]:
    out, todo = [], [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            out.append(sub)
            todo.append(sub)
    return out


def discover(package: ModuleType, base: type) -> dict[str, type]:
    """Import all modules of `package`; return {cls.name: cls} for subclasses of `base`
    that set `name` themselves."""
    for mod in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(mod.name)
    return {cls.__dict__["name"]: cls for cls in _subclasses(base) if "name" in cls.__dict__}


def lookup(registry: dict[str, type], name: str, kind: str) -> type:
    if name not in registry:
        raise ConfigError(f"unknown {kind} {name!r}; choose one of: {', '.join(sorted(registry))}")
    return registry[name]
