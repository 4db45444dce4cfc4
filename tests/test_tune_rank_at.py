"""Sweeps ranked at equal cost (`--rank-at`, tune/equal_cost.py), on trials whose rows are
written here: the value read, the common cost and the table are known by hand."""

from __future__ import annotations

import json
import math
import re

import pytest

from raycompo.errors import ConfigError
from raycompo.tune.cli import build_parser
from raycompo.tune.results import SweepStore, best_table
from raycompo.tune.sweep import SweepOptions, check_rank_at, prepare

NAN = math.nan
# trial: (algorithm, status, lr, values_up + values_down per round, val_acc per round)
TRIALS = {
    # by the final row A is fedavg's best (0.9); at values <= 200 it is read at round 1 (round 2 is not evaluated)
    "A": ("fedavg", "completed", 0.1, [0, 100, 200, 300], [0.1, 0.2, NAN, 0.9]),
    # the cheapest completed trial: its final cost, 200, is the common cost C*
    "B": ("fedavg", "completed", 1.0, [0, 50, 100, 150, 200], [0.1, 0.2, 0.3, 0.4, 0.5]),
    "D": ("feddro", "completed", 0.1, [0, 250, 500], [0.1, 0.6, 0.95]),
    # neither a diverged nor a scheduler-stopped trial sets C* (else it would be 10 or 150)
    "E": ("feddro", "diverged", 1.0, [0, 10], [0.1, NAN]),
    "F": ("feddro", "stopped", 0.5, [0, 150], [0.1, 0.3]),
}
META = {"space": "s", "task": "dro-mnist5k", "metric": "val_acc", "mode": "max", "algorithms": ["fedavg", "feddro"]}


def write_sweep(folder) -> SweepStore:
    store = SweepStore(folder)
    for tid, (algo, status, lr, values, acc) in TRIALS.items():
        # values split 60/40 between up and down: the axis is their sum
        rows = [{"round": r, "val_acc": None if math.isnan(a) else a, "values_up": 0.6 * v, "values_down": 0.4 * v}
                for r, (v, a) in enumerate(zip(values, acc))]
        final = -math.inf if status == "diverged" else acc[-1]
        store.record({"trial_id": tid, "algorithm": algo, "task": "dro-mnist5k", "status": status,
                      "rounds_done": len(values) - 1, "final_val_acc": final, "best_val_acc": max(a for a in acc if a == a),
                      "best_round": 0, "settings": json.dumps({"lr": lr}), "command": f"run {tid}"}, rows)
    store.write_metrics()
    return store


def test_ranked_at_the_smallest_final_cost_of_the_completed_trials(tmp_path):
    store = write_sweep(tmp_path)
    best = store.write_best({**META, "rank_at": "values"})
    assert best["rank_at"]["cost"] == pytest.approx(200.0)
    assert best["rank_at"]["columns"] == ["values_up", "values_down"]
    fedavg, feddro = best["algorithms"]["fedavg"], best["algorithms"]["feddro"]
    assert (fedavg["trial_id"], fedavg["value_round"]) == ("B", 4) and fedavg["value"] == pytest.approx(0.5)  # A: 0.2
    assert (feddro["trial_id"], feddro["value_round"]) == ("F", 1) and feddro["value"] == pytest.approx(0.3)  # D: 0.1
    assert feddro["value_cost"] == pytest.approx(150.0)
    assert json.loads((tmp_path / "best.json").read_text())["rank_at"]["axis"] == "values"
    table = best_table(best, {"fedavg": ["lr"], "feddro": ["lr"]})
    first, head = table.splitlines()[:2]
    assert first.startswith("ranked at equal values (values_up + values_down)") and "<= 200" in first
    assert "val_acc at values <= 200 (round)" in head
    assert "0.5000 (4)" in table and "0.3000 (1)" in table


def test_without_rank_at_the_ranking_is_unchanged(tmp_path):
    store = write_sweep(tmp_path)
    best = store.write_best(META)
    assert "rank_at" not in best
    assert best["algorithms"]["fedavg"]["trial_id"] == "A" and best["algorithms"]["fedavg"]["value"] == pytest.approx(0.9)
    assert best["algorithms"]["feddro"]["trial_id"] == "D" and best["algorithms"]["feddro"]["value"] == pytest.approx(0.95)
    assert "value_round" not in best["algorithms"]["fedavg"]
    assert not best_table(best, {}).startswith("ranked")


def test_rows_without_the_cost_columns_rank_nothing(tmp_path):
    store = write_sweep(tmp_path)
    best = store.write_best({**META, "rank_at": "samples"})  # no `samples` column in these rows
    assert best["rank_at"]["cost"] is None
    assert "value" not in best["algorithms"]["fedavg"]
    assert "no evaluated row at samples" in best_table(best, {})


def test_bad_rank_at_is_a_clear_error():
    from raycompo.costs.axes import COST_AXES

    with pytest.raises(ConfigError, match=re.escape(f"unknown --rank-at 'rounds'; choose one of: {', '.join(COST_AXES)}")):
        check_rank_at("rounds", ["round", "val_acc"], "t")
    with pytest.raises(ConfigError, match=r"--rank-at bytes needs the column\(s\) bytes_up, bytes_down.*lack \(bytes_down\)"):
        check_rank_at("bytes", ["round", "bytes_up"], "t")
    check_rank_at("values", ["values_up", "values_down"], "t")  # no error
    args = build_parser().parse_args(["--space", "dro", "--rank-at", "values"])
    assert args.rank_at == "values" and build_parser().parse_args(["--space", "dro"]).rank_at is None
    assert "values_up + values_down" in " ".join(build_parser().format_help().split())


def test_rank_at_sim_time_needs_a_simulated_system(tmp_path):
    with pytest.raises(ConfigError, match=r"--rank-at sim_time .*--system PROFILE"):
        prepare(SweepOptions(space="dro", rank_at="sim_time", out=str(tmp_path / "s")))
    assert not (tmp_path / "s").exists()  # checked before anything is written


def test_the_python_api_refuses_an_unknown_rank_at_before_anything_runs(tmp_path):
    import raycompo

    with pytest.raises(ConfigError, match=r"rank_at must be .*samples.*got 'rounds'"):
        raycompo.tune("dro", rank_at="rounds", out=tmp_path / "s")
    assert not (tmp_path / "s").exists()
