"""A sweep's trial checkpoints (`--checkpoint-every N`, tune/trial_checkpoints.py; issue 42:
"a killed sweep resumes every population"): each trial's folder is its own, a resumed trial
hands Tune its rows up to the checkpoint, and a sweep killed with SIGKILL mid-trial resumes
its running trials (alone and as populations) from their checkpoints, to the trials of an
uninterrupted sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import raycompo
from raycompo.configuration.config import RunConfig
from raycompo.errors import ConfigError
from raycompo.tune.trial_checkpoints import RESUMED_AT, Replay, TrialCheckpoints, checkpoints_of
from raycompo.watch.observers import Observer, RunInfo

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"n_clients": 24, "clients_per_round": 8, "tau": 3}


def cfg(lr: float, rounds: int = 4) -> RunConfig:
    return RunConfig(task="synthetic", algo="fedavg", rounds=rounds, settings={**SMALL, "lr": lr})


def test_each_trial_has_a_folder_of_its_own_and_resumes_only_from_a_checkpoint(tmp_path):
    ck = checkpoints_of(tmp_path, 2)
    assert isinstance(ck, TrialCheckpoints) and ck.every == 2 and checkpoints_of(tmp_path, None) is None
    a, b = ck.folder(cfg(0.1)), ck.folder(cfg(0.2))
    assert a != b and a == ck.folder(cfg(0.1)) and a.parent == (tmp_path / "checkpoints").resolve()
    assert ck.folder(cfg(0.1, rounds=5)) != a  # another trial: more rounds
    fresh = ck.run_options(cfg(0.1))
    assert fresh == {"out": str(a), "checkpoint_every": 2, "resume": False, "overwrite": True}
    raycompo.run("synthetic", "fedavg", rounds=2, settings={**SMALL, "lr": 0.1}, out=a, checkpoint_every=2)
    assert ck.run_options(cfg(0.1))["resume"] is True  # its checkpoint is there
    ck.finished(cfg(0.1))
    assert not a.exists()


class Reported(Observer):
    """A TuneReporter's part that Replay uses: `extra`, `report` and `on_row`."""

    def __init__(self):
        self.extra: dict = {}
        self.rows: list = []
        self.report = "own"

    def on_row(self, row):
        self.rows.append({**row, **self.extra, "via": self.report})


def test_a_resumed_trial_hands_its_rows_up_to_the_checkpoint_first(tmp_path):
    """The rows 0..checkpoint read back from the trial's metrics.csv, marked `resumed_at`,
    through `direct` (a member's: past member ASHA); nothing for a run that starts anew."""
    out = tmp_path / "t"
    raycompo.run("synthetic", "fedavg", rounds=3, settings={**SMALL, "lr": 0.1}, out=out, checkpoint_every=2)
    reporter = Reported()
    Replay(reporter, direct="direct").on_start(RunInfo({}, 24, out=str(out), start_round=2, resumed=True))
    assert [r["round"] for r in reporter.rows] == [0, 1, 2]
    assert all(r[RESUMED_AT] == 2 and r["via"] == "direct" for r in reporter.rows) and reporter.report == "own"
    written = pd.read_csv(out / "metrics.csv")
    assert reporter.rows[1]["train_loss"] == pytest.approx(float(written["train_loss"][1]))
    fresh = Reported()
    Replay(fresh).on_start(RunInfo({}, 24, out=str(out), start_round=0))
    assert fresh.rows == [] and RESUMED_AT not in fresh.extra
    at_zero = Reported()  # resumed from the checkpoint of round 0: row 0 is not computed again
    Replay(at_zero).on_start(RunInfo({}, 24, out=str(out), start_round=0, resumed=True))
    assert [r["round"] for r in at_zero.rows] == [0] and at_zero.rows[0][RESUMED_AT] == 0


def test_a_trial_killed_before_its_second_checkpoint_hands_every_row_once(tmp_path):
    """The engine checkpoints round 0: a trial killed before round N resumes from there with
    `resumed` set, and its reporter hears rounds 0..R once each (row 0 replayed)."""
    from raycompo.engine import run as engine_run

    ck = checkpoints_of(tmp_path, 5)
    c = cfg(0.1)

    class Kill(Exception):
        pass

    class KillAt(Observer):
        def on_row(self, row):
            if row["round"] == 2:
                raise Kill

    with pytest.raises(Kill):
        engine_run(c, observers=[KillAt()], **ck.run_options(c))
    options = ck.run_options(c)
    assert options["resume"] is True
    reporter = Reported()
    engine_run(c, observers=[Replay(reporter), reporter], **options)
    assert [r["round"] for r in reporter.rows] == [0, 1, 2, 3, 4]
    assert all(r[RESUMED_AT] == 0 for r in reporter.rows[1:])


