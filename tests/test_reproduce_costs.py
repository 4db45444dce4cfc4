"""The reproductions' cost measures: the cost to reach a target, the measured exponent, the
cost x axis and a variant's --budget (issue 26, part 4). Hand-made metrics.csv frames."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from raycompo.reproduce.report import band, final_value
from raycompo.reproduce.runner import command, plan
from raycompo.reproduce.spec import Claim, Panel, V


def frame() -> pd.DataFrame:
    # grad norm 1/sqrt(values): reaching e costs (1/e)^2 values, an exponent of exactly 2
    values = [0.0, 1.0, 4.0, 16.0, 64.0]
    return pd.DataFrame({"round": range(5), "grad_norm": [2.0] + [1 / math.sqrt(v) for v in values[1:]],
                         "values_up": [v / 2 for v in values], "values_down": [v / 2 for v in values],
                         "samples": [0, 10, 20, 30, 40]})


def test_reach_is_the_cost_at_the_first_round_past_the_target():
    f = frame()
    assert final_value(f, "reach:values:grad_norm<0.6") == 4.0  # round 2: 0.5 < 0.6
    assert final_value(f, "reach:samples:grad_norm<0.2") == 40.0
    assert final_value(f, "reach:values:grad_norm>1.5") == 0.0
    assert final_value(f, "reach:values:grad_norm<0.01") is None  # never reached
    assert final_value(f, "values") == 64.0 and final_value(f, "samples") == 40.0


def test_slope_recovers_the_exponent_of_a_known_rate():
    assert final_value(frame(), "slope:values:grad_norm:0.5,0.25,0.125") == pytest.approx(2.0)
    assert final_value(frame(), "slope:values:grad_norm:0.5,0.01") is None  # one point reached


def test_the_cost_axis_is_the_mean_cost_of_the_runs_at_each_round():
    f, g = frame(), frame()
    g["values_up"] = g["values_up"] * 3  # a second run that sends twice as much in total
    x, m, _, _ = band([f, g], "grad_norm", 1.0, x_axis="values")
    assert list(x) == [0.0, 1.5, 6.0, 24.0, 96.0]  # mean of v and 2v
    assert m[2] == pytest.approx(0.5)


def test_a_variant_budget_reaches_the_run_and_its_command(tmp_path):
    claim = Claim(name="c", source="s", title="t", task="toy-co", rounds=5, x_axis="values",
                  variants=(V("a", "feddro", budget={"values_up": 100}),), metrics=("values",),
                  panels=(Panel("objective", "o"),), paper_says="p")
    job = plan(claim, tmp_path, seeds=1)[0]
    assert job.cfg.budget == {"values_up": 100}
    assert "--budget values_up=100" in command(job)
    assert "budget values_up=100" in claim.variants[0].described()


def test_an_unknown_cost_axis_is_refused():
    with pytest.raises(ValueError, match="x_axis 'rounds' is not a cost axis"):
        Claim(name="c", source="s", title="t", task="toy-co", rounds=5, x_axis="rounds",
              variants=(V("a", "feddro"),), metrics=("values",), panels=(), paper_says="p")
