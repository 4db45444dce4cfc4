"""Closing rules: how a server step of the driver ends (DESIGN.md, "Synchronous and buffered are
two ways of closing an exchange"). A rule decides who is waited for and when; what is sent,
counted and accounted is the one exchange's (engine/exchange.py), whichever rule runs.

* `SyncRounds` (default): a step is the algorithm's `server_round`; each of its exchanges is
  a barrier, closed when its last kept member finishes. Who is kept is the simulated
  system's selection policy (raycompo/system/selection.py: over-selection and a deadline).
* `AsyncServer` (engine/asynchronous.py, `--aggregation buffered|async`): a step closes at
  the K-th accepted arrival, and applies FedBuff's or FedAsync's rule (engine/async_rules.py).

Every rule has the same face: `step(w, state) -> (w, state)`, `columns()` (its own metrics.csv
columns), `state()` / `load()` (checkpoints).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch

from raycompo.costs.exchange import ExchangeCost
from raycompo.system.event_log import Dispatch, EventLog


class ClosingRule(Protocol):
    def step(self, w: torch.Tensor, state: dict[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]: ...
    def columns(self) -> dict[str, Any]: ...
    def state(self) -> dict[str, Any] | None: ...
    def load(self, state: dict[str, Any] | None) -> None: ...


class SyncRounds:
    """Synchronous rounds of the driver `fed`. With an event log, the round's members (every
    client of its exchanges) are logged `applied` at its end, with their dispatch and finish
    times from the simulated system (none without one); dropped candidates are logged by the
    system as it drops them."""

    def __init__(self, fed: Any, context: Callable[..., Any], events: EventLog | None = None):
        """`context(fed, round, counted=True)`: the `RoundContext` a server round sees."""
        self.fed = fed
        self.context = context
        self.events = events
        self._members: dict[int, None] = {}
        if events is not None:
            fed.exchange_listeners.append(self._heard)

    def _heard(self, cost: ExchangeCost) -> None:
        self._members.update(dict.fromkeys(cost.clients))

    def step(self, w: torch.Tensor, state: dict[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
        fed = self.fed
        fed.system.begin_round(fed.round + 1)
        w, state = fed.algorithm.server_round(self.context(fed, fed.round, counted=True), w, state)
        if self.events is not None:
            self._log(fed.round + 1)
        fed.system.end_round()
        return w, state

    def _log(self, step: int) -> None:
        members, self._members = sorted(self._members), {}
        first = self.events.number(len(members))  # type: ignore[union-attr]
        for i, c in enumerate(members):
            start, finish = self.fed.system.member_times(c)
            self.events.add(Dispatch(step, first + i, c, step - 1, start, finish, "applied", 0))  # type: ignore[union-attr]

    def columns(self) -> dict[str, Any]:
        return {}

    def state(self) -> None:
        return None

    def load(self, state: dict[str, Any] | None) -> None:
        self._members = {}
