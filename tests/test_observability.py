"""Watching runs (issue 20): the progress bar as a person sees it (a pty, a pipe), the
comparison figures (raycompo.plot), the trackers (MLflow, W&B offline) and the Grafana
panel's metric names."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import raycompo
from raycompo.errors import ConfigError
from tests.helpers import SMALL_DRO

ROOT = Path(__file__).resolve().parents[1]
TOY = ["--backend", "inline", "--task", "toy-co", "--algo", "fedavg-co", "--threads", "1"]


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAYCOMPO_PROGRESS", None)
    return env


def _read_pty(master: int) -> bytes:
    buf = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed its side
            return buf
        if not chunk:
            return buf
        buf += chunk


# --- progress ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_1000_round_run_is_one_bar_on_a_terminal_and_about_100_lines_in_a_pipe(tmp_path):
    args = [sys.executable, "-m", "raycompo.run", *TOY, "--rounds", "1000"]
    master, slave = pty.openpty()  # a terminal, as a person at a shell has (a bare pty: no size)
    on_tty = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=_env(), cwd=tmp_path)
    os.close(slave)
    piped = subprocess.run(args, capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=600)
    seen = _read_pty(master).decode(errors="replace")
    assert on_tty.wait(timeout=600) == 0 and piped.returncode == 0, seen + piped.stderr
    # terminal: the bar redrawn in place (\r), then the final bar and the done line
    lines = [ln for ln in seen.replace("\r\n", "\n").split("\n") if ln.strip()]
    assert len(lines) == 2, lines
    frames = lines[0].split("\r")
    assert len(frames) > 2 and "round 1000/1000" in frames[-1] and "s/round" in frames[-1]
    assert "eta" in frames[-1] and "grad_norm" in frames[-1]  # the task's headline metric
    assert lines[1].startswith("done: fedavg-co on toy-co, 1000 rounds")
    # a pipe: every 10th round (0, 10, ..., 1000) and nothing else; no bar characters
    rows = piped.stderr.strip().splitlines()
    assert len(rows) == 101 and "\r" not in piped.stderr
    assert rows[0].startswith("round    0/1000") and rows[-1].startswith("round 1000/1000")
    assert re.search(r"s/round  eta (\d+s|\d+m\d\ds|\d+h\d\dm)$", rows[1])  # 7s, 1m05s, 1h02m
    assert piped.stdout.startswith("done:")


def test_plain_lines_cap_long_runs_and_keep_the_last_row():
    from raycompo.watch.progress import RunProgress

    out = io.StringIO()
    p = RunProgress(3000, "val_acc", mode="lines", stream=out)
    p.on_start(None)
    for r in range(0, 2997):  # interrupted at round 2996: the last row still shows
        p.on_row({"round": r, "train_loss": 1.0, "val_acc": 0.5, "val_acc_worst": 0.25})
    p.on_end("interrupted", {"round": 2996, "val_acc": 0.5})
    lines = out.getvalue().splitlines()
    assert len(lines) == 101 and lines[-1].startswith("round 2996/3000")
    assert "(worst client 0.2500)" in lines[0]


@pytest.mark.slow
def test_quiet_prints_nothing(tmp_path):
    rc = subprocess.run([sys.executable, "-m", "raycompo.run", *TOY, "--rounds", "3", "--quiet"],
                        capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=300)
    assert rc.returncode == 0 and rc.stderr == "" and rc.stdout.startswith("done:")


def test_api_progress_and_on_row(capsys):
    seen = []
    result = raycompo.run("toy-co", "fedavg-co", rounds=4, progress=True, on_row=lambda r: seen.append(r["round"]))
    assert seen == [0, 1, 2, 3, 4] and result.status == "completed"
    err = capsys.readouterr().err  # not a terminal here: plain lines
    assert [ln[:12] for ln in err.splitlines()] == [f"round    {r}/4" for r in range(5)]


def test_sweep_progress_lines_and_bar():
    from raycompo.watch.progress import SweepProgress

    out = io.StringIO()
    s = SweepProgress(3, metric="val_acc_worst", mode="max", display="lines", stream=out)
    s.done("[1/3] a", value=0.5, label="fedavg lr=1")
    s.done("[2/3] b", value=0.7, label="comfedl lr=1")
    s.done("[3/3] c", value=None, label="drfl")
    lines = out.getvalue().splitlines()
    assert "best val_acc_worst 0.7000 (comfedl lr=1)" in lines[1] and "eta" in lines[1]
    assert lines[2] == "[3/3] c  | best val_acc_worst 0.7000 (comfedl lr=1)"
    bar = SweepProgress(2, metric="m", display="bar", stream=io.StringIO())
    bar.begin()
    bar.done("one", value=1.0, label="x")
    text = bar.stream.getvalue()
    assert "trials 1/2" in text and "best m 1.0000 (x)" in text and "one\n" in text
    bar.close()


# --- plot -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    for algo in ("fedavg", "qfedavg"):
        for seed in (0, 1):
            raycompo.run("dro-mnist5k", algo, rounds=3, seed=seed, settings=SMALL_DRO, out=root / f"{algo}-s{seed}")
    return root


def test_plot_one_line_per_algorithm_with_a_band(run_folders, tmp_path):
    from raycompo.plot import group, read_sources

    runs = read_sources([run_folders])
    lines = group(runs)
    assert sorted(ln.label for ln in lines) == ["FedAvg, 2 seeds", "q-FedAvg, 2 seeds"]
    out = tmp_path / "fig.png"
    fig = raycompo.plot([run_folders / "fedavg-s0", run_folders / "fedavg-s1", run_folders / "qfedavg-s0"],
                        "val_acc_worst", out=out)
    assert out.stat().st_size > 10_000
    ax = fig.axes[0]
    assert ax.get_xlabel() == "communication round $s$"
    assert ax.get_ylabel() == "worst client's validation accuracy"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["FedAvg, 2 seeds", "q-FedAvg"]
    fig = raycompo.plot(run_folders, "train_loss", x="wall_time")
    assert fig.axes[0].get_xlabel() == "wall-clock time (s)"


def test_plot_bad_input_is_one_message_exit_2(run_folders, tmp_path, capsys):
    from raycompo.plot import main

    with pytest.raises(ConfigError, match=r"unknown metric 'nope'.*val_acc_worst.*round_time"):
        raycompo.plot(run_folders, "nope")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text("{}")
    assert main([str(tmp_path / "empty"), "--out", str(tmp_path / "f.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no metrics.csv" in err
    assert main([str(run_folders), "--metric", "nope", "--out", str(tmp_path / "f.png")]) == 2


def test_plot_a_sweep_folder_draws_the_best_settings(run_folders, tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    rows, trials = [], []
    for i, (algo, lr) in enumerate([("fedavg", 0.1), ("fedavg", 1.0), ("drfl", 0.1)]):
        frame = pd.read_csv(run_folders / "fedavg-s0" / "metrics.csv").assign(trial_id=f"t{i}")
        rows.append(frame)
        trials.append({"trial_id": f"t{i}", "algorithm": algo, "task": "dro-mnist5k", "status": "completed",
                       "seed": 0, "settings": json.dumps({"lr": lr})})
    pd.concat(rows).to_parquet(sweep / "metrics.parquet")
    pd.DataFrame(trials).to_csv(sweep / "trials.csv", index=False)
    (sweep / "best.json").write_text(json.dumps({"algorithms": {"fedavg": {"settings": {"lr": 1.0}},
                                                                "drfl": {"settings": {"lr": 0.1}}}}))
    fig = raycompo.plot(sweep, "val_acc")
    assert sorted(t.get_text() for t in fig.axes[0].get_legend().get_texts()) == ["DRFL", "FedAvg"]
    fig = raycompo.plot(sweep, "val_acc", all_trials=True)
    assert sorted(t.get_text() for t in fig.axes[0].get_legend().get_texts()) == \
        ["DRFL", "FedAvg (lr=0.1)", "FedAvg (lr=1.0)"]


# --- trackers -------------------------------------------------------------------------------


def test_missing_tracker_package_is_exit_2(monkeypatch, tmp_path, capsys):
    from raycompo.run import main

    monkeypatch.setitem(sys.modules, "wandb", None)  # as if not installed
    assert main([*TOY, "--rounds", "1", "--tracker", "wandb", "--out", str(tmp_path / "r")]) == 2
    assert 'pip install -e ".[wandb]"' in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    with pytest.raises(ConfigError, match="tracker must be a name or a list of names"):
        raycompo.run("toy-co", "fedavg-co", rounds=1, tracker="tensorboard")


@pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="mlflow not installed: pip install -e '.[mlflow]'")
def test_mlflow_logs_settings_every_row_and_the_files(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    out = tmp_path / "run"
    raycompo.run("dro-mnist5k", "fedavg", rounds=4, settings={**SMALL_DRO, "lr": 0.1}, out=out, tracker="mlflow")
    client = MlflowClient(tracking_uri=f"sqlite:///{out / 'mlruns' / 'mlflow.db'}")
    [run] = client.search_runs([client.get_experiment_by_name("raycompo").experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    assert run.data.params["lr"] == "0.1" and run.data.params["algo"] == "fedavg"
    assert run.data.params["n_clients"] == "4" and run.data.tags["raycompo.status"] == "completed"
    metrics = pd.read_csv(out / "metrics.csv")
    for col in ("train_loss", "val_acc_worst", "round_time"):
        history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, col))
        assert history == [(int(r), pytest.approx(v)) for r, v in zip(metrics["round"], metrics[col])]
    files = {f.path for f in client.list_artifacts(run.info.run_id)}
    assert {"config.json", "metrics.csv"} <= files and "checkpoint.pt" not in files


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="mlflow not installed: pip install -e '.[mlflow]'")
def test_mlflow_sweep_through_ray_tunes_callback(tmp_path, ray_session, monkeypatch):
    from mlflow.tracking import MlflowClient

    from raycompo.tune.cli import main

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    out = tmp_path / "sweep"
    assert main(["--space", "dro", "--samples", "1", "--rounds", "2", "--algos", "fedavg", "--out", str(out),
                 "--quiet", "--tracker", "mlflow"]) == 0
    client = MlflowClient(tracking_uri=f"sqlite:///{out / 'mlruns' / 'mlflow.db'}")
    [run] = client.search_runs([client.get_experiment_by_name("dro").experiment_id])
    assert run.info.status == "FINISHED" and "lr" in run.data.params
    rows = pd.read_parquet(out / "metrics.parquet")
    history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "val_acc_worst"))
    assert history == [(int(r), pytest.approx(v)) for r, v in zip(rows["round"], rows["val_acc_worst"])]
    assert "progress.csv" in {f.path for f in client.list_artifacts(run.info.run_id)}


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="wandb not installed: pip install -e '.[wandb]'")
def test_wandb_offline_run(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    start = time.time()
    raycompo.run("toy-co", "fedavg-co", rounds=3, out=out, tracker="wandb")
    [folder] = (out / "wandb").glob("offline-run-*")
    [log] = folder.glob("run-*.wandb")  # the offline log `wandb sync` uploads
    data = log.read_bytes()
    assert time.time() - start < 300
    for name in (b"grad_norm", b"train_loss", b"round_time", b"fedavg-co", b"metrics.csv", b"config.json"):
        assert name in data, name  # every row's metrics, the settings, the run folder's files


# --- the Grafana panel ------------------------------------------------------------------------


def test_grafana_panel_names_only_metrics_the_engine_exports(tmp_path):
    from raycompo.engine import ray_metrics as rm
    from raycompo.grafana import DASHBOARD, install

    exported = {f"ray_{rm.PREFIX}{k}" for k in [*rm.GAUGES, *rm.POOL_GAUGES, rm.HOST_GAUGE]}
    exported.add(f"ray_{rm.PREFIX}rows_total")  # a Counter: Prometheus adds _total
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"] if isinstance(v.get("query"), dict)]
    named = set(re.findall(r"\bray_raycompo_\w+", " ".join(exprs)))
    assert named <= exported, named - exported
    for wanted in ("round", "train_loss", "val_acc", "val_acc_worst", "round_time", "host_busy_s", "bytes_sent"):
        assert f"ray_raycompo_{wanted}" in named
    tags = set(re.findall(r"(\w+)=~", " ".join(exprs)))
    assert tags <= set(rm.TAG_KEYS)
    assert install(tmp_path / "dash").read_text() == DASHBOARD.read_text()
