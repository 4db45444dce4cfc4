"""Finding a task or an algorithm (or a system profile's availability model or selection
policy: the kinds `availability` and `selection`; or a step of the uplink, `--uplink`: the
kind `uplink`) from what a user names, and shipping its code to Ray.

A *spec* names a class in one of four ways, wherever raycompo takes a task or an
algorithm (`--task`, `--algo`, a sweep's `algorithms:` keys, `raycompo.run(task, algo)`):

* a registered name, e.g. ``comfedl``: the built-ins (the modules of `raycompo.algorithms`
  and `raycompo.tasks`), then the names installed packages register through the entry
  point groups ``raycompo.algorithms`` and ``raycompo.tasks``;
* ``path/to/file.py:ClassName``: the file is imported as a module of its own (a relative
  path is looked up from the current folder, then from `base_dir`, e.g. a sweep file's);
* ``package.module:ClassName``: imported as usual;
* the class itself (Python API), also one defined in a notebook or in a script's
  ``__main__``.

Shipping: Ray rebuilds a run's classes in every actor from their pickles. A class from an
installed package is pickled by reference (the workers import the package, which must be
installed on every node); a class from a user's file or from a package that is not
installed (the user's own folder) is registered with cloudpickle to be pickled *by
value*, so its code travels with the run to every worker on every node, as classes from
``__main__`` or a notebook always do. A plugin's helper modules travel with it when they
belong to the same package (the whole top-level package is registered). A plugin file's
own folder is put on `sys.path` (as Python does for a script), so it may import the
user's other files there (``from my_base import Base``); each module of that folder it
imports is registered by value too. A module imported only later, inside a function run
on a worker, does not travel: install it, or import it at the top of the file.

Every spec is recorded as a string (`spec_of`) in config.json and checkpoints, so a run
can be resumed: a file is recorded by its absolute path; a class made by a function (e.g.
`raycompo.task_from_arrays`) by the module-level name bound to it, where there is one. A
class defined in ``__main__`` or a notebook is recorded as ``__main__:Name``; it can be
found again only in the same process, or by passing the class again (`session_only`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from raycompo.errors import ConfigError

KINDS = ("algorithm", "task", "availability", "selection", "uplink")
GROUPS = {"algorithm": "raycompo.algorithms", "task": "raycompo.tasks", "availability": "raycompo.availability",
          "selection": "raycompo.selection", "uplink": "raycompo.uplink"}
"""The entry point group through which an installed package registers names of a kind
(`availability`: a system profile's availability model, `selection`: its selection policy;
raycompo/system/, docs/system.md; `uplink`: a step of what clients send up,
raycompo/compression/uplink.py, docs/compression.md)."""

SETTINGLESS = ("uplink",)
"""Kinds whose classes are made without settings (no `Settings` dataclass asked for)."""

_LOADED: dict[tuple[str, str], type] = {}
"""(kind, spec) -> class already found in this process (also a class given as an object,
or one sent along with a sweep's trials: see `remember`)."""
_SPECS: dict[type, str] = {}
"""class -> the spec it was found by (the reverse of _LOADED)."""


def _base(kind: str) -> tuple[type, ModuleType | None]:
    """The base class of `kind` and the package of its built-ins (None: the system's kinds,
    whose built-ins the system module lists itself)."""
    if kind == "availability":
        from raycompo.system.availability import AvailabilityModel

        return AvailabilityModel, None
    if kind == "selection":
        from raycompo.system.selection import SelectionPolicy

        return SelectionPolicy, None
    if kind == "uplink":
        from raycompo.compression.uplink import UplinkStep

        return UplinkStep, None
    if kind == "algorithm":
        import raycompo.algorithms as pkg
        from raycompo.algorithms.base import Algorithm

        return Algorithm, pkg
    if kind == "task":
        import raycompo.tasks as pkg
        from raycompo.tasks.base import Task

        return Task, pkg
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def is_spec_string(spec: str) -> bool:
    """True for ``file.py:Class`` and ``package.module:Class`` (not a registered name)."""
    return ":" in spec


# --- registered names --------------------------------------------------------------------
def builtins(kind: str) -> dict[str, type]:
    """The built-in classes of `kind` by name: the subclasses of the base class defined in
    the modules of raycompo's own package (user classes are never mixed in here)."""
    return dict(_builtins(kind))


@functools.cache
def _builtins(kind: str) -> dict[str, type]:
    # The package's modules do not change while a process runs: walk them once.
    from raycompo.configuration.registry import discover

    base, pkg = _base(kind)
    if kind == "uplink":  # the built-in steps come from options (--compress, --dp-clip), not names
        return {}
    if pkg is None:  # the system's own small registries
        from raycompo.system import availability, selection

        return dict((availability if kind == "availability" else selection).BUILTINS)
    return discover(pkg, base)


@dataclass(frozen=True)
class EntryPoint:
    name: str
    value: str
    """'package.module:ClassName'"""
    dist: str
    """The distribution (installed package) that declares it."""


def entry_points(kind: str) -> list[EntryPoint]:
    """The names installed packages declare in the group of `kind` (not imported yet)."""
    out = []
    for ep in _entry_points_installed().select(group=GROUPS[kind]):
        dist = getattr(getattr(ep, "dist", None), "name", None) or "?"
        out.append(EntryPoint(ep.name, ep.value, dist))
    return out


_INSTALLED: dict[tuple[Any, ...], metadata.EntryPoints] = {}
_INSTALLED_LOCK = threading.Lock()


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return -1.0


def _folder_state(folder: str) -> tuple[Any, ...]:
    """What decides a `sys.path` folder's entry points: its absolute path (the current
    directory for ''), its modification time (a distribution installed or removed) and each
    of its distributions' entry_points.txt's (one edited in place)."""
    path = os.path.abspath(folder or ".")
    try:
        with os.scandir(path) as entries:
            metas = sorted(e.name for e in entries if e.name.endswith((".dist-info", ".egg-info")))
    except OSError:  # a zip, or gone
        return (path, _mtime(path))
    return (path, _mtime(path), tuple(_mtime(os.path.join(path, name, "entry_points.txt")) for name in metas))


def _entry_points_installed() -> metadata.EntryPoints:
    """Every installed distribution's entry points, read once per state of `sys.path`
    (`_folder_state` of each folder: a package installed since, a folder added, an
    entry_points.txt edited in place or another current directory changes the key). Reading
    them costs about 16 ms (a file per distribution), and every run names its task and
    algorithm; the key, a few stat calls per folder."""
    with _INSTALLED_LOCK:  # a population's trials start together: one of them reads, the others wait for it
        key = tuple(_folder_state(folder) for folder in sys.path)
        found = _INSTALLED.get(key)
        if found is None:
            _INSTALLED.clear()
            found = _INSTALLED[key] = metadata.entry_points()
        return found


def registered(kind: str) -> dict[str, type]:
    """Every registered name of `kind`: built-ins, then entry points (imported now). A name
    declared twice is a ConfigError that names both owners."""
    reg = dict(builtins(kind))
    owners = {name: f"raycompo (built-in {kind} {cls.__module__}.{cls.__qualname__})" for name, cls in reg.items()}
    for ep in entry_points(kind):
        owner = f"package {ep.dist} (entry point {GROUPS[kind]}: {ep.name} = {ep.value})"
        if ep.name in owners:
            raise ConfigError(f"{kind} name {ep.name!r} is declared by {owners[ep.name]} and by {owner}; "
                              f"uninstall one, or use the other by its spec {ep.value!r}")
        cls = _import_attr(ep.value, kind, f"entry point of package {ep.dist}")
        reg[ep.name] = cls
        owners[ep.name] = owner
        _note(kind, ep.name, cls)
    return reg


def list_algorithms() -> dict[str, type]:
    """Every registered algorithm by name (`raycompo.list_algorithms()`): the built-ins and
    installed packages' entry points."""
    return registered("algorithm")


def list_tasks() -> dict[str, type]:
    """Every registered task by name (`raycompo.list_tasks()`): the built-ins and installed
    packages' entry points."""
    return registered("task")


# --- specs -----------------------------------------------------------------------------
def load(kind: str, spec: str | type, base_dir: str | Path | None = None) -> type:
    """The class of `kind` that `spec` names (see the module docstring). Raises
    ConfigError with what to do when it cannot be found or is not of `kind`."""
    base, _ = _base(kind)
    if isinstance(spec, type):
        _check_class(spec, base, kind, repr(spec))
        spec_of(spec, kind)  # remembered, and its module shipped
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"{kind} must be a name, 'path/to/file.py:ClassName', 'package.module:ClassName' "
                          f"or a class; got {spec!r}")
    spec = spec.strip()
    if (kind, spec) in _LOADED:
        return _LOADED[(kind, spec)]
    if not is_spec_string(spec):
        reg = registered(kind)
        if spec not in reg:
            names = f"choose one of: {', '.join(sorted(reg))}, or " if reg else ""
            raise ConfigError(
                f"unknown {kind} {spec!r}; {names}name your own class as 'path/to/file.py:ClassName' "
                "or 'package.module:ClassName'"
            )
        return reg[spec]
    where, _, attr = spec.rpartition(":")
    if _looks_like_file(where):
        path = _find_file(where, base_dir)
        module = import_file(path)
        cls = _get_class(module, attr, kind, str(path))
        _SPECS.setdefault(cls, f"{path}:{attr}")  # recorded by its absolute path
    elif session_only(spec):
        try:
            cls = _import_attr(spec, kind, "spec")
        except ConfigError:
            raise session_class_error(kind, spec) from None
    else:
        cls = _import_attr(spec, kind, "spec")
    _check_class(cls, base, kind, spec)
    _ensure_name(cls)
    _note(kind, spec, cls)
    return cls


