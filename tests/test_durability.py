"""Durable runs (issue 9): checkpoints, resume, surviving dead actors, honest statuses,
no silent hangs, one message for user errors."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from raycompo.configuration.config import RunConfig
from raycompo.engine import checkpoint, run
from raycompo.engine.faults import KillActor, KillOnRestore
from raycompo.run import main
from raycompo.watch.observers import Observer
from tests.helpers import SMALL_DRO, assert_rows_close, small_config

TIME_COLUMNS = ["round_time", "wall_time"]


class StopAt(Observer):
    """Raises KeyboardInterrupt (as Ctrl-C would) once round `k` is written."""

    def __init__(self, k: int):
        self.k = k

    def on_row(self, row):
        if row["round"] == self.k:
            raise KeyboardInterrupt


def metrics(folder) -> pd.DataFrame:
    return pd.read_csv(Path(folder) / "metrics.csv").drop(columns=TIME_COLUMNS)


def assert_same_metrics(a, b) -> None:
    pd.testing.assert_frame_equal(metrics(a), metrics(b), rtol=1e-6, atol=1e-9)


def assert_same_costs(a, b) -> None:
    """costs.csv of two runs byte for byte (counts: exact), and not empty."""
    text = (Path(a) / "costs.csv").read_text()
    assert text.count("\n") > 1 and text == (Path(b) / "costs.csv").read_text()


STATEFUL = [
    small_config("comfedl", rounds=7, gamma=1.0, clients_per_round=3),
    small_config("ditto", rounds=7),
    RunConfig(task="maml-sinusoid", algo="local-scgdm", rounds=7, backend="inline",
              settings={"per_task_state": True, "val_tasks": 10}),
    RunConfig(task="feddro-digits-st", algo="feddro", rounds=7, backend="inline",
              settings={"sync_every": 2, "beta": 0.5, "batch_size": 8}),
    # GCIVR's estimates and x^{t-1} are server state; the resume (round 4) is between checkpoints
    RunConfig(task="fair-synth", algo="gcivr", rounds=7, backend="inline",
              settings={"n_clients": 4, "synth_train": 200, "synth_test": 80, "batch_size": 8, "full_every": 3}),
]


@pytest.mark.parametrize("cfg", STATEFUL, ids=lambda c: c.algo)
def test_resume_gives_the_uninterrupted_metrics(tmp_path, cfg):
    run(cfg, out=tmp_path / "whole", checkpoint_every=2)
    with pytest.raises(KeyboardInterrupt):
        run(cfg, out=tmp_path / "cut", checkpoint_every=2, observers=[StopAt(5)])
    stored = json.loads((tmp_path / "cut" / "config.json").read_text())
    assert stored["status"] == "interrupted" and stored["rounds_done"] == 5
    assert checkpoint.load(tmp_path / "cut" / checkpoint.FILE)["round"] == 4
    # costs.csv was appended to round by round: it holds round 5's rows, past the checkpoint
    assert pd.read_csv(tmp_path / "cut" / "costs.csv")["round"].max() == 5
    result = run(cfg, out=tmp_path / "cut", checkpoint_every=2, resume=True)
    assert result.status == "completed"
    assert_same_metrics(tmp_path / "whole", tmp_path / "cut")  # rows 5.. not duplicated
    assert_same_costs(tmp_path / "whole", tmp_path / "cut")  # neither are costs.csv's


def test_checkpoint_holds_client_states_and_loads_safely(tmp_path):
    cfg = small_config("ditto", rounds=2)
    run(cfg, out=tmp_path, checkpoint_every=1)
    ckpt = torch.load(tmp_path / checkpoint.FILE, weights_only=True)  # no code inside
    assert ckpt["round"] == 2 and set(ckpt["client_states"]) == {0, 1, 2, 3}
    assert all("v" in s for s in ckpt["client_states"].values())  # Ditto's personal models


def _cli(*args, **kw):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "raycompo.run", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def _rows_written(folder: Path) -> int:
    try:
        return max(0, len((folder / "metrics.csv").read_text().splitlines()) - 1)
    except FileNotFoundError:
        return 0


def _wait_rows(proc, folder: Path, n: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while _rows_written(folder) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"no {n} rows in {timeout} s"
        time.sleep(0.05)


CLI_RUN = ["--backend", "inline", "--threads", "1", "--quiet", "--task", "dro-mnist5k", "--algo", "comfedl",
           "--rounds", "150", "--checkpoint-every", "3", "--set", "gamma=1", "tau=2"]


@pytest.mark.slow
def test_cli_killed_then_resumed_matches_the_uninterrupted_run(tmp_path):
    killed = _cli(*CLI_RUN, "--out", str(tmp_path / "cut"))
    _wait_rows(killed, tmp_path / "cut", 8)
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=60)
    assert json.loads((tmp_path / "cut" / "config.json").read_text())["status"] == "running"  # killed: no word
    resumed = _cli("--resume", str(tmp_path / "cut"))
    assert resumed.communicate(timeout=600)[1] is not None and resumed.returncode == 0
    whole = _cli(*CLI_RUN, "--out", str(tmp_path / "whole"))
    whole.communicate(timeout=600)
    assert whole.returncode == 0
    assert_same_metrics(tmp_path / "whole", tmp_path / "cut")
    assert_same_costs(tmp_path / "whole", tmp_path / "cut")
    assert json.loads((tmp_path / "cut" / "config.json").read_text())["status"] == "completed"


def test_sigterm_marks_the_run_interrupted_with_exit_143(tmp_path):
    proc = _cli(*CLI_RUN, "--out", str(tmp_path / "t"))
    _wait_rows(proc, tmp_path / "t", 4)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "--resume" in err
    assert json.loads((tmp_path / "t" / "config.json").read_text())["status"] == "interrupted"


@pytest.mark.slow
@pytest.mark.parametrize("victim,folder", [("clients-1", False), ("driver", False), ("clients-1", True)])
def test_a_dead_actor_is_recovered_with_the_unfaulted_metrics(ray_session, tmp_path, monkeypatch, victim, folder):
    """Without an output folder the checkpoint is kept in memory; with one, recovery reads
    it back from disk (once, for the one failure)."""
    cfg = small_config("ditto", rounds=6)
    inline = run(cfg)
    ray_cfg = dataclasses.replace(cfg, backend="ray", clients_per_actor=2, cpus_per_actor=0.5)
    lines: list[str] = []
    ns = f"fault-{victim}-{folder}"
    loads = []
    monkeypatch.setattr(checkpoint, "load", lambda path, _load=checkpoint.load: loads.append(path) or _load(path))
    faulted = run(ray_cfg, out=tmp_path / "run" if folder else None, namespace=ns, checkpoint_every=2,
                  log=lines.append, observers=[KillActor(victim, after=3)])
    assert faulted.status == "completed"
    assert_rows_close(inline.rows, faulted.rows, tol=1e-6)
    # The actor is dead once row 3 has reached the observers (KillActor waits for it). A
    # driver actor runs several rounds per call (engine/loop.py; never past a checkpoint), so
    # the death shows at round 4 or, when round 4 came in the same call, at its checkpoint
    # (named round 5); either way the last checkpoint is round 2's.
    assert len(lines) == 1, lines
    assert re.search(r"at round [45]; restarting the actors from the checkpoint of round 2 ", lines[0]), lines[0]
    assert loads == ([tmp_path / "run" / checkpoint.FILE] if folder else [])
    if folder:
        assert_rows_close(inline.rows, pd.read_csv(tmp_path / "run" / "metrics.csv").to_dict("records"), tol=1e-6)
        # the rows of rounds 3-4 written before the death are dropped, then written again once
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "run" / "costs.csv"), inline.costs)
    assert faulted.cost_rows == inline.cost_rows


@pytest.mark.slow
def test_failures_past_the_limit_fail_the_run(ray_session, tmp_path):
    cfg = dataclasses.replace(small_config("fedavg", rounds=5), backend="ray", clients_per_actor=2, cpus_per_actor=0.5)
    with pytest.raises(Exception, match="(?i)actor"):
        run(cfg, out=tmp_path, namespace="fault-limit", checkpoint_every=2, max_failures=1, log=lambda m: None,
            observers=[KillActor("clients-0", after=3, times=99)])
    stored = json.loads((tmp_path / "config.json").read_text())
    assert stored["status"] == "failed" and stored["error"]
    assert checkpoint.load(tmp_path / checkpoint.FILE)["round"] == 2  # resumable


@pytest.mark.slow
@pytest.mark.parametrize("victim", ["clients-0", "driver"])
def test_a_death_during_recovery_is_retried_with_the_unfaulted_metrics(ray_session, tmp_path, victim):
    """A host dies after round 3; while the new driver and hosts restore the checkpoint of
    round 2, `victim` dies too. That is failure 2 of 3, retried from the same checkpoint."""
    cfg = small_config("ditto", rounds=6)
    inline = run(cfg)
    ray_cfg = dataclasses.replace(cfg, backend="ray", clients_per_actor=2, cpus_per_actor=0.5)
    lines: list[str] = []
    ns = f"fault-restore-{victim}"
    with KillOnRestore(victim, namespace=ns) as during:
        faulted = run(ray_cfg, out=tmp_path / "run", namespace=ns, checkpoint_every=2, log=lines.append,
                      observers=[KillActor("clients-1", after=3)])
    assert len(during.killed_at) == 1
    assert faulted.status == "completed"
    assert_rows_close(inline.rows, faulted.rows, tol=1e-6)
    assert_rows_close(inline.rows, pd.read_csv(tmp_path / "run" / "metrics.csv").to_dict("records"), tol=1e-6)
    assert len(lines) == 2, lines
    # The host dies after row 3 reaches the observers. A driver actor runs several rounds per
    # call (engine/loop.py; never past the checkpoint of round 4), so the death shows at round 4
    # or, when round 4 came in the same call, at the checkpoint after it (named round 5).
    assert re.search(r"at round [45];", lines[0]) and "failure 1 of at most 3" in lines[0], lines[0]
    assert "while restarting" in lines[1] and "checkpoint of round 2" in lines[1] and "failure 2 of at most 3" in lines[1]


@pytest.mark.slow
def test_a_resume_whose_restore_fails_is_retried_and_deaths_count_to_the_limit(ray_session, tmp_path):
    """`--resume`'s own restore is retried too; deaths during restores count like any other:
    past --max-failures the run fails, still resumable."""
    cfg = dataclasses.replace(small_config("fedavg", rounds=5), backend="ray", clients_per_actor=2, cpus_per_actor=0.5)
    inline = run(dataclasses.replace(cfg, backend="inline"))
    with pytest.raises(KeyboardInterrupt):
        run(cfg, out=tmp_path, namespace="fault-resume-0", checkpoint_every=2, observers=[StopAt(3)])
    lines: list[str] = []
    with KillOnRestore("clients-1", namespace="fault-resume-1", times=99) as during:
        with pytest.raises(Exception, match="(?i)actor"):
            run(cfg, out=tmp_path, namespace="fault-resume-1", checkpoint_every=2, resume=True, max_failures=2,
                log=lines.append)
    assert len(during.killed_at) == 3 and len(lines) == 2  # failures 1 and 2 retried, the 3rd is one too many
    stored = json.loads((tmp_path / "config.json").read_text())
    assert stored["status"] == "failed" and stored["error"]
    with KillOnRestore("clients-1", namespace="fault-resume-2", times=1) as during:
        resumed = run(cfg, out=tmp_path, namespace="fault-resume-2", checkpoint_every=2, resume=True, log=lines.append)
    assert resumed.status == "completed" and len(during.killed_at) == 1 and len(lines) == 3
    assert_rows_close(inline.rows, pd.read_csv(tmp_path / "metrics.csv").to_dict("records"), tol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("command", [["raycompo.run", "--rounds", "1"], ["raycompo.tune", "--space", "dro"]])
def test_unreachable_address_fails_within_the_timeout(command, tmp_path):
    env = {**os.environ, "RAYCOMPO_CONNECT_TIMEOUT": "3"}
    t0 = time.monotonic()
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", *command, "--address", "127.0.0.1:9", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no Ray cluster answers" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - t0 < 60


def _small_args(tmp_path, *extra):
    sets = [f"{k}={v}" for k, v in SMALL_DRO.items()]
    return ["--backend", "inline", "--rounds", "1", "--quiet", "--set", *sets, *extra]


@pytest.mark.parametrize("extra,message", [
    (["--threads", "0"], "--threads must be >= 1"),
    (["--set", "lr=inf"], "finite"),
    (["--checkpoint-every", "0"], "--checkpoint-every"),
])
def test_bad_input_is_one_message_and_exit_2(tmp_path, capsys, extra, message):
    assert main(_small_args(tmp_path, *extra)) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_out_at_a_file_and_a_damaged_resume_folder_are_exit_2(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main(_small_args(tmp_path, "--out", str(tmp_path / "file"))) == 2
    assert "is a file" in capsys.readouterr().err
    (tmp_path / "damaged").mkdir()
    (tmp_path / "damaged" / "config.json").write_text("{not json")
    assert main(["--resume", str(tmp_path / "damaged")]) == 2
    assert "damaged" in capsys.readouterr().err


@pytest.mark.slow
def test_hosts_that_cannot_start_fail_within_the_host_timeout(ray_session):
    """Another job holds every CPU: the hosts stay pending. The run ends within
    --host-timeout naming them, instead of waiting forever."""
    ray = ray_session
    hog = ray.remote(num_cpus=2)(type("Hog", (), {"ping": lambda self: 1})).remote()
    ray.get(hog.ping.remote(), timeout=60)
    try:
        cfg = dataclasses.replace(small_config("fedavg", rounds=1), backend="ray", clients_per_actor=2,
                                  cpus_per_actor=0.5, host_timeout_s=3.0)
        t0 = time.monotonic()
        with pytest.raises(Exception, match="clients-0.*did not answer start"):
            run(cfg, namespace="starved", log=lambda m: None)
        assert time.monotonic() - t0 < 60
    finally:
        ray.kill(hog)
