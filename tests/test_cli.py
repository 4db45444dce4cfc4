"""The run CLI: outputs, bad input (one clear message, exit code 2), divergence."""

import json
import subprocess
import sys

import pandas as pd
import pytest

import raycompo
from raycompo.run import EXIT_BAD_INPUT, EXIT_DIVERGED, main

SMALL = ["n_clients=4", "big_client_size=60", "small_client_size=20", "val_per_client=40"]


def cli(*args):
    return main(["--backend", "inline", "--quiet", *args])


def test_outputs(tmp_path):
    out = tmp_path / "x"
    assert cli("--algo", "comfedl", "--rounds", "3", "--set", *SMALL, "lr=0.01", "gamma=1", "tau=2", "--out", str(out)) == 0
    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics["round"]) == [0, 1, 2, 3]
    for col in ("train_loss", "val_acc", "val_acc_worst", "wall_time"):
        assert col in metrics and metrics[col].notna().all()
    assert (metrics["val_acc_worst"] <= metrics["val_acc"]).all()
    config = json.loads((out / "config.json").read_text())
    assert config["seed"] == 0 and config["status"] == "completed"
    assert config["effective_settings"]["tau"] == 2 and config["effective_settings"]["gamma"] == 1.0
    assert config["effective_settings"]["batch_size"] == 32  # the task's default


@pytest.mark.parametrize(
    "args,message",
    [
        (["--task", "cifar-1000"], "unknown task 'cifar-1000'"),
        (["--algo", "sgdx"], "unknown algorithm 'sgdx'"),
        (["--set", "lr=0"], "lr must be > 0"),
        (["--set", "lr=-1"], "lr must be > 0"),
        (["--set", "gamma=0"], "gamma must be > 0"),
        (["--set", "clients_per_round=11"], "clients_per_round (m) must be in [1, n=10]"),
        (["--set", "tau=0"], "tau must be >= 1"),
        (["--set", "learning_rate=0.1"], "unknown setting(s) learning_rate"),
        (["--set", "tau=1.5"], "tau=1.5 is not a valid int"),
        (["--set", "lr=true"], "lr=True is not a valid float: a boolean is not a number"),
        (["--set", "tau=false"], "tau=False is not a valid int: a boolean is not a number"),
        (["--set", "lr=none"], "lr=None is not a valid float"),
        (["--set", "lr"], "--set expects key=value"),
    ],
)
def test_bad_input_is_one_clear_message(capsys, args, message):
    assert cli("--rounds", "1", *args) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
    assert "Traceback" not in err


def test_missing_data_message(capsys, tmp_path, monkeypatch):
    import urllib.request

    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: (_ for _ in ()).throw(OSError("offline")))
    assert cli("--task", "dro-mnist", "--rounds", "1", "--data-dir", str(tmp_path)) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "--data-dir" in err and "dro-mnist5k" in err


def test_divergence_stops_and_keeps_rows(tmp_path, capsys):
    """gamma = 0.2 and lr = 1 blow up (exp(f/gamma) scales the first step by ~5e5)."""
    out = tmp_path / "d"
    rc = cli("--algo", "comfedl", "--rounds", "50", "--set", *SMALL, "gamma=0.2", "lr=1", "--out", str(out))
    assert rc == EXIT_DIVERGED
    assert "diverged" in capsys.readouterr().err
    metrics = pd.read_csv(out / "metrics.csv")
    assert metrics["round"].iloc[0] == 0 and metrics["diverged"].iloc[-1]
    assert len(metrics) < 51  # it stopped
    config = json.loads((out / "config.json").read_text())
    assert config["status"] == "diverged"


def test_existing_results_are_not_overwritten(tmp_path, capsys):
    out = tmp_path / "keep"
    assert cli("--algo", "fedavg", "--rounds", "1", "--set", *SMALL, "--out", str(out)) == 0
    before = (out / "metrics.csv").read_text()
    assert cli("--algo", "fedavg", "--rounds", "2", "--set", *SMALL, "--out", str(out)) == EXIT_BAD_INPUT
    assert "already holds a run" in capsys.readouterr().err
    assert (out / "metrics.csv").read_text() == before


def test_module_entry_point_runs(tmp_path):
    """`python -m raycompo.run` as a user types it (a subprocess)."""
    proc = subprocess.run(
        [sys.executable, "-m", "raycompo.run", "--backend", "inline", "--rounds", "2", "--algo", "drfl",
         "--set", *SMALL, "--out", str(tmp_path / "m")],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "round    2/2" in proc.stderr and "done: drfl" in proc.stdout


def listed_settings(text: str) -> dict[str, dict[str, str]]:
    """--list's algorithms section: algorithm -> setting -> the text after '='."""
    out: dict[str, dict[str, str]] = {}
    algo = None
    for line in text.split("\nalgorithms:\n", 1)[1].split("\nsystem profiles", 1)[0].splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            algo = line.split()[0]
            out[algo] = {}
        elif line.startswith("      ") and algo and " = " in line:  # (not the 'sends up' line)
            key, _, rest = line.strip().partition(" = ")
            out[algo][key] = rest
    return out


def test_list_with_a_task_shows_the_settings_a_run_on_it_uses(capsys):
    """issue 33: --list showed an algorithm's default (batch 32) where the task sets its
    own (synthetic: 10). Each algorithm that runs on the task: the listed value is the one
    resolve() gives a run with no --set, and an override names the algorithm's default."""
    import ast
    import dataclasses

    from raycompo.configuration.config import RunConfig, resolve

    assert main(["--list", "--task", "synthetic"]) == 0
    listed = listed_settings(capsys.readouterr().out)
    checked = 0
    for algo, fields in listed.items():
        try:
            used = dataclasses.asdict(resolve(RunConfig(task="synthetic", algo=algo), check_clients=False).algo_settings)
        except raycompo.ConfigError:
            continue  # an algorithm for another kind of task
        declared = {f.name: f.default for f in dataclasses.fields(raycompo.list_algorithms()[algo].Settings)}
        for key, text in fields.items():
            value = ast.literal_eval(text.split("  ")[0])
            assert value == used[key], (algo, key, text)
            if used[key] != declared[key]:
                assert f"(task synthetic's; the algorithm's default: {declared[key]!r})" in text, (algo, key, text)
        checked += 1
    assert checked >= 5 and listed["fedavg"]["batch_size"].startswith("10  (task synthetic's; the algorithm's default: 32)")


def test_list_without_a_task_marks_the_settings_tasks_set(capsys):
    assert main(["--list"]) == 0
    fedavg = listed_settings(capsys.readouterr().out)["fedavg"]
    own = {name: cls.algo_defaults["batch_size"] for name, cls in raycompo.list_tasks().items()
           if cls.algo_defaults.get("batch_size", 32) != 32}
    assert own and fedavg["batch_size"].startswith("32  (tasks that set their own: ")
    assert all(f"{name} {value!r}" in fedavg["batch_size"] for name, value in own.items())
