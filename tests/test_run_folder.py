"""A run folder belongs to one run and one process (issue 19): checkpoints carry the run's
fingerprint, --overwrite removes the old run (and only it), --resume refuses what it
cannot honour (missing rows, a lower --rounds, changed settings), a row cut by a kill is
dropped, one process writes a folder at a time, and failures leave whole files."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import raycompo
from raycompo.engine import checkpoint, run
from raycompo.errors import ConfigError
from raycompo.run import main
from raycompo.runfolder import lockfile, results
from raycompo.tune.results import SweepStore
from raycompo.tune.sweep import run_sweep
from raycompo.watch.observers import Observer
from tests.helpers import SMALL_DRO, small_config
from tests.test_durability import CLI_RUN, StopAt, _cli, _wait_rows, assert_same_metrics

CFG = small_config("comfedl", rounds=6, gamma=1.0, clients_per_round=3)
CLI_SETTINGS = ["--set", *(f"{k}={v}" for k, v in {**SMALL_DRO, "gamma": 1.0, "clients_per_round": 3}.items())]
CLI_ARGS = ["--backend", "inline", "--threads", "1", "--quiet", "--task", "dro-mnist5k", "--algo", "comfedl",
            "--checkpoint-every", "2", *CLI_SETTINGS]


def _cut(folder: Path, at: int = 5, cfg=CFG) -> None:
    """A run of `cfg` interrupted after round `at` (checkpoints every 2 rounds)."""
    with pytest.raises(KeyboardInterrupt):
        run(cfg, out=folder, checkpoint_every=2, observers=[StopAt(at)])


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    folder = tmp_path_factory.mktemp("whole") / "run"
    run(CFG, out=folder, checkpoint_every=2)
    return folder


def _status(folder: Path) -> str:
    return json.loads((folder / "config.json").read_text())["status"]


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


# --- 2: a checkpoint belongs to its run; --overwrite removes the old run -------------------------------------------

@pytest.mark.parametrize("other,named", [
    (small_config("ditto", rounds=6), "algo"),
    (dataclasses.replace(CFG, settings={**CFG.settings, "lr": 0.5}), "lr=0.5"),
    (dataclasses.replace(CFG, seed=3), "seed"),
    (small_config("comfedl", rounds=6, gamma=1.0, clients_per_round=3, n_clients=5), "n_clients"),
])
def test_a_checkpoint_of_another_run_is_refused(tmp_path, capsys, other, named):
    run(other, out=tmp_path / "other", checkpoint_every=2)
    _cut(tmp_path / "cut")
    shutil.copy(tmp_path / "other" / checkpoint.FILE, tmp_path / "cut" / checkpoint.FILE)
    before = (tmp_path / "cut" / "metrics.csv").read_text()
    assert main(["--resume", str(tmp_path / "cut")]) == 2
    err = _err(capsys)
    assert "belongs to another run" in err and named in err
    assert (tmp_path / "cut" / "metrics.csv").read_text() == before and _status(tmp_path / "cut") == "interrupted"
    with pytest.raises(ConfigError, match="belongs to another run"):
        raycompo.resume(tmp_path / "cut")


def test_a_checkpoint_without_fingerprint_is_checked_by_its_config(tmp_path, whole):
    """Checkpoints written before fingerprints: their config still tells another run."""
    _cut(tmp_path / "cut")
    path = tmp_path / "cut" / checkpoint.FILE
    ckpt = checkpoint.load(path)
    del ckpt["fingerprint"]
    checkpoint.save(path, ckpt)
    assert run(CFG, out=tmp_path / "cut", checkpoint_every=2, resume=True).status == "completed"
    assert_same_metrics(whole, tmp_path / "cut")
    _cut(tmp_path / "cut2")
    ckpt = checkpoint.load(tmp_path / "cut2" / checkpoint.FILE)
    del ckpt["fingerprint"]
    ckpt["config"]["algo"] = "ditto"
    checkpoint.save(tmp_path / "cut2" / checkpoint.FILE, ckpt)
    with pytest.raises(ConfigError, match="algo ditto there, comfedl here"):
        run(CFG, out=tmp_path / "cut2", checkpoint_every=2, resume=True)


def test_a_checkpoint_with_another_model_shape_is_not_restored(tmp_path):
    _cut(tmp_path / "cut")
    path = tmp_path / "cut" / checkpoint.FILE
    ckpt = checkpoint.load(path)
    ckpt["w"] = torch.zeros(ckpt["w"].numel() + 1)
    checkpoint.save(path, ckpt)
    with pytest.raises(ConfigError, match="shape"):
        run(CFG, out=tmp_path / "cut", checkpoint_every=2, resume=True)


def test_overwrite_removes_every_file_of_the_old_run(tmp_path, monkeypatch, capsys):
    """The issue's case: a ditto run overwritten by comfedl, which dies before its first
    checkpoint: the ditto checkpoint must not be there for --resume to restore."""
    folder = tmp_path / "run"
    run(small_config("ditto", rounds=4), out=folder, checkpoint_every=2)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, results.END_FILES_KEY: ["figure1.csv"]}))
    for name in ("figure1.csv", "figure1.csv.tmp", "checkpoint.pt.tmp", "config.json.tmp", "metrics.csv.tmp"):
        (folder / name).write_text("old")

    def dies(*a, **k):
        raise KeyboardInterrupt

    import raycompo.engine.runner as runner

    monkeypatch.setattr(runner, "_start", dies)
    assert main([*CLI_ARGS, "--rounds", "6", "--out", str(folder), "--overwrite"]) == 130
    # the new run's files only: costs.csv is made with its header when a run starts (the old rows are gone)
    assert sorted(os.listdir(folder)) == ["config.json", "costs.csv", "metrics.csv"]
    assert (folder / "costs.csv").read_text() == "round,direction,key,values,bytes\n"
    assert json.loads((folder / "config.json").read_text())["algo"] == "comfedl"
    monkeypatch.undo()
    assert main(["--resume", str(folder)]) == 2
    assert "no checkpoint" in _err(capsys)


@pytest.mark.parametrize("foreign", ["notes.txt", "data/"])
def test_overwrite_refuses_a_folder_with_files_that_are_not_the_runs(tmp_path, capsys, foreign):
    folder = tmp_path / "run"
    run(small_config("fedavg", rounds=1), out=folder)
    if foreign.endswith("/"):
        (folder / foreign).mkdir()
    else:
        (folder / foreign).write_text("mine")
    before = sorted(os.listdir(folder))
    assert main([*CLI_ARGS, "--rounds", "1", "--out", str(folder), "--overwrite"]) == 2
    err = _err(capsys)
    assert "not a raycompo run's" in err and foreign in err and "nothing was removed" in err
    assert sorted(os.listdir(folder)) == before


@pytest.mark.parametrize("kind, make", [
    ("a sweep (python -m raycompo.tune)", lambda f: (f / "sweep.json").write_text("{}")),
    ("a reproduction's report", lambda f: (f / "claim.json").write_text("{}")),
    ("run folders (a, b)", lambda f: [run(small_config("fedavg", rounds=1), out=f / n) for n in ("a", "b")]),
])
@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_a_run_refuses_a_folder_of_another_commands_results(tmp_path, capsys, kind, make, overwrite):
    """A run written into a sweep's, a report's or a folder of runs hid them from `plot` and
    `--resume` (accepted, --overwrite or not)."""
    folder = tmp_path / "results"
    folder.mkdir()
    make(folder)
    before = sorted(os.listdir(folder))
    assert main([*CLI_ARGS, "--rounds", "1", "--out", str(folder), *overwrite]) == 2
    assert f"{folder} holds {kind}" in _err(capsys)
    assert sorted(os.listdir(folder)) == before


def test_overwrite_keeps_the_trackers_stores_the_run_made(tmp_path):
    """`--tracker mlflow` keeps mlruns/ in the run folder: --overwrite of that run was refused
    as a folder with files that are not a run's."""
    folder = tmp_path / "run"
    run(small_config("fedavg", rounds=1), out=folder)
    (folder / "mlruns").mkdir()
    (folder / "mlruns" / "meta.yaml").write_text("kept")
    assert main([*CLI_ARGS, "--rounds", "1", "--out", str(folder), "--overwrite"]) == 0
    assert (folder / "mlruns" / "meta.yaml").read_text() == "kept"


