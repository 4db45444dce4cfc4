"""Sweeps on a simulated system (issue 31, item 5): a space sets and sweeps RunConfig keys
(`system`, `budget`, the engine's options), `--rank-at sim_time` ranks at equal simulated
time, and every trial's command repeats its system and budget."""

from __future__ import annotations

import json
import math
import shlex

import pandas as pd
import pytest

from raycompo.configuration.config import RunConfig
from raycompo.tune.cli import main
from raycompo.tune.results import command_line
from raycompo.tune.space import run_keys, space_from_dict

SPACE = {
    "task": "dro-mnist5k", "rounds": 3, "metric": "val_acc_worst", "mode": "max", "eval_every": 1,
    "system": "mobile-sync", "budget": {"sim_time": 0.5}, "settings": {"clients_per_round": 5},
    "algorithms": {"fedavg": {"lr": [0.1], "system": ["mobile-sync", "mobile-fastest"]}},
}


def rerun_config(command: str) -> RunConfig:
    """The RunConfig that `python -m raycompo.run` builds from a trial's command."""
    from raycompo.run import build_parser, config_from_args

    argv = shlex.split(command)
    assert argv[:3] == ["python", "-m", "raycompo.run"]
    return config_from_args(build_parser().parse_args(argv[3:]))


def test_run_keys_are_the_fields_of_runconfig_a_sweep_does_not_set_itself():
    import dataclasses

    fields = {f.name for f in dataclasses.fields(RunConfig)}
    assert {"system", "budget"} <= set(run_keys()) <= fields
    assert not {"task", "algo", "rounds", "seed", "settings", "backend"} & set(run_keys())


def test_a_space_sets_and_sweeps_runconfig_keys_and_the_command_repeats_them():
    space = space_from_dict(SPACE)
    assert space.run == {"system": "mobile-sync", "budget": {"sim_time": 0.5}}
    sync, fastest = (space.run_config("fedavg", p, rounds=3, seed=0) for p in space.grid("fedavg"))
    assert (sync.system, fastest.system) == ("mobile-sync", "mobile-fastest")  # the point's key wins
    assert sync.budget == fastest.budget == {"sim_time": 0.5}
    assert sync.settings == {"clients_per_round": 5, "lr": 0.1}  # RunConfig keys are not settings
    for cfg in (sync, fastest):
        command = command_line(cfg.to_dict())
        assert "--system" in command and "--budget sim_time=0.5" in command
        again = rerun_config(command)
        assert (again.system, again.budget, again.settings) == (cfg.system, cfg.budget, cfg.settings)
    # a space without them: the command is the one it always was
    plain = space_from_dict({k: v for k, v in SPACE.items() if k not in ("system", "budget")}
                            | {"algorithms": {"fedavg": {"lr": [0.1]}}}).run_config("fedavg", {"lr": 0.1})
    assert "--system" not in command_line(plain.to_dict()) and "--budget" not in command_line(plain.to_dict())


def test_a_budget_that_a_float_prints_short_is_read_back_exactly():
    cfg = RunConfig(task="dro-mnist5k", algo="fedavg", rounds=2, backend="inline", system="mobile-sync",
                    budget={"sim_time": 1234567.25, "samples": 1e6})
    assert rerun_config(command_line(cfg.to_dict())).budget == cfg.budget


