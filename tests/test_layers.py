"""The layers of raycompo (pyproject.toml's [tool.importlinter], docs/architecture.md): no two
top-level parts import each other, the package docstring states the contract's order, and
what moved down a layer still works the way users call it."""

from __future__ import annotations

import collections
import re
from pathlib import Path

import pytest

import raycompo

ROOT = Path(__file__).resolve().parents[1]


def contract_layers() -> list[list[str]]:
    """The layers contract's layers from the bottom, each a list of names (parentheses of an
    optional layer removed)."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    return [[name.strip().strip("()") for name in layer.split("|")] for layer in reversed(layers)]


def test_no_two_top_level_parts_import_each_other():
    """Every import counts, also inside functions (grimp, as lint-imports sees them)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("raycompo", cache_dir=None)
    top = collections.defaultdict(set)
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = (m.split(".")[1] if "." in m else "" for m in (module, imported))
            if a != b:
                top[a].add(b)
    two_way = sorted((a, b) for a in top for b in top[a] if a < b and a in top.get(b, ()))
    assert two_way == []


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
            stated.append([name.strip().rstrip("/") for name in head.split("|")])
    assert stated == contract_layers()


def test_every_part_of_the_package_is_in_a_layer():
    """A new top-level module must be placed in the contract (else nothing checks it)."""
    placed = {name for layer in contract_layers() for name in layer}
    parts = {p.stem for p in (ROOT / "raycompo").glob("*.py") if p.stem != "__init__"}
    parts |= {p.parent.name for p in (ROOT / "raycompo").glob("*/__init__.py")}
    assert parts - placed == set()


def test_the_backend_names_and_the_engines_pools_are_the_same_backends():
    from raycompo.backends import backend_names, get_backend
    from raycompo.config import resolve
    from raycompo.engine.pools import POOLS, InlinePool, make_pool, pool_factory
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
    from raycompo.config import RunConfig, resolve
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
