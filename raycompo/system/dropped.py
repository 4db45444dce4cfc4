"""What the dropped candidates of a round cost: the bytes, samples and oracle calls of work
that was thrown away (metrics.csv's `costs.DROPPED_COLUMNS`; docs/costs.md).

The ledger counts the cohort's exchanges only. A candidate the selection policy dropped
(over-selected and not among the first to finish, every candidate of an abandoned attempt,
or one that went offline before it finished) also started the round when the attempt started
and worked until it stopped, `wasted_s` device-seconds later (`SelectionView.drop`). Its
work is taken to be a member's: the round's exchanges in turn, each the mean member's
`clock.Workload` as the clock measured it (`Clock.end_round`), on the candidate's own device
rates, each exchange in the order of `clock.member_time`'s terms:

    half the latency term, the download, the compute, the upload, the other half.

It is charged what it received, sent and computed until `wasted_s`: a transfer or a
computation in progress counts in proportion to its elapsed time, and a candidate still
working when the round's exchanges are done (its prediction, from the previous round's work,
was longer) is charged the whole round. A round that ran no exchange charges nothing.

State: the round's drops (client, wasted_s), O(dropped), cleared each round, and the four
cumulative totals (a checkpoint's). The asynchronous engine (engine/asynchronous.py) counts
its lost and stale clients in the ledger itself and never ends a round here: its columns
stay 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from raycompo.costs.exchange import DROPPED_COLUMNS
from raycompo.errors import ConfigError
from raycompo.system.clock import Workload
from raycompo.system.devices import Rates


def charge(rates: Rates, workload: Sequence[Workload], seconds: float) -> tuple[float, float, float, float]:
    """(bytes down, bytes up, samples, oracle calls) that a device of `rates` gets through in
    its first `seconds` of a round of `workload` (see the module docstring)."""
    fixed, per_down, per_up, per_sample = rates
    down = up = samples = calls = 0.0
    left = seconds
    for w in workload:
        # (duration, what that part moves): latency, download, compute, upload, latency
        for duration, part in ((fixed / 2, None), (w.bytes_down * per_down, 0), (w.samples * per_sample, 1),
                               (w.bytes_up * per_up, 2), (fixed / 2, None)):
            share = 1.0 if duration <= left else left / duration
            if part == 0:
                down += share * w.bytes_down
            elif part == 1:
                samples += share * w.data_samples
                calls += share * w.oracle_calls
            elif part == 2:
                up += share * w.bytes_up
            if duration > left:
                return down, up, samples, calls
            left -= duration
    return down, up, samples, calls


class DroppedCosts:
    """The round's dropped candidates (`drop`) and, once it ended (`end_round`), what they
    cost added to the run's totals (`columns`)."""

    def __init__(self) -> None:
        self.totals = [0.0] * len(DROPPED_COLUMNS)
        """Cumulative bytes down, bytes up, samples, oracle calls (`DROPPED_COLUMNS`'s order)."""
        self.round: list[tuple[int, float]] = []
        """(client, wasted_s) of each candidate dropped in the current round."""

    def begin_round(self) -> None:
        self.round = []

    def drop_many(self, clients: list[int], wasted_s: list[float]) -> None:
        """Clients dropped this round, each after its `wasted_s` device-seconds."""
        self.round.extend(zip(clients, wasted_s))

    def end_round(self, workload: Sequence[Workload], rates: Callable[[int], Rates]) -> None:
        """The round is over, its exchanges measured (`workload`): charge its drops."""
        if workload:
            for c, seconds in self.round:
                for j, v in enumerate(charge(rates(c), workload, seconds)):
                    self.totals[j] += v
        self.round = []

    def columns(self) -> dict[str, Any]:
        """The row's `DROPPED_COLUMNS`."""
        return dict(zip(DROPPED_COLUMNS, self.totals))

    def state(self) -> list[float]:
        return list(self.totals)

    def load(self, totals: Sequence[float] | None) -> None:
        """Continue from a checkpoint's totals (None: one taken before these columns: 0)."""
        if totals is not None and len(totals) != len(DROPPED_COLUMNS):
            raise ConfigError(f"the checkpoint's dropped-candidate totals hold {len(totals)} values, not the "
                              f"{len(DROPPED_COLUMNS)} of {', '.join(DROPPED_COLUMNS)}: it was not written by this run")
        self.totals = [float(v) for v in totals] if totals is not None else [0.0] * len(DROPPED_COLUMNS)
        self.round = []
