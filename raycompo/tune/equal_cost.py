"""Trials compared at equal cost (`--rank-at samples|values|bytes|sim_time`).

Algorithms that spend differently per round (FedDRO sends a model every I steps and an
embedding every step, Local-SCGDM three vectors a round) are not compared fairly after an
equal number of rounds. With a cost axis (raycompo/costs/axes.py) a sweep reads every
trial's metric at the same cost instead:

    C* = min over the completed trials of the trial's final cost

is the largest cost that every completed trial reached; each trial's value is its metric
at its last evaluated row (metric not missing) whose cost is <= C*. Diverged trials keep
their worst value (-inf for 'max', +inf for 'min') and scheduler-stopped ones are read
at C* like the others, but neither sets C* (they stopped early for a reason of their own).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from raycompo.costs.axes import COST_AXES, cost, missing_columns


@dataclass
class EqualCost:
    """Every trial's metric read at the common cost."""

    axis: str
    cost: float | None
    """C*, the common cost (None: no completed trial with the cost columns)."""
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    """trial_id -> {'value', 'round', 'cost'} of the row read (value NaN: no row at or
    before C* with the metric)."""

    def record(self) -> dict[str, Any]:
        """What best.json says about the ranking."""
        return {"axis": self.axis, "columns": list(COST_AXES[self.axis]), "cost": self.cost,
                "rule": f"each trial's metric at its last evaluated row with {self.axis} <= cost, the smallest "
                        f"final {self.axis} over the completed trials"}


def at_equal_cost(trials: pd.DataFrame, rows: pd.DataFrame, metric: str, axis: str) -> EqualCost:
    """`trials`: trials.csv's finished rows (trial_id, status); `rows`: their per-round rows
    (metrics.parquet: trial_id, round, the cost columns, `metric`)."""
    result = EqualCost(axis, None)
    if not len(trials) or not len(rows) or missing_columns(rows.columns, axis) or metric not in rows.columns:
        return result
    rows = rows.assign(_cost=pd.to_numeric(cost(rows, axis), errors="coerce"),
                       _metric=pd.to_numeric(rows[metric], errors="coerce"))
    by_trial = {tid: r.sort_values("round") for tid, r in rows.groupby("trial_id")}
    completed = trials.loc[trials["status"] == "completed", "trial_id"]
    finals = [by_trial[t]["_cost"].max() for t in completed if t in by_trial]
    finals = [f for f in finals if not math.isnan(f)]
    if not finals:
        return result
    result.cost = float(min(finals))
    for tid in trials["trial_id"]:
        r = by_trial.get(tid)
        if r is None:
            continue
        upto = r[(r["_cost"] <= result.cost) & r["_metric"].notna()]
        if len(upto):
            last = upto.iloc[-1]
            result.values[tid] = {"value": float(last["_metric"]), "round": int(last["round"]),
                                  "cost": float(last["_cost"])}
        else:
            result.values[tid] = {"value": math.nan, "round": None, "cost": None}
    return result
