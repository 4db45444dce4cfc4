"""Name -> class registries filled by importing every module of a package.

A new built-in task or algorithm is one new module with a class that sets `name`;
nothing else needs editing. A user's own classes are found by `raycompo.configuration.plugins`.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def _subclasses(base: type) -> list[type]:
    out, todo = [], [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            out.append(sub)
            todo.append(sub)
    return out


def discover(package: ModuleType, base: type) -> dict[str, type]:
    """Import all modules of `package`; return {cls.name: cls} for the subclasses of `base`
    defined in `package` that set `name` themselves (a user's subclass, imported from
    elsewhere, never shadows a built-in here)."""
    for mod in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(mod.name)
    prefix = package.__name__ + "."
    return {cls.__dict__["name"]: cls for cls in _subclasses(base)
            if "name" in cls.__dict__ and cls.__module__.startswith(prefix)}
