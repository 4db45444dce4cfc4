"""The events of a run, one row per dispatch (`--log-events`: the run folder's events.csv,
written by raycompo/runfolder/events_file.py).

A dispatch is one client sent one model version to work on: a member (or a dropped
candidate) of a synchronous round, or one dispatch of an asynchronous run. Its row says
when it was sent and when it finished or left, in simulated seconds (empty without
--system: there is no clock), and its fate:

* `applied`: its update went into server step `step` (staleness `staleness`: server steps
  applied between its download and that step; 0 in a synchronous round);
* `stale`: it arrived too stale (tau > max_staleness) at step `step` and was dropped;
* `dropped`: a synchronous candidate the selection policy did not keep (over-selected and
  not among the first to finish, or an abandoned attempt);
* `lost`: it went offline before it finished; nothing arrived.

A row is written at the server step that decides its fate (so a dispatch still in flight at
the end of a run has no row). `dispatch` numbers the run's dispatches: the asynchronous
queue's own number; a synchronous round's members and candidates are numbered on from the
previous round's, in the order of selection. Rows of one step are in order of `finished_s`
then `dispatch`.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass
from typing import Any

EVENTS_KEY = "_events"
"""A row's key holding its events (a list of `EVENT_COLUMNS` rows): the run loop
(engine/loop.py) takes it out and hands it to `Observer.on_events`; not a metrics.csv column."""

EVENT_COLUMNS = ("step", "dispatch", "client", "version", "dispatched_s", "finished_s", "fate", "staleness")
"""events.csv's columns, in order."""

FATES = ("applied", "stale", "dropped", "lost")


@dataclass(frozen=True)
class Dispatch:
    """One row of events.csv (see the module docstring)."""

    step: int
    dispatch: int
    client: int
    version: int
    dispatched_s: float | None
    finished_s: float | None
    fate: str
    staleness: int | None

    def row(self) -> dict[str, Any]:
        return dict(zip(EVENT_COLUMNS, astuple(self)))


class EventLog:
    """The rows of the step in progress (`add`), taken by the driver with its row (`take`);
    `next_dispatch` numbers a synchronous round's dispatches (checkpointed)."""

    def __init__(self) -> None:
        self.rows: list[Dispatch] = []
        self.next_dispatch = 0
        self.written = 0
        """Rows handed out so far (events.csv holds them): a resume checks the file against it."""

    def number(self, k: int) -> int:
        """The first of k new dispatch numbers."""
        first = self.next_dispatch
        self.next_dispatch += k
        return first

    def add(self, d: Dispatch) -> None:
        if d.fate not in FATES:
            raise ValueError(f"unknown fate {d.fate!r}: one of {', '.join(FATES)}")
        self.rows.append(d)

    def take(self) -> list[dict[str, Any]]:
        """The step's rows as dicts, in order of (finished_s, dispatch); the log empties."""
        rows = sorted(self.rows, key=lambda d: (float("inf") if d.finished_s is None else d.finished_s, d.dispatch))
        self.rows = []
        self.written += len(rows)
        return [d.row() for d in rows]

    def state(self) -> dict[str, Any]:
        """At a step boundary: the next dispatch number and how many rows were handed out."""
        return {"next_dispatch": self.next_dispatch, "rows": self.written}

    def load(self, state: dict[str, Any] | None) -> None:
        self.rows = []
        self.next_dispatch = int((state or {}).get("next_dispatch", 0))
        self.written = int((state or {}).get("rows", 0))