def test_a_resumed_sweep_hands_out_the_trials_holding_a_checkpoint_first(tmp_path):
    """`pending` finds the candidates whose folder holds a checkpoint (by the hash of their
    configuration: a folder of another trial or without a checkpoint is not matched);
    `UniqueSearcher(first=...)` hands them out before its inner searcher, each once."""
    from raycompo.tune.searchers import ListSearcher, UniqueSearcher
    from raycompo.tune.trial_checkpoints import pending

    ck = checkpoints_of(tmp_path, 2)
    points = [{"lr": lr} for lr in (0.1, 0.2, 0.3)]
    config_of = lambda algo, p: cfg(p["lr"])  # noqa: E731
    assert pending(ck, {"fedavg": points}, config_of) == {}  # no folder yet
    raycompo.run("synthetic", "fedavg", rounds=2, settings={**SMALL, "lr": 0.3}, out=ck.folder(cfg(0.3)),
                 checkpoint_every=2)
    ck.folder(cfg(0.2)).mkdir(parents=True)  # killed before its first checkpoint: nothing to continue
    (Path(ck.root) / "not-a-trial").mkdir()
    assert pending(ck, {"fedavg": points}, config_of) == {"fedavg": [{"lr": 0.3}]}
    inner = ListSearcher([{"lr": 0.3}, {"lr": 0.1}], metric="m", mode="max")
    searcher = UniqueSearcher(inner, {}, metric="m", mode="max", first=[{"lr": 0.3}])
    assert searcher.suggest("a") == {"lr": 0.3} and searcher.suggest("b") == {"lr": 0.1}  # 0.3 not twice
    searcher.on_trial_complete("a", result={"m": 1.0})
    assert searcher.known[json.dumps({"lr": 0.3})] == 1.0


@pytest.mark.parametrize("every", [0, -1, 1.5, True])
def test_a_checkpoint_interval_that_cannot_be_is_refused(tmp_path, every):
    from raycompo.tune.sweep import SweepOptions, prepare

    with pytest.raises(ConfigError, match="--checkpoint-every must be an integer >= 1"):
        prepare(SweepOptions(space="dro", out=str(tmp_path / "s"), checkpoint_every=every))
    with pytest.raises(ConfigError, match="checkpoint_every"):
        raycompo.tune("dro", checkpoint_every=0, out=tmp_path / "t")
    assert not (tmp_path / "s").exists() and not (tmp_path / "t").exists()


def test_a_resumed_sweep_keeps_the_interval_it_started_with(tmp_path, capsys):
    from raycompo.tune.cli import main

    assert main(["--resume", str(tmp_path / "x"), "--checkpoint-every", "3"]) == 2
    assert "--checkpoint-every is set when a sweep starts" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="goes on with the interval its sweep.json records"):
        raycompo.tune(resume=tmp_path / "x", checkpoint_every=3)


def test_the_command_line_records_the_interval(tmp_path):
    from raycompo.tune.cli import build_parser
    from raycompo.tune.sweep import SweepOptions, prepare

    assert build_parser().parse_args(["--space", "dro", "--checkpoint-every", "3"]).checkpoint_every == 3
    _, meta, _ = prepare(SweepOptions(space="dro", out=str(tmp_path / "s"), checkpoint_every=3))
    assert meta["options"]["checkpoint_every"] == 3


def test_trials_csv_names_the_round_a_trial_resumed_at():
    from raycompo.tune.space import load_space
    from raycompo.tune.sweep import SweepOptions, prepare, trial_record

    space, meta, _ = prepare(SweepOptions(space="dro", out="/nonexistent/never-written"))
    algo = meta["algorithms"][0]
    point = space.grid(algo)[0]
    rows = [{"round": 3, "val_acc_worst": 0.5, RESUMED_AT: 2, "status": "completed"}]
    rec = trial_record(meta, load_space("dro"), algo, point, rows, {}, "completed", "")
    assert rec[RESUMED_AT] == 2 and f"final_{RESUMED_AT}" not in rec
    assert RESUMED_AT not in trial_record(meta, space, algo, point, [{"round": 3}], {}, "completed", "")


SPACE = ("task: synthetic\nrounds: 300\nsettings: {n_clients: 24, clients_per_round: 8, tau: 3}\nalgorithms:\n"
         "  fedavg: {lr: [0.01, 0.02, 0.05, 0.1]}\n")


def past_a_checkpoint(folder: Path, every: int) -> int:
    """Trials in `folder`/checkpoints whose metrics.csv holds round `every` + 1 (so a
    checkpoint of round `every` or later is there; the first one is of round 0)."""
    return sum(1 for m in (folder / "checkpoints").glob("*/metrics.csv") if len(m.read_text().splitlines()) >= every + 3)


