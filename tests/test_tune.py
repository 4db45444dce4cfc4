"""`python -m raycompo.tune`: spaces, the paper's grid, tiny sweeps, divergence, resume,
bad input. Sweeps run in-process on the session's Ray (2 CPUs), inline backend, 1-2 rounds."""

from __future__ import annotations

import json
import math
import shlex
import socket
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from raycompo.tune.cli import main
from raycompo.tune.space import available_spaces, load_space, sweeps_dirs, validate
from tests.helpers import wait_until

PAPER_LR = [0.001, 0.01, 0.05, 0.1, 0.2, 0.5, 1]
PAPER = {
    "comfedl": {"lr": PAPER_LR, "gamma": [0.1, 0.5, 1, 5], "tau": [1, 5, 10]},
    "fedavg": {"lr": PAPER_LR, "tau": [1, 5, 10]},
    "qfedavg": {"lr": PAPER_LR, "q": [0.1, 0.2, 0.5, 1, 2], "tau": [1, 5, 10]},
    "drfl": {"lr": PAPER_LR, "weight_lr": [8e-3, 8e-2, 8e-1], "tau": [1, 5, 10]},
}
TRIAL_COLUMNS = {"trial_id", "algorithm", "task", "status", "rounds_done", "final_val_acc_worst",
                 "best_val_acc_worst", "best_round", "settings", "command", "time_s"}


def write_space(tmp_path: Path, text: str, name: str = "space") -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    return str(path)


# --- the paper's grid (no Ray) ----------------------------------------------------------


def test_grid_enumerates_exactly_the_papers_grid():
    from raycompo.tune.results import SweepStore
    from raycompo.tune.sweep import plan

    space = load_space("dro")
    assert space.task == "dro-mnist5k" and space.full_task == "dro-mnist" and space.metric == "val_acc_worst"
    assert space.algorithms == PAPER
    for algo, lists in PAPER.items():
        grid = space.grid(algo)
        assert len(grid) == math.prod(len(v) for v in lists.values())
        assert len({json.dumps(p, sort_keys=True) for p in grid}) == len(grid)  # no point twice
        for key, values in lists.items():
            assert sorted({p[key] for p in grid}) == sorted(values)
    assert space.grid_size() == 84 + 21 + 105 + 63 == 273
    meta = {"task": space.task, "rounds": space.rounds, "seed": 0, "metric": "val_acc_worst", "mode": "max",
            "algorithms": list(PAPER), "samples": 4, "options": {"search": "grid"}}
    todo = plan(space, meta, SweepStore("/nonexistent/sweep"))
    assert {a: t["n"] for a, t in todo.items()} == {"comfedl": 84, "fedavg": 21, "qfedavg": 105, "drfl": 63}


# --- every space file of sweeps/ -------------------------------------------------------


SPACES = sorted(p for d in sweeps_dirs() for p in d.glob("*.yaml"))