def canonical(kind: str, spec: str | type, base_dir: str | Path | None = None) -> str:
    """The spec to record for what `spec` names: `spec_of(load(kind, spec))`."""
    return spec_of(load(kind, spec, base_dir), kind)


def spec_of(cls: type, kind: str) -> str:
    """The string that finds `cls` again (recorded in config.json): its registered name, the
    spec it was loaded by (a file by its absolute path), or 'module:QualName'. Ships the
    class's module to Ray workers when it is the user's own code."""
    _ensure_name(cls)
    if cls in _SPECS:
        return _SPECS[cls]
    for name, known in builtins(kind).items():
        if known is cls:
            return name
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__raycompo_file__", None)
    qualname = _bound_name(module, cls) or cls.__qualname__
    spec = f"{path}:{qualname}" if path else f"{cls.__module__}:{qualname}"
    if module is not None and path is None:
        ship(module)
    _note(kind, spec, cls)
    return spec


def _bound_name(module: ModuleType | None, cls: type) -> str | None:
    """For a class made inside a function (e.g. `MyTask = raycompo.task_from_arrays(...)`
    at the top of a module), the module-level name bound to it: importing the module again
    makes it again, so 'module:MyTask' resolves where 'module:f.<locals>.Cls' cannot."""
    if module is None or "<locals>" not in cls.__qualname__:
        return None
    return next((name for name, value in vars(module).items() if value is cls and not name.startswith("_")), None)