def kill_once_checkpointed(args: list[str], folder: Path, running: int, every: int, timeout: float = 240.0) -> None:
    """`python -m raycompo.tune ARGS` killed with SIGKILL as soon as `running` trials are past
    a checkpoint after round 0 in `folder`/checkpoints: its process group (the sweep, Ray's
    GCS and raylet) and every process under it, Ray's workers too, which run in process
    groups of their own. A trial's worker that outlived the kill went on for a second or two
    (until it saw its raylet gone): it could finish its trial and remove its checkpoint
    folder before the resume looked, so that the resume started that trial again from round
    0 (a failure seen once in CI)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen([sys.executable, "-m", "raycompo.tune", *args], cwd=folder.parent, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while past_a_checkpoint(folder, every) < running:
            assert proc.poll() is None, f"the sweep ended before it was killed: {proc.stderr.read().decode()[-2000:]}"
            assert time.monotonic() < deadline, "no checkpoint written in time"
            time.sleep(0.02)
    finally:
        kill_all(proc.pid)
        proc.wait(timeout=60)
        proc.stderr.close()


def kill_all(pid: int) -> None:
    """SIGKILL the process group of `pid` and every descendant of `pid` (whatever its group),
    then wait until they are all gone (at most 60 s). The group is stopped first (SIGSTOP), so
    that its raylet starts no worker between the listing and the kill."""
    import ray  # noqa: F401, I001  (puts its bundled psutil on sys.path, as engine/host.py does)
    import psutil

    os.killpg(pid, signal.SIGSTOP)
    try:
        tree = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    os.killpg(pid, signal.SIGKILL)
    for p in tree:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(tree, timeout=60)
    assert not alive, f"processes of the killed sweep still running: {alive}"


def finals(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / "trials.csv").sort_values("trial_id").reset_index(drop=True)


@pytest.mark.slow
def test_a_sweep_killed_mid_trial_resumes_its_trials_and_populations_from_their_checkpoints(tmp_path):
    """SIGKILL while trials run (one at a time, then populations of 2): --resume continues
    the running trials from their checkpoints (`resumed_at` > 0), records every trial once
    with every round once, leaves no checkpoint behind, and gives the trials of an
    uninterrupted sweep (best values over the replayed rows too)."""
    from raycompo.tune.cli import main

    space = tmp_path / "lr.yaml"
    space.write_text(SPACE)
    grid = ["--space", str(space), "--search", "grid", "--quiet", "--max-concurrent", "1"]
    assert main([*grid, "--out", str(tmp_path / "whole"), "--population", "1"]) == 0
    whole = finals(tmp_path / "whole")
    cols = [c for c in whole.columns if c.startswith("final_") and "time" not in c] + ["best_val_acc_worst", "best_round"]
    for population, running in (("1", 1), ("2", 2)):
        out = tmp_path / f"killed-{population}"
        kill_once_checkpointed([*grid, "--out", str(out), "--population", population, "--checkpoint-every", "10"],
                               out, running, every=10)
        assert main(["--resume", str(out), "--quiet"]) == 0
        resumed = finals(out)
        assert list(resumed["trial_id"]) == list(whole["trial_id"]) and (resumed["status"] == "completed").all()
        assert (resumed[RESUMED_AT].dropna() > 0).sum() >= running, resumed[RESUMED_AT]
        # (a population's rows equal its trials' alone to float rounding, 1e-5: engine/population.py)
        assert np.allclose(resumed[cols].to_numpy(float), whole[cols].to_numpy(float), rtol=1e-5, atol=1e-7,
                           equal_nan=True)
        lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
        assert len(lines) == len({(x["trial_id"], x["round"]) for x in lines}) == 4 * 301
        assert not (out / "checkpoints").exists()  # the sweep ended with nothing left: no folder stays


@pytest.mark.slow
def test_a_killed_optuna_sweep_of_populations_continues_the_trials_it_was_running(tmp_path):
    """Optuna's suggestions after a resume need not be those of the killed session: the
    trials that hold a checkpoint are handed out first, so that they continue, and the sweep
    still runs `samples` trials, each once."""
    from raycompo.tune.cli import main

    space = tmp_path / "lr.yaml"
    space.write_text(SPACE)
    out = tmp_path / "optuna"
    kill_once_checkpointed(["--space", str(space), "--samples", "3", "--quiet", "--max-concurrent", "1", "--out",
                            str(out), "--population", "2", "--checkpoint-every", "10"], out, 2, every=10)
    held = sorted(f.name for f in (out / "checkpoints").iterdir())
    assert len(held) == 2
    assert main(["--resume", str(out), "--quiet"]) == 0
    trials = finals(out)
    assert len(trials) == 3 and trials["trial_id"].is_unique and (trials["status"] == "completed").all()
    assert (trials[RESUMED_AT].dropna() > 0).sum() == 2
    assert not (out / "checkpoints").exists()