@pytest.mark.parametrize("path", SPACES, ids=[p.stem for p in SPACES])
def test_space_file_is_valid(path, tmp_path, monkeypatch):
    """Validated without the network and without ~: the data folder is an empty temp
    folder and every connection is refused, so a download task (omniglot) is checked
    without its data (its number of clients), as on a machine that has none."""
    attempts: list = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("tests never touch the network")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setenv("RAYCOMPO_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    space = load_space(str(path))
    validate(space)
    validate(space, data_dir=str(tmp_path / "data"))
    assert not (tmp_path / "home").exists()  # nothing written to ~
    if space.offline:
        assert attempts == []  # an offline space needs no network at all


OFFLINE_SPACES = [p for p in SPACES if load_space(str(p)).offline and p.stem != "dro"]
"""The spaces whose data need no download; `dro` has its own test
(test_dro_tiny_sweep_writes_results_and_rows_rerun)."""


@pytest.mark.slow
@pytest.mark.parametrize("path", OFFLINE_SPACES, ids=[p.stem for p in OFFLINE_SPACES])
def test_tiny_sweep_of_each_offline_space(path, tmp_path, ray_session):
    space = load_space(str(path))
    out = tmp_path / "sweep"
    rc = main(["--space", str(path), "--samples", "1", "--rounds", "1", "--out", str(out), "--quiet"])
    assert rc == 0
    trials = pd.read_csv(out / "trials.csv")
    assert set(trials["algorithm"]) == set(space.algorithms)
    assert set(trials["status"]) <= {"completed", "diverged"}
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert set(metrics["trial_id"]) == set(trials["trial_id"])
    best = json.loads((out / "best.json").read_text())
    assert set(best["algorithms"]) == set(space.algorithms)


# --- the dro quick start, tiny ----------------------------------------------------------


def test_dro_tiny_sweep_writes_results_and_rows_rerun(tmp_path, ray_session, capsys):
    out = tmp_path / "dro"
    rc = main(["--space", "dro", "--samples", "1", "--rounds", "2", "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr()
    assert "best per algorithm" in printed.out and str(out) in printed.out
    assert "[  4/4]" in printed.err  # one progress line per finished trial

    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == 4 and sorted(trials["algorithm"]) == sorted(PAPER)
    assert TRIAL_COLUMNS <= set(trials.columns)
    assert {"lr", "tau", "gamma", "q", "weight_lr"} <= set(trials.columns)
    assert trials["trial_id"].is_unique

    metrics = pd.read_parquet(out / "metrics.parquet")
    assert {"trial_id", "round", "val_acc_worst", "train_loss"} <= set(metrics.columns)
    for _, row in trials.iterrows():
        rounds = metrics[metrics["trial_id"] == row["trial_id"]]["round"].tolist()
        assert rounds == list(range(row["rounds_done"] + 1))

    best = json.loads((out / "best.json").read_text())
    assert best["metric"] == "val_acc_worst" and best["mode"] == "max"
    for algo, entry in best["algorithms"].items():
        assert entry["trials"] == 1
        if "value" in entry:
            assert set(PAPER[algo]) <= set(entry["settings"])

    # Ray Tune's own tools read the sweep: ExperimentAnalysis (one row per trial), TensorBoard
    from ray import tune

    [experiment] = (out / "tune").iterdir()
    assert f"ExperimentAnalysis({str(experiment)!r})" in printed.out
    assert f"tensorboard --logdir {out / 'tune'}" in printed.out
    analysis = tune.ExperimentAnalysis(str(experiment))
    frame = analysis.dataframe()
    assert len(frame) == 4 and sorted(frame["config/algorithm"]) == sorted(PAPER)
    by_algo = frame.set_index("config/algorithm")["val_acc_worst"]
    for _, row in trials.iterrows():
        if row["status"] == "completed":
            assert by_algo[row["algorithm"]] == pytest.approx(row["final_val_acc_worst"])
    algo_of = {tid: cfg["algorithm"] for tid, cfg in analysis.get_all_configs().items()}
    rounds_done = trials.set_index("algorithm")["rounds_done"]
    for tid, rows in analysis.trial_dataframes.items():  # every report: round 0 to the last
        assert rows["round"].tolist() == list(range(rounds_done[algo_of[tid]] + 1))
    assert len(list((out / "tune").rglob("events.out.tfevents*"))) == 4

    # a completed row re-runs with `python -m raycompo.run` to the same numbers
    from raycompo.run import main as run_main

    done = trials[trials["status"] == "completed"].iloc[0]
    argv = shlex.split(done["command"])[3:]
    assert argv[:2] == ["--task", "dro-mnist5k"]
    rerun = tmp_path / "rerun"
    assert run_main(argv + ["--out", str(rerun), "--quiet"]) == 0
    again = pd.read_csv(rerun / "metrics.csv")
    assert again["val_acc_worst"].iloc[-1] == pytest.approx(done["final_val_acc_worst"])


@pytest.mark.slow
def test_diverging_trial_is_recorded_and_sweep_goes_on_ray_backend(tmp_path, ray_session, capsys):
    """With --backend ray: each trial's placement group holds its driver and 2 host actors,
    which end with the trial. The diverged trial's line says so (it showed '(best 0.0000)')."""
    path = write_space(tmp_path, """
        task: dro-mnist5k
        rounds: 3
        algorithms:
          comfedl: {lr: [1000000.0, 0.01], gamma: [1], tau: [5]}
    """)
    out = tmp_path / "sweep"
    assert main(["--space", path, "--search", "grid", "--out", str(out), "--backend", "ray",
                 "--hosts-per-trial", "2"]) == 0
    said = capsys.readouterr()
    (line,) = [s for s in (said.out + said.err).splitlines() if "lr=1000000.0" in s and "] comfedl" in s]
    assert "val_acc_worst - (diverged at round " in line and "(best" not in line, line
    # the default population is off with --backend ray, and the sweep says so once
    assert (said.out + said.err).count("populations: off (--backend ray runs each trial on host actors") == 1
    assert json.loads((out / "sweep.json").read_text())["population"] == 1

    def alive():  # Tune kills the trial actors asynchronously: their hosts end a moment later
        return [a for a in ray_session.util.list_named_actors(all_namespaces=True) if a["name"].startswith("clients-")]

    wait_until(lambda: not alive())
    assert alive() == []
    trials = pd.read_csv(out / "trials.csv").set_index("lr")
    assert trials.loc[1e6, "status"] == "diverged"
    assert trials.loc[1e6, "final_val_acc_worst"] == -math.inf
    assert trials.loc[0.01, "status"] == "completed"
    assert trials.loc[0.01, "rounds_done"] == 3
    best = json.loads((out / "best.json").read_text())["algorithms"]["comfedl"]
    assert best["settings"]["lr"] == 0.01 and best["diverged"] == 1


def test_a_sweep_whose_trials_fail_exits_1_and_says_so(tmp_path, ray_session, capsys):
    """It ran to its end: not "interrupted" (130, which the help keeps for Ctrl-C), but 1,
    with the count of failed trials and the command that runs them again."""
    plugin = tmp_path / "broken.py"
    plugin.write_text(textwrap.dedent("""
        from raycompo.algorithms.fedavg import FedAvg


        class Broken(FedAvg):
            name = "broken"

            def server_round(self, ctx, w, state):
                raise RuntimeError("a mistake in the user's algorithm")
    """))
    path = write_space(tmp_path, f"""
        task: synthetic
        rounds: 2
        settings: {{n_clients: 8, clients_per_round: 4}}
        algorithms:
          {plugin}:Broken: {{lr: [0.01, 0.1]}}
    """)
    out = tmp_path / "sweep"
    assert main(["--space", path, "--search", "grid", "--out", str(out), "--population", "1", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert f"sweep ended with 2 trial(s) failed (trials.csv's error column says why); run them again with: " \
           f"python -m raycompo.tune --resume {out}" in err
    assert "sweep stopped" not in err
    trials = pd.read_csv(out / "trials.csv")
    assert set(trials["status"]) == {"error"} and trials["error"].str.contains("a mistake in the user's").all()


@pytest.mark.parametrize("extra, named", [(["--population", "4"], "--population"), (["--rounds", "5"], "--rounds"),
                                          (["--space", "dro", "--search", "grid"], "--space, --search"),
                                          (["--set", "tau=2"], "--set")])
def test_resume_refuses_the_options_its_sweep_recorded(extra, named, tmp_path, capsys):
    """They were ignored without a word; the session's own options stay allowed."""
    assert main(["--resume", str(tmp_path / "any"), *extra, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"error: --resume {tmp_path / 'any'} goes on with the options its sweep.json records; {named} cannot " \
           "change there" in err
    assert main(["--resume", str(tmp_path / "any"), "--max-concurrent", "1", "--quiet"]) == 2  # not a sweep: its own message
    assert "no sweep there (no sweep.json)" in capsys.readouterr().err


# --- resume -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("search", ["grid", "optuna"])
def test_resume_after_interruption_runs_no_trial_twice(search, tmp_path, ray_session):
    path = write_space(tmp_path, """
        task: dro-mnist5k
        rounds: 1
        samples: 4
        algorithms:
          fedavg: {lr: [0.001, 0.01, 0.1], tau: [1, 5]}
    """)
    out = tmp_path / "sweep"
    expected = 6 if search == "grid" else 4
    rc = main(["--space", path, "--search", search, "--out", str(out), "--stop-after", "2", "--max-concurrent", "1",
               "--quiet"])
    assert rc == 130  # interrupted
    first = pd.read_csv(out / "trials.csv")
    assert 2 <= len(first) < expected

    assert main(["--resume", str(out), "--quiet"]) == 0
    raw = pd.read_csv(out / "trials.csv")
    assert len(raw) == expected and raw["trial_id"].is_unique  # every trial once, none twice
    assert set(first["trial_id"]) <= set(raw["trial_id"])
    configs = {(r.lr, r.tau) for r in raw.itertuples()}
    assert len(configs) == expected
    # each trial's rounds were recorded by exactly one run
    log = pd.read_json(out / "metrics.jsonl", lines=True)
    assert (log[log["round"] == 0].groupby("trial_id").size() == 1).all()
    assert set(pd.read_parquet(out / "metrics.parquet")["trial_id"]) == set(raw["trial_id"])
    # nothing is left: resuming again runs nothing
    assert main(["--resume", str(out), "--quiet"]) == 0
    assert len(pd.read_csv(out / "trials.csv")) == expected


@pytest.mark.slow
@pytest.mark.parametrize("search", ["grid", "optuna"])
def test_an_algorithm_with_nothing_swept_runs_its_defaults_once(search, tmp_path, ray_session):
    """`fedavg: {}` (sweeps/dro.yaml: "runs the defaults") and `qfedavg: null`: one trial
    each, under both searches, and a stopped sweep resumes."""
    path = write_space(tmp_path, """
        task: dro-mnist5k
        rounds: 1
        samples: 3
        algorithms:
          fedavg: {}
          qfedavg: null
    """)
    out = tmp_path / "sweep"
    rc = main(["--space", path, "--search", search, "--out", str(out), "--stop-after", "1", "--max-concurrent", "1",
               "--quiet"])
    assert rc == 130 and len(pd.read_csv(out / "trials.csv")) == 1
    assert main(["--resume", str(out), "--quiet"]) == 0
    raw = pd.read_csv(out / "trials.csv")
    assert sorted(raw["algorithm"]) == ["fedavg", "qfedavg"] and raw["trial_id"].is_unique
    assert all(json.loads(s) == {} for s in raw["settings"])  # the defaults
    assert main(["--resume", str(out), "--quiet"]) == 0 and len(pd.read_csv(out / "trials.csv")) == 2


# --- bad input: exit code 2 and one message, before any trial -------------------------


def bad(argv, capsys) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err


def test_unknown_space_lists_available(capsys):
    err = bad(["--space", "nosuchspace"], capsys)
    assert "unknown space 'nosuchspace'" in err and "dro" in err
    assert "dro" in available_spaces()


@pytest.mark.parametrize(
    "text, message",
    [
        ("task: dro-mnist5k\nalgorithms: {fedavg: {lr: [0.1]}}\nbogus: 1\n", "unknown key(s) bogus"),
        ("task: dro-mnist5k\nalgorithms: {fedavg: {lr: [0.1], gamma_typo: [1]}}\n", "unknown setting(s) gamma_typo"),
        ("task: dro-mnist5k\nalgorithms: {nosuchalgo: {lr: [0.1]}}\n", "unknown algorithm 'nosuchalgo'"),
        ("task: no-such-task\nalgorithms: {fedavg: {lr: [0.1]}}\n", "unknown task 'no-such-task'"),
        ("task: dro-mnist5k\nalgorithms: {fedavg: {lr: [0.1, -1]}}\n", "lr must be > 0"),
        ("task: dro-mnist5k\nalgorithms: [fedavg]\n", "algorithms must be a non-empty mapping"),
        ("task: dro-mnist5k\nalgorithms: {fedavg: {lr: [0.1]\n", "not valid YAML"),
        ("algorithms: {fedavg: {lr: [0.1]}}\n", "missing key(s) task"),
        ("task: dro-mnist5k\nalgorithms: {fedavg: {lr: [null]}}\n", "lr=None is not a valid float"),
        ("task: dro-mnist5k\nalgorithms: {fedavg: {lr: [true]}}\n", "lr=True is not a valid float: a boolean"),
        ("task: dro-mnist5k\nalgorithms: {fedavg: {tau: [1, true]}}\n", "tau=True is not a valid int"),
    ],
)
def test_bad_space_file_fails_fast(text, message, tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    err = bad(["--space", str(path), "--out", str(tmp_path / "out")], capsys)
    assert message in err and str(path) in err or message in err
    assert not (tmp_path / "out").exists()


def test_metric_not_produced_by_task(tmp_path, capsys):
    err = bad(["--space", "dro", "--metric", "val_auc", "--out", str(tmp_path / "out")], capsys)
    assert "metric 'val_auc' is not produced by task dro-mnist5k" in err and "val_acc_worst" in err


def test_existing_out_and_missing_resume(tmp_path, capsys):
    err = bad(["--resume", str(tmp_path / "none")], capsys)
    assert "no sweep there" in err
