"""The layers of raycompo (pyproject.toml's [tool.importlinter], docs/architecture.md): no two
top-level parts import each other, the package docstring states the contract's order, and
what moved down a layer still works the way users call it."""

from __future__ import annotations

import ast
import collections
import re
import sys
from pathlib import Path

import pytest

import raycompo

ROOT = Path(__file__).resolve().parents[1]


def importlinter_config() -> dict:
    """pyproject.toml's [tool.importlinter], read on every Python pyproject supports."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: tomli, which pytest itself requires there
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def contract_layers() -> list[list[str]]:
    """The layers contract's layers from the bottom, each a list of full module names."""
    (layers,) = [c["layers"] for c in importlinter_config()["contracts"] if c["type"] == "layers"]
    return [[name.strip().strip("()") for name in layer.split("|")] for layer in reversed(layers)]


def layer_part(module: str) -> str | None:
    """The contract's name that holds `module` (the longest one it is or lies under), or None."""
    names = [n for layer in contract_layers() for n in layer if module == n or module.startswith(n + ".")]
    return max(names, key=len) if names else None


GROUPS = ("configuration", "costs", "runfolder", "watch")
"""Packages that only group modules of several layers: their __init__ holds a docstring."""


def test_no_two_parts_import_each_other():
    """Every import counts, also inside functions (grimp, as lint-imports sees them)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("raycompo", cache_dir=None)
    top = collections.defaultdict(set)
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = layer_part(module), layer_part(imported)
            if a and b and a != b:
                top[a].add(b)
    two_way = sorted((a, b) for a in top for b in top[a] if a < b and a in top.get(b, ()))
    assert two_way == []


def test_no_import_circle_anywhere():
    """No module reaches itself through its imports (every import, also inside functions):
    a circle (the engine's driver, pools, ray_pool, host_actors and runner had one) makes
    the import order matter and hides which module owns what."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("raycompo", cache_dir=None)
    circles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if imported.startswith("raycompo") and back:
                circles.append((module, *back))
    assert circles == []


def test_the_contract_holds():
    """What CI runs (`lint-imports`), from Python: every contract kept."""
    cli = pytest.importorskip("importlinter.cli")
    assert cli.lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True) == 0


def test_the_package_docstring_states_the_contracts_layers():
    """raycompo/__init__.py lists the layers from the bottom in the contract's order."""
    text = raycompo.__doc__.split("layer by layer", 1)[1].split("\n\n", 1)[1]
    stated = []
    for line in text.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            head = re.split(r"\s{2,}", line.strip())[0]
            stated.append(["raycompo." + name.strip().rstrip("/") for name in head.split("|")])
    assert stated == contract_layers()


def test_every_part_of_the_package_is_in_a_layer():
    """A new module must be placed in the contract (else nothing checks it); a package that
    only groups modules of several layers imports nothing itself."""
    unplaced = []
    for module, path in package_modules().items():
        if module.split(".")[-1] in GROUPS and path.name == "__init__.py":
            tree = ast.parse(path.read_text())
            assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr), path  # a docstring only
        elif layer_part(module) is None:
            unplaced.append(module)
    assert unplaced == []
    at_root = sorted(p.name for p in (ROOT / "raycompo").glob("*.py"))
    # entry points (run, plot, grafana), the public API (__init__, api) and the bottom layers
    # (errors, settings, seeding and keyed: the seeded streams and the keyed draws)
    assert len(at_root) <= 9, at_root


def test_the_backend_names_and_the_engines_pools_are_the_same_backends():
    from raycompo.configuration.backends import backend_names, get_backend
    from raycompo.configuration.config import resolve
    from raycompo.engine.pool_factory import POOLS, make_pool, pool_factory
    from raycompo.engine.pools import InlinePool
    from tests.helpers import small_config

    assert set(POOLS) == set(backend_names()) == {"inline", "ray"}
    assert pool_factory("inline") is POOLS["inline"]
    assert get_backend("ray").uses_ray and not get_backend("inline").uses_ray
    pool = make_pool(resolve(small_config("fedavg", rounds=1)))
    try:
        assert isinstance(pool, InlinePool) and pool.n_clients == 4
    finally:
        pool.close()
    with pytest.raises(raycompo.ConfigError, match="unknown backend 'gpu'; choose one of: ray, inline"):
        pool_factory("gpu")