SESSION_MODULES = ("__main__", "__raycompo_user__")
"""Modules whose classes only the process that made them can find by name: a script's or
a notebook's `__main__`, and the module of a class made from inside raycompo
(tasks.from_data.OUTSIDE_MODULE)."""


def session_only(spec: str) -> bool:
    """True when `spec` names a class that only the Python session that made it can find:
    one of `__main__` (a notebook, a script) or one made inside a function and bound to no
    module-level name ('<locals>' in its name, e.g. from `task_from_arrays`)."""
    module, _, qualname = spec.rpartition(":")
    return bool(module) and (module in SESSION_MODULES or "<locals>" in qualname)


def session_class_error(kind: str, spec: str) -> ConfigError:
    """The error for a `session_only` spec that this process cannot find."""
    arg = "task" if kind == "task" else "algo"
    return ConfigError(
        f"the {kind} {spec!r} is a class of the Python session that started the run (a notebook, a script's "
        f"__main__, or a class made inside a function such as task_from_arrays), and a new process cannot find "
        f"it by name. Resume it from Python with the class again: raycompo.resume(out, {arg}=TheClass); or define "
        f"it at the top of a module (MyTask = raycompo.task_from_arrays(...)) and run that module's class"
    )


def remember(classes: dict[tuple[str, str], type]) -> None:
    """Make `load(kind, spec)` return these classes in this process (a sweep sends its
    plugin classes along with its trials, so a trial on another node needs no file)."""
    for (kind, spec), cls in classes.items():
        _note(kind, spec, cls)


