"""The cost budget (raycompo/costs/budget.py): a run ends, completed, at the first round whose
cumulative cost column reaches the limit; bad budgets are ConfigErrors naming what is
accepted. And the per-key file costs.csv that every run writes."""

from __future__ import annotations

import pandas as pd
import pytest

import raycompo
from raycompo.costs.budget import BUDGET_KEYS, check_budget, parse_budget
from raycompo.errors import ConfigError
from raycompo.run import main
from tests.helpers import SMALL_DRO

SAMPLES_PER_ROUND = 2 * (32 + 3 * 20)
"""FedAvg on SMALL_DRO with tau = 2, b = 32: each round the big client reads 2 x 32 and the
three small ones 2 x 20 (their whole data) each."""


def small_run(**kw):
    return raycompo.run("dro-mnist5k", "fedavg", rounds=kw.pop("rounds", 10),
                        settings={**SMALL_DRO, "lr": 0.1, "tau": 2, "batch_size": 32}, **kw)


def test_budget_ends_the_run_at_the_first_round_that_reaches_it(tmp_path):
    limit = 3 * SAMPLES_PER_ROUND + 1  # reached during round 4, not before
    result = small_run(budget={"samples": limit}, out=tmp_path / "r", eval_every=5)
    assert result.status == "completed" and result.final["round"] == 4
    assert [r["samples"] for r in result.rows] == [k * SAMPLES_PER_ROUND for k in range(5)]
    assert "val_acc" in result.final  # the last round is evaluated whatever eval_every says
    assert result.final["stopped"].startswith("budget samples=")
    frame = pd.read_csv(tmp_path / "r" / "metrics.csv")
    assert list(frame["round"]) == [0, 1, 2, 3, 4] and frame["val_acc"].isna().tolist() == [False, True, True, True, False]
    assert "stopped" not in frame.columns
    assert result.config["status"] == "completed" and result.config["budget"] == {"samples": float(limit)}


def test_budget_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "cli"
    sets = [f"{k}={v}" for k, v in {**SMALL_DRO, "lr": 0.1, "tau": 2}.items()]
    code = main(["--task", "dro-mnist5k", "--algo", "fedavg", "--rounds", "20", "--backend", "inline", "--quiet",
                 "--set", *sets, "--budget", "exchanges=3", "values_down=1e12", "--out", str(out)])
    assert code == 0
    assert list(pd.read_csv(out / "metrics.csv")["exchanges"]) == [0, 1, 2, 3]  # FedAvg: one exchange a round
    assert "3 rounds, budget exchanges=3 reached" in capsys.readouterr().out


@pytest.mark.parametrize("budget, words", [
    ({"flops": 1}, ["flops", *BUDGET_KEYS]),
    ({"samples": 0}, ["samples", "> 0", "0"]),
    ({"samples": float("nan")}, ["samples", "finite"]),
    ({"samples": "many"}, ["samples", "'many'"]),
    ({"sim_time": 10}, ["sim_time", "--system"]),
    (["samples", 1], ["mapping", "list"]),
])
def test_bad_budgets_are_config_errors_naming_what_is_accepted(budget, words):
    with pytest.raises(ConfigError) as err:
        small_run(budget=budget)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_parse_budget():
    assert parse_budget(["samples=1e6", "bytes_up=20"]) == {"samples": 1e6, "bytes_up": 20.0}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_budget(["samples"])
    with pytest.raises(ConfigError, match="not a number"):
        parse_budget(["samples=lots"])
    assert check_budget({"sim_time": 5}, system="uniform") == {"sim_time": 5.0}