@pytest.mark.parametrize("field, value", [("threads", "two"), ("threads", 1.5), ("seed", "0")])
def test_resume_of_a_hand_edited_config_is_refused_before_any_of_it_is_used(tmp_path, capsys, field, value):
    """`"threads": "two"` reached torch.set_num_threads: `run failed: RuntimeError` (exit 1)
    and a --resume hint that failed the same way."""
    _cut(tmp_path / "cut")
    path = tmp_path / "cut" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), field: value}))
    assert main(["--resume", str(tmp_path / "cut")]) == 2
    assert f"the run's configuration: {field} must be" in _err(capsys)


def test_a_new_run_refuses_any_remains_of_a_run(tmp_path, capsys):
    folder = tmp_path / "run"
    run(small_config("fedavg", rounds=2), out=folder, checkpoint_every=1)
    (folder / "metrics.csv").unlink()
    assert main([*CLI_ARGS, "--rounds", "1", "--out", str(folder)]) == 2
    assert "already holds a run (checkpoint.pt, clients.csv, config.json, costs.csv)" in _err(capsys)


# --- 3: rows up to the checkpoint are all there, or the resume is refused -------------------------------------------

def _drop_lines(path: Path, keep) -> None:
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(ln for i, ln in enumerate(lines) if keep(i, ln)))


