"""The arithmetic of the deadline policy (`selection.Deadline`): over-selection, as
production federated learning does it (Bonawitz et al. 2019, "Towards federated learning at
scale": select ~130 % of the target, close the round when the target number has reported,
abandon it at the deadline).

`ceil(over_selection * m)` online candidates are chosen; the m predicted to finish first
are kept, and only those within the deadline. The algorithm sees exactly m clients (its
maths, e.g. dividing by len(cohort), is unchanged); the others are reported as dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def candidates_for(m: int, over_selection: float, available: int) -> int:
    """How many candidates a cohort of m is chosen from: ceil(over_selection * m), at most
    the clients there are."""
    return min(available, max(m, math.ceil(over_selection * m - 1e-9)))


@dataclass
class Choice:
    """The outcome of one selection attempt."""

    kept: list[int]
    """The m clients predicted to finish first, sorted by id (empty: the round is abandoned)."""
    dropped: list[int]
    """The other candidates, sorted by id."""
    close_s: float
    """Predicted time the round closes: the m-th fastest kept finish (the deadline when abandoned)."""


def choose(predicted: dict[int, float], m: int, deadline_s: float | None) -> Choice:
    """Keep the m candidates of smallest predicted finish time (ties by client id) when all
    m are within `deadline_s`; otherwise keep none (the round is abandoned at the deadline).
    A candidate that never reports (it goes offline first) has the time inf."""
    ids = np.fromiter(predicted, dtype=np.int64, count=len(predicted))
    times = np.fromiter(predicted.values(), dtype=np.float64, count=len(predicted))
    kept, dropped, close = choose_many(ids, times, m, deadline_s)
    return Choice(ids[kept].tolist(), ids[dropped].tolist(), close)


def choose_many(ids: np.ndarray, times: np.ndarray, m: int,
                deadline_s: float | None) -> tuple[np.ndarray, np.ndarray, float]:
    """`choose` on arrays: candidates `ids` (distinct, m >= 1 wanted) and their predicted
    finish `times`. Returns (positions of the kept, sorted by id; positions of the dropped,
    sorted by id; the close), the kept empty when the attempt is abandoned."""
    order = np.lexsort((ids, times))  # by time, ties by id
    if len(order) >= m:
        close = float(times[order[m - 1]])
        if not math.isinf(close) and (deadline_s is None or close <= deadline_s):
            kept, rest = order[:m], order[m:]
            # (ids are distinct: any sort gives the same order; the stable one is the fastest on ints)
            return kept[np.argsort(ids[kept], kind="stable")], rest[np.argsort(ids[rest], kind="stable")], close
    return order[:0], np.argsort(ids, kind="stable"), deadline_s if deadline_s is not None else math.inf
