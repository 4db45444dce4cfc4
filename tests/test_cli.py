"""The run CLI: outputs, bad input (one clear message, exit code 2), divergence."""

import json
import subprocess
import sys

import pandas as pd
import pytest

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