@pytest.mark.parametrize("damage,message", [
    ("delete", "metrics.csv is missing"),
    ("header only", "lacks the rows of round(s) 0-4"),
    ("row 2", "lacks the rows of round(s) 2"),
    ("rows 1-3", "lacks the rows of round(s) 1-3"),
    ("row 3 twice", "out of order or twice"),
])
def test_resume_refuses_missing_rows_and_changes_nothing(tmp_path, capsys, damage, message):
    folder = tmp_path / "cut"
    _cut(folder)
    path = folder / "metrics.csv"
    if damage == "delete":
        path.unlink()
    elif damage == "header only":
        _drop_lines(path, lambda i, ln: i == 0)
    elif damage == "row 2":
        _drop_lines(path, lambda i, ln: i != 3)
    elif damage == "rows 1-3":
        _drop_lines(path, lambda i, ln: not 2 <= i <= 4)
    else:
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[:5] + [lines[4]] + lines[5:]))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert main(["--resume", str(folder)]) == 2
    err = _err(capsys)
    assert message in err and "checkpoint is at round 4" in err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_rows_after_the_checkpoint_may_be_missing(tmp_path, whole):
    folder = tmp_path / "cut"
    _cut(folder)
    _drop_lines(folder / "metrics.csv", lambda i, ln: i != 6)  # round 5: replayed anyway
    assert main(["--resume", str(folder)]) == 0
    assert_same_metrics(whole, folder)


# --- 4: --resume refuses what it cannot honour ----------------------------------------------------------------------

def test_resume_below_the_checkpoint_round_is_refused(tmp_path, capsys):
    folder = tmp_path / "cut"
    _cut(folder)
    assert main(["--resume", str(folder), "--rounds", "3"]) == 2
    assert "checkpoint is at round 4" in _err(capsys)
    with pytest.raises(ConfigError, match="checkpoint is at round 4"):
        raycompo.resume(folder, rounds=2)
    assert _status(folder) == "interrupted"
    assert main(["--resume", str(folder), "--rounds", "4"]) == 0  # up to the checkpoint: honoured
    rows = results.read_rows(folder, 99)
    assert [r["round"] for r in rows] == [0, 1, 2, 3, 4] and _status(folder) == "completed"
    assert main(["--resume", str(folder), "--rounds", "3"]) == 2
    assert "already completed (4 rounds)" in _err(capsys)


