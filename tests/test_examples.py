"""Every file of examples/ runs, with small settings, the way the README shows it: the
plugin algorithm from the command line, on Ray and in a sweep; the task from numpy arrays;
the notebook-style comparison script; and the Python API's sweep with a class as a key."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import raycompo
from raycompo.configuration import plugins

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
ALGO = "examples/my_algorithm.py:ScgdMomentum"
DIGITS = "examples/my_data.py:Digits"


@pytest.fixture(autouse=True)
def at_repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # the README's commands run from there


def test_every_example_is_tested():
    tested = {"my_algorithm.py", "my_data.py", "compare.py", "my_sweep.yaml", "main_class.py", "my_batched_algorithm.py",
              "my_system.yaml"}  # my_system.yaml: tests/test_system_run.py
    assert {p.name for p in EXAMPLES.iterdir() if p.suffix in (".py", ".yaml")} <= tested


@pytest.mark.parametrize("script", ["my_data.py", "my_batched_algorithm.py", "compare.py", "main_class.py"])
def test_a_script_s_help_is_its_docstring_and_runs_nothing(script, monkeypatch, capsys):
    """`python examples/my_data.py --help` ran its 20 rounds (and my_batched_algorithm.py both
    of its paths): a script's --help prints its usage and description, and exits."""
    monkeypatch.setattr(sys, "argv", [script, "--help"])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {script}")
    first = (EXAMPLES / script).read_text().split('"""')[1].strip().splitlines()[0]
    assert first in out


def test_algorithm_example_from_the_cli(tmp_path):
    from raycompo.run import main

    out = tmp_path / "run"
    assert main(["--algo", ALGO, "--set", "gamma=1", "--rounds", "3", "--backend", "inline", "--out", str(out),
                 "--quiet"]) == 0
    rows = pd.read_csv(out / "metrics.csv")
    assert rows["train_loss"].iloc[-1] < rows["train_loss"].iloc[0]
    state_keys = json.loads((out / "config.json").read_text())["effective_settings"]
    assert state_keys["server_momentum"] == 0.5 and state_keys["gamma"] == 1.0


def test_data_example_runs_inline_and_on_ray_alike(ray_session):
    inline = raycompo.run(DIGITS, "fedavg", rounds=2, settings={"lr": 0.5})
    remote = raycompo.run(DIGITS, "fedavg", rounds=2, settings={"lr": 0.5}, backend="ray", clients_per_actor=10,
                          cpus_per_actor=0.25)
    cols = [c for c in inline.metrics if "time" not in c and inline.metrics[c].dtype.kind == "f"]
    assert float((inline.metrics[cols] - remote.metrics[cols]).abs().max().max()) <= 1e-6
    part = inline.config["partition"]
    assert part["partitioner"] == "dirichlet" and part["n_clients"] == 20 and len(part["train_sizes"]) == 20
    assert inline.config["code"]["task"]["spec"].endswith("examples/my_data.py:Digits")
    assert inline.metrics["val_acc"].iloc[-1] > 0.5


def test_data_example_settings_are_overridable_from_the_cli(tmp_path):
    from raycompo.run import main

    out = tmp_path / "run"
    assert main(["--task", DIGITS, "--algo", "fedavg", "--set", "dirichlet_alpha=0.1", "n_clients=5", "--rounds", "1",
                 "--backend", "inline", "--out", str(out), "--quiet"]) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["partition"]["params"]["dirichlet_alpha"] == 0.1 and len(cfg["partition"]["train_sizes"]) == 5


def test_compare_script_writes_a_figure_and_a_table(tmp_path, capsys):
    png = tmp_path / "compare.png"
    module = runpy.run_path(str(EXAMPLES / "compare.py"))
    module["main"](["--rounds", "2", "--out", str(png)])
    text = capsys.readouterr().out
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "FedAvg" in text and "ComFedL (LSE)" in text and "val_acc_worst" in text


@pytest.mark.slow
def test_sweep_example_with_the_plugin(tmp_path):
    from raycompo.tune.cli import main

    out = tmp_path / "sweep"
    assert main(["--space", "examples/my_sweep.yaml", "--search", "grid", "--rounds", "1", "--algos",
                 "my_algorithm.py:ScgdMomentum", "--out", str(out), "--quiet"]) == 0
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == 4 and set(trials["status"]) == {"completed"}
    cmd = trials["command"].iloc[0]
    assert f"{EXAMPLES / 'my_algorithm.py'}:ScgdMomentum" in cmd  # re-runs from any folder


@pytest.mark.slow
def test_tune_api_with_a_class_key_and_ray_trials(tmp_path):
    cls = plugins.load("algorithm", ALGO)
    space = {"task": "dro-mnist5k", "rounds": 1, "settings": {"gamma": 1.0, "n_clients": 4, "big_client_size": 60,
                                                              "small_client_size": 20, "val_per_client": 20},
             "algorithms": {cls: {"lr": [0.01, 0.05]}}}
    result = raycompo.tune(space, search="grid", out=tmp_path / "sweep", backend="ray", hosts_per_trial=2)
    assert isinstance(result, raycompo.SweepResult)
    assert len(result.trials) == 2 and set(result.trials["status"]) == {"completed"}
    (algo,) = result.best
    assert algo.endswith("my_algorithm.py:ScgdMomentum") and result.best[algo]["settings"]["lr"] in (0.01, 0.05)
    assert set(result.metrics["trial_id"]) == set(result.trials["trial_id"])


@pytest.mark.slow
def test_a_class_of_a_scripts_main_runs_on_ray(ray_session):
    """examples/main_class.py defines its algorithm in __main__ and runs it on Ray (joining
    this session's cluster) and inline: same rows."""
    address = ray_session.get_runtime_context().gcs_address
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([sys.executable, str(EXAMPLES / "main_class.py"), "--rounds", "2", "--address", address],
                          capture_output=True, text=True, timeout=240, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if "max difference" in ln)
    assert line.startswith("__main__:FedProx: inline == ray")
    assert float(line.split("max difference")[1]) <= 1e-6


BATCHED = "examples/my_batched_algorithm.py:BatchedFedProx"


@pytest.mark.slow
def test_batched_algorithm_example_from_the_cli_and_as_a_script(tmp_path):
    """The user's batched phase (raycompo.batched_phase / CohortBatch) runs from its file with
    --vectorize on, and gives the per-client phase's rows; the script prints that difference."""
    from raycompo.run import main

    sets = ["--set", "n_clients=12", "clients_per_round=6", "tau=4", "--rounds", "3", "--backend", "inline", "--quiet"]
    for mode in ("on", "off"):
        assert main(["--task", "synthetic", "--algo", BATCHED, *sets, "--vectorize", mode, "--out", str(tmp_path / mode)]) == 0
    on, off = (json.loads((tmp_path / m / "config.json").read_text())["vectorized"] for m in ("on", "off"))
    assert on == {"phases": ["evaluate", "local"]} and off["phases"] == []
    a, b = (pd.read_csv(tmp_path / m / "metrics.csv") for m in ("on", "off"))
    cols = [c for c in a if "loss" in c or "acc" in c]
    assert float((a[cols] - b[cols]).abs().max().max()) <= 1e-5
    assert a["train_loss"].iloc[-1] < a["train_loss"].iloc[0]
    p = subprocess.run([sys.executable, str(EXAMPLES / "my_batched_algorithm.py")], capture_output=True, text=True,
                       timeout=300, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-2000:]
    diff = float(p.stdout.strip().splitlines()[-1].rsplit(" ", 1)[1])
    assert diff <= 1e-5