def loaded(specs: dict[str, str]) -> dict[tuple[str, str], type]:
    """{(kind, spec): class} for `specs` = {spec: kind}, each loaded (what `remember` takes)."""
    return {(kind, spec): load(kind, spec) for spec, kind in specs.items()}


def display_name(cls: type) -> str:
    """A class's `name` (registered names) or, for a plugin without one, its class name."""
    return cls.__dict__.get("name") or getattr(cls, "name", None) or cls.__name__


def source_digest(cls: type) -> str | None:
    """sha256 of the source file that defines `cls` (None when there is none, e.g. a
    notebook): recorded with a run, so a resume can tell that the plugin changed."""
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__raycompo_file__", None) or getattr(module, "__file__", None)
    if not path or not Path(path).is_file():
        return None
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# --- importing and shipping user code -----------------------------------------------------
def import_file(path: Path) -> ModuleType:
    """Import the Python file `path` as a module of its own (once per file and content)."""
    path = path.resolve()
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
    name = f"raycompo_user_{_identifier(path.stem)}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    module.__raycompo_file__ = str(path)  # type: ignore[attr-defined]
    before = set(sys.modules)
    folder = str(path.parent)
    if folder not in sys.path:  # its own folder importable, as Python does for a script
        sys.path.insert(0, folder)
    sys.modules[name] = module  # before running it: dataclasses and pickling look it up
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ConfigError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    ship(module)
    for helper in _helpers(module, path.parent, set(sys.modules) - before):
        ship(helper)  # the user's files it imports travel with it to the Ray workers
    return module


def _helpers(module: ModuleType, folder: Path, new: set[str]) -> list[ModuleType]:
    """The modules of the user's folder `folder` that the plugin file `module` imported:
    those its import added to sys.modules, and those its names come from (a notebook may
    have imported them before), when their file is under `folder`."""
    found = [sys.modules[n] for n in new if n in sys.modules]
    for value in vars(module).values():
        owner = value if isinstance(value, ModuleType) else sys.modules.get(getattr(value, "__module__", None) or "")
        if owner is not None:
            found.append(owner)
    out = []
    for m in found:
        file = getattr(m, "__file__", None)
        if m is module or not file or m.__name__.split(".")[0] == "raycompo" or _installed(m):
            continue
        if Path(file).resolve().is_relative_to(folder) and m not in out:
            out.append(m)
    return out


def ship(module: ModuleType) -> None:
    """Have cloudpickle pickle the classes of `module`'s top-level package by value (the
    stand-alone cloudpickle here, Ray's through the picklers the engine adds with
    `add_pickler`), unless it is raycompo or installed in site-packages (then every node
    imports it itself)."""
    top = module.__name__.split(".")[0]
    if top in ("__main__", "raycompo") or _installed(module):
        return
    target = sys.modules.get(top, module)
    _standalone_pickler()
    if target not in _SHIPPED:
        _SHIPPED.append(target)
    for register in _PICKLERS:
        _register(register, target)


_SHIPPED: list[ModuleType] = []
"""The user's packages shipped by value so far, in order (for a pickler added later)."""

_PICKLERS: list[Callable[[ModuleType], Any]] = []
"""`register_pickle_by_value` of each cloudpickle that ships user code."""


def add_pickler(register: Callable[[ModuleType], Any]) -> None:
    """Ship user code by value through one more cloudpickle as well: `register` (its
    `register_pickle_by_value`) is called for every package shipped so far and from now on.
    The engine adds Ray's (`ray.cloudpickle`), since no layer below it imports Ray."""
    if register not in _PICKLERS:
        _PICKLERS.append(register)
        for module in _SHIPPED:
            _register(register, module)