@pytest.mark.parametrize("flags,named", [
    (["--set", "lr=0.5"], "--set lr=0.5"),
    (["--set", "algo.gamma=0.5"], "--set gamma=0.5"),
    (["--task", "fair-synth"], "--task fair-synth"),
    (["--algo", "ditto"], "--algo ditto"),
    (["--seed", "1"], "--seed 1"),
    (["--seed=2"], "--seed 2"),
    (["--eval-every", "2"], "--eval-every 2"),
    (["--eval-cl", "2"], "--eval-clients 2"),  # an abbreviation is the same option
])
def test_resume_refuses_options_that_change_the_run(tmp_path, capsys, flags, named):
    folder = tmp_path / "cut"
    _cut(folder)
    assert main(["--resume", str(folder), *flags]) == 2
    err = _err(capsys)
    assert named in err and "--out" in err
    assert _status(folder) == "interrupted"


def test_resume_takes_the_runs_own_values_again_and_placement_options(tmp_path, capsys, whole):
    folder = tmp_path / "cut"
    _cut(folder)
    assert main(["--resume", str(folder), *CLI_ARGS, "--rounds", "6", "--host-timeout", "600"]) == 0
    assert_same_metrics(whole, folder)
    assert json.loads((folder / "config.json").read_text())["host_timeout_s"] == 600


@pytest.mark.parametrize("flags,message", [(["--overwrite"], "--overwrite"), (["--out", "elsewhere"], "leave out --resume")])
def test_resume_with_overwrite_or_another_out_is_refused(tmp_path, capsys, flags, message):
    folder = tmp_path / "cut"
    _cut(folder)
    assert main(["--resume", str(folder), *flags]) == 2
    assert message in _err(capsys)
    with pytest.raises(ConfigError):
        run(CFG, out=folder, resume=True, overwrite=True)
    with pytest.raises(ConfigError):
        run(CFG, resume=True)


# --- 5: a row cut by a kill is dropped ------------------------------------------------------------------------------

@pytest.mark.parametrize("cut", ["0.12", "", "\r"])
def test_a_cut_last_row_is_dropped_at_resume(tmp_path, whole, cut):
    folder = tmp_path / "cut"
    _cut(folder)
    with open(folder / "metrics.csv", "a", newline="") as f:
        f.write("6," + cut)  # a kill during the next row's write
    assert main(["--resume", str(folder)]) == 0
    assert_same_metrics(whole, folder)


def test_a_damaged_row_inside_the_file_is_one_message(tmp_path, capsys):
    folder = tmp_path / "cut"
    _cut(folder)
    _drop_lines(folder / "metrics.csv", lambda i, ln: True)
    lines = (folder / "metrics.csv").read_text().splitlines(keepends=True)
    lines[2] = "1,0.5\r\n"
    (folder / "metrics.csv").write_text("".join(lines))
    assert main(["--resume", str(folder)]) == 2
    assert "line 3" in _err(capsys)


# --- 6: one process per folder --------------------------------------------------------------------------------------

def test_a_folder_in_use_is_refused_naming_the_holder(tmp_path, capsys):
    folder = tmp_path / "run"
    _cut(folder)
    with lockfile.hold(folder, "run"):
        for argv in (["--resume", str(folder)], [*CLI_ARGS, "--rounds", "1", "--out", str(folder), "--overwrite"]):
            assert main(argv) == 2
            assert f"in use by raycompo process {os.getpid()} (a run)" in _err(capsys)
        with pytest.raises(ConfigError, match="in use"):
            raycompo.resume(folder)
        assert main([*CLI_ARGS, "--rounds", "1", "--out", str(folder / "inner")]) == 0  # another folder
    assert not (folder / lockfile.NAME).exists()
    assert main(["--resume", str(folder)]) == 0  # released