@pytest.mark.parametrize("extra, message", [
    ({"bogus": 1}, "unknown key(s) bogus"),
    ({"system": "nosuch"}, "unknown system profile 'nosuch'"),
    ({"budget": {"wall": 3}}, "unknown budget key 'wall'"),
    ({"budget": {"sim_time": 3}}, "budget sim_time needs a simulated system"),  # no system: no sim_time column
    ({"budget": 3}, "budget must be a mapping"),
])
def test_bad_keys_fail_in_one_line_before_any_trial(extra, message, tmp_path, capsys):
    import yaml

    space = {k: v for k, v in SPACE.items() if k not in ("system", "budget")} | {"algorithms": {"fedavg": {"lr": [0.1]}}}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(space | extra))
    assert main(["--space", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_rank_at_sim_time_without_a_system_says_how_to_give_one(tmp_path):
    import raycompo
    from raycompo.errors import ConfigError

    space = {k: v for k, v in SPACE.items() if k not in ("system", "budget")} | {"algorithms": {"fedavg": {"lr": [0.1]}}}
    with pytest.raises(ConfigError, match=r"--rank-at sim_time .*`system: PROFILE` key.*system= in raycompo.tune"):
        raycompo.tune(space, rank_at="sim_time", out=tmp_path / "s")
    assert not (tmp_path / "s").exists()


FEDBUFF = {**SPACE, "algorithms": {"fedavg": {"lr": [0.1], "aggregation": "buffered", "concurrency": [4],
                                             "buffer": [2, 4]}}}


def test_an_aggregation_is_searched_like_a_hyperparameter_and_its_command_repeats_it():
    space = space_from_dict(FEDBUFF)
    for point in space.grid("fedavg"):
        cfg = space.run_config("fedavg", {**point, "server_lr": 0.5}, rounds=3, seed=0)
        assert (cfg.aggregation, cfg.concurrency, cfg.buffer) == ("buffered", 4, point["buffer"])
        assert cfg.settings == {"clients_per_round": 5, "lr": 0.1, "server_lr": 0.5}  # an aggregation setting
        command = command_line(cfg.to_dict())
        assert f"--aggregation buffered --concurrency 4 --buffer {point['buffer']}" in command
        again = rerun_config(command)
        assert (again.aggregation, again.concurrency, again.buffer, again.settings) == \
            (cfg.aggregation, cfg.concurrency, cfg.buffer, cfg.settings)


def test_a_swept_key_cannot_be_overridden_on_the_command_line(tmp_path, capsys):
    assert main(["--space", "system", "--system", "uniform", "--out", str(tmp_path / "out")]) == 2
    assert "--system: system is swept by space system for comfedl" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_python_sweep_of_fedbuff_ranked_at_equal_sim_time_and_rerun(tmp_path, ray_session):
    import raycompo
    from raycompo.run import main as run_main

    result = raycompo.tune(FEDBUFF, search="grid", rank_at="sim_time", rounds=12, out=tmp_path / "s", num_cpus=2)
    trials = result.trials.set_index("trial_id")
    assert sorted(trials["buffer"]) == [2, 4] and set(trials["status"]) == {"completed"}
    rows = result.metrics
    # the budget, sim_time >= 0.5, ends each trial at its first server step that reaches it
    for tid, r in rows.groupby("trial_id"):
        times = r.sort_values("round")["sim_time"].tolist()
        assert times[-1] >= 0.5 and all(t < 0.5 for t in times[:-1])
        assert trials.loc[tid, "rounds_done"] == len(times) - 1
    # ranked at C* = the smaller final sim_time, read at each trial's last row at or below it
    finals = rows.groupby("trial_id")["sim_time"].max()
    best = result.best["fedavg"]
    c_star = finals.min()
    expect = {tid: r[r["sim_time"] <= c_star].sort_values("round").iloc[-1]["val_acc_worst"]
              for tid, r in rows.groupby("trial_id")}
    assert best["value"] == pytest.approx(max(expect.values()))
    assert best["value_cost"] <= c_star + 1e-12
    assert json.loads((tmp_path / "s" / "best.json").read_text())["rank_at"]["cost"] == pytest.approx(c_star)
    # every command repeats the trial's system, budget and aggregation, and re-runs to its rows
    tid = trials.index[0]
    command = trials.loc[tid, "command"]
    assert "--system mobile-sync" in command and "--budget sim_time=0.5" in command
    assert f"--aggregation buffered --concurrency 4 --buffer {trials.loc[tid, 'buffer']}" in command
    assert best["command"] in set(trials["command"])
    assert run_main(shlex.split(command)[3:] + ["--out", str(tmp_path / "rerun"), "--quiet"]) == 0
    again = pd.read_csv(tmp_path / "rerun" / "metrics.csv")
    mine = rows[rows["trial_id"] == tid].sort_values("round")
    for column in ("sim_time", "val_acc_worst", "staleness_mean"):
        assert again[column].tolist() == pytest.approx(mine[column].tolist(), nan_ok=True)


def test_cli_sweep_of_the_system_space_with_a_budget_override(tmp_path, ray_session):
    out = tmp_path / "cli"
    rc = main(["--space", "system", "--samples", "1", "--rounds", "6", "--algos", "comfedl", "--budget", "sim_time=0.3",
               "--rank-at", "sim_time", "--out", str(out), "--quiet", "--num-cpus", "2"])
    assert rc == 0
    trials = pd.read_csv(out / "trials.csv")
    [command] = trials["command"]
    assert f"--system {trials['system'][0]}" in command and "--budget sim_time=0.3" in command
    rows = pd.read_parquet(out / "metrics.parquet")
    assert rows["sim_time"].iloc[-1] >= 0.3 and not math.isnan(rows["sim_time"].iloc[-1])
    assert (rows["sim_time"].iloc[:-1] < 0.3).all()
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["space"]["run"] == {"system": "mobile-sync", "budget": {"sim_time": 0.3}}