def test_resolve_names_the_registered_tasks_that_fit():
    """The hint moved from Algorithm.check_task (below the registry) to config.resolve."""
    from raycompo.configuration.config import RunConfig, resolve
    from raycompo.errors import ConfigError

    fits = sorted(n for n, t in raycompo.list_tasks().items() if "classification" in t.capabilities)
    assert "dro-mnist5k" in fits and "maml-sinusoid" not in fits
    with pytest.raises(ConfigError) as info:
        resolve(RunConfig(task="maml-sinusoid", algo="comfedl", backend="inline"))
    assert str(info.value).endswith(f"needs a task with classification; task maml-sinusoid has "
                                    f"{', '.join(sorted(raycompo.list_tasks()['maml-sinusoid'].capabilities))}. "
                                    f"Tasks that fit: {', '.join(fits)}")


def test_list_functions_and_parse_sets_where_users_find_them():
    from raycompo.algorithms.base import Algorithm
    from raycompo.run import parse_sets
    from raycompo.tasks.base import Task

    assert raycompo.list_algorithms()["comfedl"].name == "comfedl"
    assert all(issubclass(c, Algorithm) for c in raycompo.list_algorithms().values())
    assert all(issubclass(c, Task) for c in raycompo.list_tasks().values())
    assert parse_sets(["lr=0.1", "a = true", "name=x=y"]) == {"lr": 0.1, "a": True, "name": "x=y"}
    with pytest.raises(raycompo.ConfigError, match="--set expects key=value, got 'lr'"):
        parse_sets(["lr"])


# --- imports that lint-imports does not see ------------------------------------------------
IMPORTERS = ("import_module", "__import__")
"""Functions that import a module named by a string (importlib.import_module, __import__)."""


def _under(module: str, packages: list[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def broken_rule(source: str, target: str) -> str | None:
    """Which contract of pyproject.toml an import of `target` by the module `source` breaks
    (None: allowed). The layers: a part of raycompo imports only itself and the layers below
    it, never a sibling in its own layer (`a | b`); the forbidden contracts: their source
    modules never import their forbidden ones (Ray below the engine)."""
    for contract in importlinter_config()["contracts"]:
        if contract["type"] == "forbidden" and _under(source, contract["source_modules"]) \
                and _under(target, contract["forbidden_modules"]):
            return contract["id"]
    if target.split(".")[0] != "raycompo" or "." not in target:
        return None
    level = {name: i for i, layer in enumerate(contract_layers()) for name in layer}
    mine, theirs = layer_part(source), layer_part(target)
    if mine and theirs and mine != theirs and level[mine] <= level[theirs]:
        return "layers" if level[mine] < level[theirs] else "layers (siblings)"
    return None


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _scope_nodes(scope: ast.AST):
    """The nodes of one scope (a module or a function), not those of the functions in it."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, FUNCTIONS):
            todo += ast.iter_child_nodes(node)


def _constants_bound(scope: ast.AST) -> dict[str, list[str]]:
    """name -> the strings a scope binds to it: `name = 'x'`, `for name in ('x', 'y')`."""
    bound: dict[str, list[str]] = collections.defaultdict(list)
    for node in _scope_nodes(scope):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            pairs = [(t, [node.value]) for t in node.targets]
        elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.iter, (ast.Tuple, ast.List, ast.Set)):
            pairs = [(node.target, node.iter.elts)]
        else:
            continue
        for target, values in pairs:
            if isinstance(target, ast.Name):
                bound[target.id] += [v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return bound


def _named(arg: ast.expr, bound: dict[str, list[str]]) -> list[str]:
    """The module names a string argument may hold: a constant, an f-string's constant head
    (f'raycompo.engine.{x}' -> raycompo.engine), or the constants bound to a name."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return [str(arg.values[0].value).rstrip(".")]
    if isinstance(arg, ast.Name):
        return bound.get(arg.id, [])
    return []


def _facade_target(name: str) -> str | None:
    """The module that `raycompo.<name>` reaches through the package facade (a lazy export
    of raycompo/__init__.py, or a part of the package), None for anything else."""
    if name in raycompo._EXPORTS:
        return raycompo._EXPORTS[name][0]
    if (ROOT / "raycompo" / f"{name}.py").is_file() or (ROOT / "raycompo" / name / "__init__.py").is_file():
        return f"raycompo.{name}"
    return None


def hidden_imports(source: str, text: str) -> list[tuple[int, str]]:
    """(line, module) of each import in the code `text` of module `source` that grimp (and
    so lint-imports) does not see, or sees only as the package facade: a module named by a
    string (importlib.import_module, __import__, sys.modules), an attribute of an imported
    `raycompo` (`import raycompo; raycompo.Algorithm`), a lazy export taken from the facade
    (`from raycompo import Algorithm`)."""
    tree = ast.parse(text)
    facades = {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
               for a in n.names if a.name.split(".")[0] == "raycompo"}
    found: list[tuple[int, str]] = []
    module_bound = _constants_bound(tree)
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, FUNCTIONS))]:
        found += _hidden_in_scope(scope, {**module_bound, **_constants_bound(scope)}, facades)
    return sorted(found)