@pytest.mark.slow
def test_two_processes_on_one_folder_one_is_refused(tmp_path):
    folder = tmp_path / "cut"
    first = _cli(*CLI_RUN, "--out", str(folder))
    try:
        _wait_rows(first, folder, 5)
        first.send_signal(signal.SIGSTOP)  # it holds the folder, frozen
        second = subprocess.run([sys.executable, "-m", "raycompo.run", "--resume", str(folder)],
                                capture_output=True, text=True, timeout=300)
        assert second.returncode == 2, second.stderr
        assert f"in use by raycompo process {first.pid}" in second.stderr and "Traceback" not in second.stderr
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)
    assert (folder / lockfile.NAME).exists()  # a dead process's lock file: stale, taken over
    at = checkpoint.load(folder / checkpoint.FILE)["round"]
    resumed = subprocess.run([sys.executable, "-m", "raycompo.run", "--resume", str(folder), "--rounds", str(at + 2)],
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert [r["round"] for r in results.read_rows(folder, 10**6)] == list(range(at + 3))
    assert not (folder / lockfile.NAME).exists()


def test_a_lock_is_released_on_any_exit_and_by_a_dead_holder(tmp_path):
    folder = tmp_path / "run"
    with pytest.raises(ConfigError):
        run(dataclasses.replace(CFG, settings={**CFG.settings, "lr": -1.0}), out=folder)
    assert not folder.exists()  # made for the lock, left empty: removed
    with pytest.raises(RuntimeError):
        run(CFG, out=folder, observers=[Boom(2, RuntimeError("boom"))])
    assert not (folder / lockfile.NAME).exists()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from raycompo.runfolder import lockfile; "
                               f"lockfile.hold({str(tmp_path / 'x')!r}).acquire(); print('held', flush=True); "
                               "time.sleep(600)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=f"process {holder.pid}"):
            lockfile.hold(tmp_path / "x").acquire()
    finally:
        holder.kill()
        holder.wait(60)
    with lockfile.hold(tmp_path / "x"):  # the kernel released the dead holder's lock
        pass


def test_a_sweep_folder_is_one_process_s(tmp_path):
    store = SweepStore(tmp_path / "sweep")
    with store.lock():
        with pytest.raises(ConfigError, match=f"process {os.getpid()} \\(a sweep\\)"):
            run_sweep(None, {}, store)  # refused before it reads anything
    with store.lock():
        pass


# --- 12: bad input, colour codes, a full disk -----------------------------------------------------------------------

class Boom(Observer):
    def __init__(self, at: int, exc: BaseException):
        self.at, self.exc = at, exc

    def on_row(self, row):
        if row["round"] == self.at:
            raise self.exc


def test_negative_max_failures_is_refused(tmp_path, capsys):
    assert main([*CLI_ARGS, "--max-failures", "-1", "--out", str(tmp_path / "r")]) == 2
    assert "--max-failures must be >= 0" in _err(capsys)
    with pytest.raises(ConfigError, match="max_failures"):
        raycompo.run("dro-mnist5k", "fedavg", rounds=1, settings=SMALL_DRO, max_failures=-1)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("resume", [False, True])
def test_an_out_name_too_long_is_one_message(tmp_path, resume):
    long = str(tmp_path / ("x" * 300) / "run")
    argv = ["--resume", long] if resume else [*CLI_ARGS, "--rounds", "1", "--out", long]
    proc = subprocess.run([sys.executable, "-m", "raycompo.run", *argv], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "File name too long" in proc.stderr and proc.stderr.count("\n") == 1


def test_failure_messages_are_stored_without_colour_codes(tmp_path, capsys):
    with pytest.raises(RuntimeError):
        run(CFG, out=tmp_path, observers=[Boom(1, RuntimeError("\x1b[31mhost\x1b[0m \x1b[1;33mgone\x1b[0m\nmore"))])
    stored = json.loads((tmp_path / "config.json").read_text())
    assert stored["status"] == "failed" and stored["error"] == "host gone"


def _tmp_files(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_a_full_disk_during_a_checkpoint_fails_the_run_and_leaves_whole_files(tmp_path, monkeypatch, whole):
    real_save = torch.save

    def save(obj, f, *a, **k):
        if obj["round"] >= 4:
            Path(f).write_bytes(b"PK\x03\x04 half a checkpoint")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(obj, f, *a, **k)

    monkeypatch.setattr(checkpoint.torch, "save", save)
    with pytest.raises(OSError, match="No space"):
        run(CFG, out=tmp_path / "r", checkpoint_every=2)
    stored = json.loads((tmp_path / "r" / "config.json").read_text())
    assert stored["status"] == "failed" and "No space left on device" in stored["error"]
    assert _tmp_files(tmp_path / "r") == []
    assert checkpoint.load(tmp_path / "r" / checkpoint.FILE)["round"] == 2
    monkeypatch.undo()
    assert main(["--resume", str(tmp_path / "r")]) == 0
    assert_same_metrics(whole, tmp_path / "r")


def test_a_full_disk_everywhere_keeps_config_whole_and_no_temp_files(tmp_path, monkeypatch, whole, capsys):
    """Every write fails after round 3 (metrics row cut halfway, config.json and the
    checkpoint cannot be written): the files stay as they were, the CLI says why (exit 1),
    and once there is space again --resume completes the run."""
    full = {"on": False}
    nospace = OSError(errno.ENOSPC, "No space left on device")
    real_open, real_save, real_append = open, torch.save, results.RunWriter.append

    def fake_open(path, mode="r", *a, **k):
        f = real_open(path, mode, *a, **k)
        if full["on"] and "w" in mode:
            f.write("{\"half\": ")
            f.close()
            raise nospace
        return f

    def save(obj, f, *a, **k):
        if full["on"]:
            Path(f).write_bytes(b"PK")
            raise nospace
        return real_save(obj, f, *a, **k)

    def append(self, row):
        if full["on"]:
            self._file.write("3,0.1")
            self._file.flush()
            raise nospace
        real_append(self, row)

    class DiskFills(Observer):
        def on_row(self, row):
            if row["round"] == 3:
                full["on"] = True

    monkeypatch.setattr(results, "open", fake_open, raising=False)
    monkeypatch.setattr(checkpoint.torch, "save", save)
    monkeypatch.setattr(results.RunWriter, "append", append)
    import raycompo.engine as engine

    real_run = engine.run
    monkeypatch.setattr(engine, "run", lambda cfg, out=None, **k: real_run(cfg, out, **{**k, "observers": [DiskFills()]}))
    assert main([*CLI_ARGS, "--rounds", "6", "--out", str(tmp_path / "r")]) == 1
    err = _err(capsys)
    assert "No space left on device" in err and "--resume" in err
    folder = tmp_path / "r"
    assert _status(folder) == "running"  # could not be written: left whole, not cut
    assert _tmp_files(folder) == []
    assert checkpoint.load(folder / checkpoint.FILE)["round"] == 2
    monkeypatch.undo()
    assert main(["--resume", str(folder)]) == 0
    assert_same_metrics(whole, folder)
    assert _status(folder) == "completed"


def test_a_failed_json_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "config.json"
    results.write_json_atomic(path, {"a": 1})

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        results.write_json_atomic(path, {"a": 2})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"a": 1} and _tmp_files(tmp_path) == []


def test_spans():
    assert results._spans([1, 2, 3, 5, 7, 8]) == "1-3, 5, 7-8"
