"""Observers: one callback interface for everything that watches a run.

This module is the protocol only (it imports only the per-client record below it): the output writer
(`raycompo.runfolder.results`) sits below the engine and the progress line and trackers beside it, so
the interface they all implement sits below them all. The run loop (engine/loop.py) calls, in order, `on_start` once, `on_row` for every
round's row (round 0 = the initial model; on resume only the rows after the checkpoint),
preceded by `on_costs` with its cost breakdown, `on_events` with its dispatches' events
(`--log-events`: raycompo/system/event_log.py) and, for a row with an evaluation,
`on_clients` with the evaluated clients' values (raycompo/watch/per_client.py), then exactly
one of `on_end` (completed, diverged, interrupted) or `on_failure`. After each row (each
call's rows, with a driver actor) the loop asks `stop_reason`: an observer that gives one
ends the run there, as a budget does (status 'completed'; e.g. a sweep's ASHA per member of
a population, raycompo/tune/member_asha.py).
The CLI's progress line, the output writer (config.json / metrics.csv), the Tune
reporter and the dashboard metrics are all observers; none of them is a branch inside
the loop. An observer must not raise for ordinary rows; if it does, the run fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from raycompo.watch.per_client import ClientMetrics

Row = dict[str, Any]


@dataclass
class RunInfo:
    """What observers learn when a run starts."""

    config: dict[str, Any]
    """RunConfig.to_dict() of the run."""
    n_clients: int
    out: str | None = None
    """The output folder, when the run writes one."""
    namespace: str | None = None
    """The run's Ray namespace (Ray backend), where its named actors live."""
    start_round: int = 0
    """0 for a new run; the checkpoint's round when resumed."""
    resumed: bool = False
    """The run goes on from a checkpoint in `out` (`resume=True`; its round may be 0: the
    rows up to `start_round` were computed before and are not handed to observers again)."""
    hosts: list[dict[str, Any]] = field(default_factory=list)
    """Ray backend: one entry per host actor: name, client ids (first, last, count), node id."""


class Observer:
    """Base class with no-op callbacks: override what you need."""

    def on_start(self, info: RunInfo) -> None:
        pass

    def on_row(self, row: Row) -> None:
        pass

    def on_clients(self, clients: ClientMetrics) -> None:
        """The evaluated clients' metrics of the row that follows (its round: `clients.round`)."""

    def on_costs(self, rows: list[Row]) -> None:
        """The ledger's per-key breakdown of the round whose row follows: one dict per
        (round, direction, key) with its values and bytes (`costs.BREAKDOWN_COLUMNS`, the
        run folder's costs.csv rows); empty for a round without exchanges."""

    def on_events(self, rows: list[Row]) -> None:
        """The events of the server step whose row follows (`--log-events`): one dict per
        dispatch whose fate that step decided (`event_log.EVENT_COLUMNS`, the run folder's
        events.csv rows); only for a run that logs its events."""

    def on_end(self, status: str, final: Row) -> None:
        """status: 'completed', 'diverged' or 'interrupted'."""

    def on_failure(self, exc: BaseException, final: Row) -> None:
        """The run raised `exc`; `final` is the last row written (or {})."""

    def stop_reason(self) -> str | None:
        """Why the run should end after the rows given so far (None: it goes on)."""
        return None


class Observers(Observer):
    """Several observers called in order."""

    def __init__(self, observers: list[Observer | None]):
        self.observers: list[Observer] = [o for o in observers if o is not None]

    def on_start(self, info: RunInfo) -> None:
        for o in self.observers:
            o.on_start(info)

    def on_row(self, row: Row) -> None:
        for o in self.observers:
            o.on_row(row)

    def on_clients(self, clients: ClientMetrics) -> None:
        for o in self.observers:
            o.on_clients(clients)

    def on_costs(self, rows: list[Row]) -> None:
        for o in self.observers:
            o.on_costs(rows)

    def on_events(self, rows: list[Row]) -> None:
        for o in self.observers:
            o.on_events(rows)

    def on_end(self, status: str, final: Row) -> None:
        for o in self.observers:
            o.on_end(status, final)

    def on_failure(self, exc: BaseException, final: Row) -> None:
        for o in self.observers:
            o.on_failure(exc, final)

    def stop_reason(self) -> str | None:
        """The first observer's reason to end the run (one that is not an `Observer`: none)."""
        for o in self.observers:
            ask = getattr(o, "stop_reason", None)
            reason = ask() if ask is not None else None
            if reason:
                return reason
        return None


class Callback(Observer):
    """An observer from a plain function of the row (the old `progress=` argument)."""

    def __init__(self, fn):
        self.fn = fn

    def on_row(self, row: Row) -> None:
        self.fn(row)