def test_costs_file_and_result_hold_the_per_key_breakdown(tmp_path):
    result = small_run(rounds=2, out=tmp_path / "k")
    frame = pd.read_csv(tmp_path / "k" / "costs.csv")
    assert list(frame.columns) == ["round", "direction", "key", "values", "bytes"]
    pd.testing.assert_frame_equal(frame, result.costs, check_dtype=False)
    d = int(frame[(frame.direction == "down") & (frame.key == "w")]["values"].iloc[0]) // 4
    assert sorted(map(tuple, frame[["round", "direction", "key", "values", "bytes"]].values.tolist())) == sorted(
        (r, dirn, key, v, b) for r in (1, 2) for dirn, key, v, b in
        (("down", "w", 4 * d, 16 * d), ("up", "nw", 4 * d, 16 * d), ("up", "n", 4, 32)))
    # the per-key file adds up to the cumulative columns of metrics.csv
    final = result.final
    assert frame[frame.direction == "up"]["values"].sum() == final["values_up"]
    assert frame[frame.direction == "down"]["bytes"].sum() == final["bytes_down"]
    # without a folder the result still has it
    assert small_run(rounds=2).costs.equals(result.costs)


@pytest.mark.slow
def test_a_ray_driver_stops_at_the_same_round(ray_session):
    # the driver actor runs several rounds per call (engine/loop.py): the budget is checked
    # there, so the run ends at the round the inline run ends at
    kw = {"rounds": 20, "budget": {"exchanges": 3}}
    inline, on_ray = small_run(**kw), small_run(backend="ray", clients_per_actor=2, cpus_per_actor=0.5, **kw)
    assert inline.final["round"] == on_ray.final["round"] == 3 and on_ray.status == "completed"
    assert [r["samples"] for r in on_ray.rows] == [r["samples"] for r in inline.rows]


def test_resume_with_a_larger_budget_continues_the_counts(tmp_path):
    out = tmp_path / "r"
    sets = [f"{k}={v}" for k, v in {**SMALL_DRO, "lr": 0.1, "tau": 2}.items()]
    args = ["--task", "dro-mnist5k", "--algo", "fedavg", "--rounds", "10", "--backend", "inline", "--quiet", "--set", *sets]
    assert main([*args, "--budget", "exchanges=2", "--out", str(out)]) == 0
    assert main(["--resume", str(out), "--budget", "exchanges=4", "--quiet"]) == 0
    frame = pd.read_csv(out / "metrics.csv")
    assert list(frame["round"]) == [0, 1, 2, 3, 4] and list(frame["exchanges"]) == [0, 1, 2, 3, 4]
    assert list(frame["samples"]) == [k * SAMPLES_PER_ROUND for k in range(5)]


def test_resuming_a_run_its_budget_stopped_runs_no_round_past_the_budget(tmp_path, capsys):
    """issue 32: `--budget exchanges=2`, then `--resume` (twice) ran one more round each time.
    A budget-stopped run has nothing left to do, from the command line and from Python."""
    out = tmp_path / "r"
    sets = [f"{k}={v}" for k, v in {**SMALL_DRO, "lr": 0.1, "tau": 2}.items()]
    args = ["--task", "dro-mnist5k", "--algo", "fedavg", "--rounds", "10", "--backend", "inline", "--quiet", "--set", *sets]
    assert main([*args, "--budget", "exchanges=2", "--out", str(out)]) == 0
    before = (out / "metrics.csv").read_text()
    capsys.readouterr()
    for _ in range(2):
        assert main(["--resume", str(out), "--quiet"]) == 0
        said = capsys.readouterr().out
        assert said.startswith(f"nothing left to do: {out} is already completed (2 rounds, budget exchanges=2 reached")
    result = raycompo.resume(out)
    assert result.status == "completed" and [r["exchanges"] for r in result.rows] == [0, 1, 2]
    assert (out / "metrics.csv").read_text() == before

def test_a_sim_time_budget_with_a_simulated_system():
    free = small_run(rounds=5, system="uniform")
    times = [r["sim_time"] for r in free.rows]
    assert times[2] < times[3]  # the clock moves every round
    limit = (times[2] + times[3]) / 2  # reached during round 3
    stopped = small_run(rounds=5, system="uniform", budget={"sim_time": limit})
    assert stopped.status == "completed" and stopped.final["round"] == 3
    assert stopped.final["stopped"].startswith("budget sim_time=")
    assert [r["sim_time"] for r in stopped.rows] == times[:4]
