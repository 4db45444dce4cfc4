"""The round loop: the initial evaluation, then rounds until the last, a divergence, a
stop check of the driver (a budget) or an observer's `stop_reason`.
What happens to each row (files, progress lines, Tune, dashboard) is the observers'."""

from __future__ import annotations

import time
from typing import Any

from raycompo.costs.exchange import BREAKDOWN_KEY
from raycompo.system.event_log import EVENTS_KEY
from raycompo.watch.observers import Observer, Row
from raycompo.watch.per_client import CLIENTS_KEY

MAX_ROUNDS_PER_CALL = 50
"""At most this many rounds in one call to a remote driver."""


def run_rounds(fed: Any, rounds: int, observer: Observer, rows: list[Row], boundary: int | None = None,
               call_seconds: float = 0.0) -> str:
    """Run `fed` (a Federation, here or remote) to round `rounds`, appending each row to
    `rows` and passing it to `observer`. Returns 'completed' or 'diverged'; 'completed'
    also when the driver's last row says it `stopped` (a budget reached) or an observer
    gives a `stop_reason` after a call's rows (the initial row's included).

    `call_seconds` > 0 (a driver actor): each call to `fed.run_rounds` runs as many rounds
    as take about that long (measured on the previous call; at most MAX_ROUNDS_PER_CALL),
    so a round does not pay a round trip to the driver. A call never passes a multiple of
    `boundary` (the checkpoint period: the checkpointer reads the driver between calls)."""
    if not rows:
        rows.append(fed.initial_row())
        emit(rows[-1], observer)
    per_call = 1
    while rows[-1]["round"] < rounds:
        if observer.stop_reason():  # e.g. a sweep's ASHA stopped this member (tune/member_asha.py)
            return "completed"
        done = rows[-1]["round"]
        count = min(per_call, rounds - done)
        if boundary:
            count = min(count, boundary - done % boundary)
        t0 = time.perf_counter()
        batch = fed.run_rounds(count)
        for row in batch:
            rows.append(row)
            emit(row, observer)
        if batch and batch[-1]["diverged"]:
            return "diverged"
        if batch and batch[-1].get("stopped"):  # a stop check of the driver (a budget) ended the run
            return "completed"
        if call_seconds > 0 and batch:
            per_round = (time.perf_counter() - t0) / len(batch)
            per_call = max(1, min(MAX_ROUNDS_PER_CALL, int(call_seconds / max(per_round, 1e-6))))
    return "completed"


def emit(row: Row, observer: Observer) -> None:
    """Give `row` to the observers; its cost breakdown (costs.csv's rows, engine/ledger.py),
    its events (events.csv's rows, `--log-events`: raycompo/system/event_log.py) and its
    evaluated clients' values (raycompo/watch/per_client.py) first, taken out of the row
    (they are not columns)."""
    row.setdefault("diverged", False)
    breakdown = row.pop(BREAKDOWN_KEY, None)
    if breakdown is not None:
        observer.on_costs(breakdown)
    events = row.pop(EVENTS_KEY, None)
    if events is not None:
        observer.on_events(events)
    clients = row.pop(CLIENTS_KEY, None)
    if clients is not None:
        observer.on_clients(clients)
    observer.on_row(row)