def _register(register: Callable[[ModuleType], Any], module: ModuleType) -> None:
    try:
        register(module)
    except (ValueError, TypeError):
        pass  # not in sys.modules under its name: pickled by value anyway


@functools.cache
def _standalone_pickler() -> None:
    """The stand-alone cloudpickle, where installed, imported on the first `ship` (Ray's
    own is added by the engine)."""
    try:
        import cloudpickle
    except ImportError:  # pragma: no cover
        return
    add_pickler(cloudpickle.register_pickle_by_value)


def _installed(module: ModuleType) -> bool:
    path = getattr(module, "__file__", None) or ""
    return "site-packages" in path or "dist-packages" in path or module.__name__ in sys.builtin_module_names


def _looks_like_file(where: str) -> bool:
    return where.endswith(".py") or "/" in where or "\\" in where


def _find_file(where: str, base_dir: str | Path | None) -> Path:
    p = Path(where).expanduser()
    candidates = [p] if p.is_absolute() else [Path.cwd() / p] + ([Path(base_dir) / p] if base_dir else [])
    for c in candidates:
        if c.is_file():
            return c.resolve()
    looked = " and ".join(str(c) for c in candidates)
    raise ConfigError(f"no such file {where!r} (looked at {looked})")


def _import_attr(spec: str, kind: str, what: str) -> type:
    module_name, _, attr = spec.rpartition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{kind} {what} {spec!r}: cannot import module {module_name!r} ({exc}); "
                          "is it installed, or on PYTHONPATH?") from exc
    except Exception as exc:
        raise ConfigError(f"{kind} {what} {spec!r}: importing {module_name} failed: {type(exc).__name__}: {exc}") from exc
    ship(module)
    return _get_class(module, attr, kind, module_name)


def _get_class(module: ModuleType, attr: str, kind: str, where: str) -> type:
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            base, _ = _base(kind)
            found = sorted(n for n, v in vars(module).items()
                           if isinstance(v, type) and issubclass(v, base) and v is not base and v.__module__ == module.__name__)
            raise ConfigError(f"{where} has no {attr!r}; its {kind} classes: {', '.join(found) or 'none'}")
    return obj


def _check_class(cls: Any, base: type, kind: str, spec: str) -> None:
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ConfigError(f"{kind} {spec} is {cls!r}, not a subclass of raycompo's {base.__name__}")
    if inspect.isabstract(cls) or cls is base:
        raise ConfigError(f"{kind} {spec} is the base class {base.__name__} itself; give a subclass")
    if kind not in SETTINGLESS and not hasattr(cls, "Settings"):
        raise ConfigError(f"{kind} {spec} has no Settings dataclass")


def _ensure_name(cls: type) -> None:
    # Messages (and Task/Algorithm code) use cls.name; a plugin may leave it out, or
    # inherit a built-in's, which would misname it.
    if "name" not in cls.__dict__:
        cls.name = cls.__name__  # type: ignore[attr-defined]


def _note(kind: str, spec: str, cls: type) -> None:
    _LOADED[(kind, spec)] = cls
    _SPECS.setdefault(cls, spec)


def _identifier(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text)


def provenance(task_cls: type, algo_cls: type) -> dict[str, Any]:
    """What config.json records of the user's own classes of a run: for each (task, algo)
    that is not a built-in, its spec and the sha256 of its source file. Empty for the
    built-ins."""
    out = {}
    for key, kind, cls in (("task", "task", task_cls), ("algo", "algorithm", algo_cls)):
        spec = spec_of(cls, kind)
        if spec in builtins(kind):
            continue
        out[key] = {"spec": spec, "class": f"{cls.__module__}.{cls.__qualname__}", "source_sha256": source_digest(cls)}
    return {"code": out} if out else {}


def changed_code(recorded: dict[str, Any], task_cls: type, algo_cls: type) -> list[str]:
    """The plugins whose source differs from what a run recorded (`provenance`)."""
    now = provenance(task_cls, algo_cls).get("code", {})
    out = []
    for key, entry in (recorded.get("code") or {}).items():
        was, cur = entry.get("source_sha256"), now.get(key, {}).get("source_sha256")
        if was and cur and was != cur:
            out.append(f"{key} {entry.get('spec')}")
    return out
