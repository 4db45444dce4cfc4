"""The cost axes: how far a run has gone, in the units the papers argue in.

A run's metrics.csv holds cumulative cost columns (the engine's ledger: `samples`,
`values_up`, `values_down`, `bytes_up`, `bytes_down`; with a simulated system `--system`,
`sim_time`). Plots (`--x`) and sweeps (`--rank-at`) read them through one of these axes:

* `samples`: training samples drawn by the clients (stochastic gradient and function
  evaluations: the papers' sample complexity);
* `values`: real values communicated, `values_up + values_down`;
* `bytes`: bytes communicated, `bytes_up + bytes_down`;
* `sim_time`: simulated seconds of the system profile (only with `--system`);
* `epsilon`: the privacy loss so far (only with client-level DP, `--dp-clip`; docs/compression.md).

Like `costs`, this module imports nothing of raycompo: it sits at the bottom of the layers.
Every column an axis sums is one of `costs.COST_COLUMNS`, the one list of the cost columns
(tests/test_budget.py checks it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

COST_AXES: dict[str, tuple[str, ...]] = {
    "samples": ("samples",),
    "oracle_calls": ("oracle_calls",),
    "values": ("values_up", "values_down"),
    "bytes": ("bytes_up", "bytes_down"),
    "sim_time": ("sim_time",),
    "epsilon": ("epsilon",),
}
"""Axis name -> the metrics.csv columns whose sum it is (each one of `COST_COLUMNS`)."""

COST_LABELS = {
    "samples": "samples drawn",
    "oracle_calls": "oracle calls (function, gradient, Jacobian, Hessian-vector evaluations per point)",
    "values": "real values communicated (up + down)",
    "bytes": "bytes communicated (up + down)",
    "sim_time": "simulated time (s)",
    "epsilon": "privacy loss epsilon (client-level DP)",
}
"""Axis name -> a figure's axis label."""


def missing_columns(columns: Iterable[str], axis: str) -> list[str]:
    """The columns of `axis` that are not among `columns`."""
    have = set(columns)
    return [c for c in COST_AXES[axis] if c not in have]


def where_from(axis: str) -> str:
    """Which runs have the columns of `axis`, for error messages."""
    if axis == "sim_time":
        return "a run has the column sim_time only with a simulated system (--system PROFILE)"
    if axis == "epsilon":
        return "a run has the column epsilon only with client-level DP (--dp-clip C --dp-noise z)"
    return (f"the columns {' and '.join(COST_AXES[axis])} are counted by raycompo's cost ledger in every run "
            "since it was added; a run written before has none")


def cost(source: Any, axis: str) -> Any:
    """The cost of `axis` in `source`: the sum of its columns, for a row (a dict: a number)
    or a pandas DataFrame (a Series). A missing value stays missing (NaN)."""
    cols = COST_AXES[axis]
    total = source[cols[0]]
    for c in cols[1:]:
        total = total + source[c]
    return total
