"""`python -m raycompo.bench NAME`: the benchmarks are one package with one command (issue 17).
Nothing here runs a benchmark: only the listing, the error for an unknown name and the
name -> module -> main(argv) table."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest

import raycompo.bench as bench
from raycompo.bench.__main__ import main, resolve

NAMES = ["round", "cohort", "startup", "checkpoint", "feddro", "vectorize", "recovery", "scale", "state_store", "sweep", "plugin", "ledger",
         "per_client", "async", "system", "compress", "gpu", "ops", "sampler", "population"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "raycompo.bench", *args], capture_output=True, text=True,
                          timeout=60, env=env, cwd=root)


def test_the_table_has_every_benchmark():
    assert list(bench.BENCHMARKS) == NAMES
    assert bench.DEFAULT == "round"


@pytest.mark.parametrize("args", [["--help"], []])
def test_help_lists_every_benchmark(args):
    p = _run(*args)
    assert p.returncode == 0, p.stderr
    listed = [line.split()[0] for line in p.stdout.splitlines() if line.startswith("  ") and not line.startswith("   ")]
    assert listed == NAMES


def test_unknown_name_exits_2_with_the_list():
    p = _run("no-such-bench")
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "no-such-bench" in lines[0]
    assert all(n in lines[0] for n in NAMES)


def test_unknown_name_in_process(capsys):
    assert main(["nope"]) == 2
    assert "round, cohort, startup, checkpoint" in capsys.readouterr().err


@pytest.mark.parametrize("name", NAMES)
def test_every_name_maps_to_a_module_with_main(name):
    module = importlib.import_module(bench.BENCHMARKS[name])
    stem = {"async": "asynchronous"}.get(name, name)  # (async is a Python keyword)
    assert module.__name__ == f"raycompo.bench.{stem}"
    assert callable(module.main) and resolve(name) is module.main


def test_options_and_no_name_run_round(monkeypatch):
    """`python -m raycompo.bench --threads 1` (README, issues) is the round benchmark."""
    seen = []
    import raycompo.bench.round as round_module
    monkeypatch.setattr(round_module, "main", lambda argv: seen.append(argv) or 0)
    assert main(["--threads", "1"]) == 0
    assert main(["round", "--rounds", "2"]) == 0
    assert seen == [["--threads", "1"], ["--rounds", "2"]]


def test_non_int_results_exit_0(monkeypatch):
    import raycompo.bench.scale as scale
    monkeypatch.setattr(scale, "main", lambda argv: [1, 2])
    assert main(["scale"]) == 0


def test_round_module_does_not_shadow_the_builtin():
    import raycompo.bench.round  # noqa: F401
    assert round(2.6) == 3 and callable(bench.round.main)
