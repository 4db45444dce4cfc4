"""The round loop: the initial evaluation, then rounds until the last or a divergence.
What happens to each row (files, progress lines, Tune, dashboard) is the observers'."""

from __future__ import annotations

from typing import Any

from raycompo.engine.observers import Observer, Row


def run_rounds(fed: Any, rounds: int, observer: Observer, rows: list[Row]) -> str:
    """Run `fed` (a Federation, here or remote) to round `rounds`, appending each row to
    `rows` and passing it to `observer`. Returns 'completed' or 'diverged'."""
    if not rows:
        rows.append(fed.initial_row())
        emit(rows[-1], observer)
    while rows[-1]["round"] < rounds:
        batch = fed.run_rounds(1)
        for row in batch:
            rows.append(row)
            emit(row, observer)
        if batch and batch[-1]["diverged"]:
            return "diverged"
    return "completed"


def emit(row: Row, observer: Observer) -> None:
    row.setdefault("diverged", False)
    observer.on_row(row)
