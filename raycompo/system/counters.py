"""What the system counts: per client since the last evaluation (clients.csv), and per run
(metrics.csv's `dropped` and `wasted_s`).

Per-client counts are kept for a *window*: the rounds since the previous evaluation (the
previous clients.csv rows), so the state is O(eval_every x candidates per round), never
O(clients ever touched): a run of 10^7 clients over thousands of rounds keeps and
checkpoints only its last window. clients.csv's per-client columns at round r count the
client's events in the rounds after the previous evaluated round, up to r; with every
client evaluated, a client's sum over its rows is its total.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from raycompo.costs.exchange import DROPPED_COLUMNS, SYSTEM_COLUMNS

COUNTS = ("drawn", "online", "selected", "dropped", "left")
"""Per-client counts: times drawn as a candidate, found online when drawn, kept in a cohort,
dropped (not used: over-selected, abandoned, or left), left (went offline mid-round)."""
AMOUNTS = ("wasted_s", "waited_s")
"""Per-client seconds: device-seconds of dropped work, seconds an exchange waited for it."""
COUNTERS = COUNTS + AMOUNTS
"""Every per-client counter, in clients.csv's order."""


class ClientCounters:
    """Per-client counters of the current window (see the module docstring): events are
    appended (O(1) each, no per-client record until asked), `columns(ids)` tallies them for
    the clients asked, `reported()` ends the window at the next round's start."""

    def __init__(self) -> None:
        self.events: dict[str, list[int]] = {k: [] for k in COUNTS}
        self.amounts: dict[str, dict[int, float]] = {k: {} for k in AMOUNTS}
        self._reported = False

    def begin_round(self) -> None:
        """A round starts: a window whose counts were reported (an evaluation) is over."""
        if self._reported:
            self.__init__()  # type: ignore[misc]

    def reported(self) -> None:
        """The window's counts went into clients.csv (an evaluation): the next round starts a new one."""
        self._reported = True

    def count(self, key: str, clients: list[int]) -> None:
        self.events[key].extend(clients)

    def add(self, key: str, c: int, seconds: float) -> None:
        d = self.amounts[key]
        d[c] = d.get(c, 0) + seconds

    def add_many(self, key: str, clients: list[int], seconds: list[float]) -> None:
        """`add(key, c, s)` for each pair, in order."""
        d = self.amounts[key]
        get = d.get
        for c, x in zip(clients, seconds):
            d[c] = get(c, 0) + x

    def __getitem__(self, key: str) -> dict[int, float]:
        """{client: value of counter `key` in this window} for every client it counts."""
        if key in AMOUNTS:
            return dict(self.amounts[key])
        return dict(Counter(self.events[key]))

    def columns(self, clients: list[int]) -> dict[int, dict[str, Any]]:
        """{client: {counter: value in this window}} for the clients asked: O(window + asked)."""
        tallies = {k: Counter(v) for k, v in self.events.items()}
        return {c: {**{k: tallies[k].get(c, 0) for k in COUNTS}, **{k: self.amounts[k].get(c, 0) for k in AMOUNTS}}
                for c in clients}

    def state(self) -> dict[str, Any]:
        return {"events": {k: list(v) for k, v in self.events.items()},
                "amounts": {k: [[c, v] for c, v in d.items()] for k, d in self.amounts.items()},
                "reported": self._reported}

    def load(self, state: dict[str, Any]) -> None:
        self.events = {k: [int(c) for c in state["events"].get(k, [])] for k in COUNTS}
        self.amounts = {k: {int(c): v for c, v in state["amounts"].get(k, [])} for k in AMOUNTS}
        self._reported = bool(state.get("reported", False))


class RunTotals:
    """The run's counts that metrics.csv shows: clients dropped this round, device-seconds
    wasted since the start (with the clock's `sim_time`: `SYSTEM_COLUMNS`)."""

    def __init__(self) -> None:
        self.dropped_round = 0
        self.wasted_s = 0.0

    def begin_round(self) -> None:
        self.dropped_round = 0

    def drop_many(self, wasted_s: list[float]) -> None:
        """Candidates dropped this round, one per device-seconds `wasted_s` (added in order, one at a time)."""
        total = self.wasted_s
        for w in wasted_s:
            total += w
        self.dropped_round += len(wasted_s)
        self.wasted_s = total

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps: the cumulative `wasted_s` (`dropped_round` is the round
        in progress's, 0 at a round boundary)."""
        return {"wasted_s": self.wasted_s}

    def load(self, state: dict[str, Any]) -> None:
        self.wasted_s = float(state["wasted_s"])

    def columns(self, sim_time: float) -> dict[str, Any]:
        """The row's system columns, by the names `costs.SYSTEM_COLUMNS` holds (but the
        dropped candidates' costs, `dropped.DroppedCosts`)."""
        names = [c for c in SYSTEM_COLUMNS if c not in DROPPED_COLUMNS]
        return dict(zip(names, (sim_time, self.dropped_round, self.wasted_s), strict=True))