def _hidden_in_scope(scope: ast.AST, bound: dict[str, list[str]], facades: set[str]) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in _scope_nodes(scope):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            by_string = name in IMPORTERS or (
                name == "get" and isinstance(func, ast.Attribute) and ast.unparse(func.value) == "sys.modules")
            if by_string:
                found += [(node.lineno, m) for m in _named(node.args[0], bound)]
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "sys.modules":
            found += [(node.lineno, m) for m in _named(node.slice, bound)]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in facades:
            target = _facade_target(node.attr)
            if target:
                found.append((node.lineno, target))
        elif isinstance(node, ast.ImportFrom) and node.module == "raycompo" and not node.level:
            found += [(node.lineno, t) for a in node.names if (t := _facade_target(a.name))]
    return found


def package_modules() -> dict[str, Path]:
    """Every module of the package but the facade itself (raycompo/__init__.py)."""
    out = {}
    for path in sorted((ROOT / "raycompo").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts == ("raycompo", "__init__"):
            continue
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def test_no_import_bypasses_the_layers_by_a_string_or_the_facade():
    """lint-imports sees `import x` / `from x import y` only: an import by name
    (importlib.import_module('ray.cloudpickle')), an attribute of `import raycompo`, or a
    lazy export of the facade would cross the layers unseen. None does."""
    broken = []
    for source, path in package_modules().items():
        for line, target in hidden_imports(source, path.read_text()):
            rule = broken_rule(source, target)
            if rule:
                broken.append(f"{path.relative_to(ROOT)}:{line} {source} -> {target} ({rule})")
    assert broken == []


@pytest.mark.parametrize("source, code, target, rule", [
    ("raycompo.configuration.plugins", "import importlib\nfor n in ('ray.cloudpickle', 'cloudpickle'):\n    importlib.import_module(n)",
     "ray.cloudpickle", "ray-in-the-engine"),
    ("raycompo.algorithms.x", "__import__('raycompo.engine.runner')", "raycompo.engine.runner", "layers"),
    ("raycompo.tasks.x", "from importlib import import_module\nimport_module(f'raycompo.algorithms.{n}')",
     "raycompo.algorithms", "layers"),
    ("raycompo.settings", "import sys\nsys.modules['raycompo.seeding']", "raycompo.seeding", "layers (siblings)"),
    ("raycompo.system.clock", "import sys\nsys.modules.get('ray')", "ray", "system-below-config"),
    ("raycompo.tasks.x", "import raycompo\nraycompo.Algorithm", "raycompo.algorithms.base", "layers"),
    ("raycompo.models.x", "import raycompo.errors\nraycompo.data.partitioners", "raycompo.data", "layers (siblings)"),
    ("raycompo.configuration.config", "from raycompo import RunResult", "raycompo.engine.runner", "layers"),
])
def test_each_way_round_the_layers_is_found(source, code, target, rule):
    """The check above finds each form of a hidden import, and blames the contract it breaks."""
    assert target in [t for _, t in hidden_imports(source, code)]
    assert broken_rule(source, target) == rule


def test_allowed_imports_by_name_are_not_blamed():
    assert broken_rule("raycompo.engine.ray_start", "ray.cloudpickle") is None  # Ray from the engine
    assert broken_rule("raycompo.api", "raycompo.engine.runner") is None  # down the layers
    assert broken_rule("raycompo.engine.loop", "raycompo.engine.ledger") is None  # within a part
    assert broken_rule("raycompo.configuration.plugins", "cloudpickle") is None
