"""The simulated clock: one formula for a member's time, used by the clock and by every
prediction.

One exchange (one `ctx.map`) is a barrier: the server sends the payload to every member,
waits for every member's contribution, then goes on. Member i of an exchange finishes after

    t_i = wait_i + 2 * latency_i + bytes_down_i / downlink_i
          + work_i * (flop_per_sample_per_param * d) / flops_i + bytes_up_i / uplink_i

seconds (d the model's size; work_i the member's oracle calls / 2 (`member_work`): a plain
stochastic gradient on one point, a forward and a backward pass, is 2 calls, the 6 d FLOP that
`flop_per_sample_per_param` = 6 prices; FedDRO's two-point estimator, 3 calls a point, costs
1.5 samples' time, a second-order MAML task 25 or more; `wait_i`: how long an offline client needed to come online,
0 for a member of a cohort drawn among online clients), and the exchange takes
max_i t_i. A round is the sum of its exchanges (FedDRO's I + 1 exchanges are I + 1
barriers, each paying a latency both ways, however few bytes they carry). Server-side
aggregation is not timed: the server is a data centre and this is a model of the devices.

`member_time` is that formula, once: `Clock.exchange` (what an exchange took) and
`Clock.predict` (what a round would take a member, at selection) both call it, with a
device's coefficients (`devices.Rates`) cached per client. An asynchronous engine asks
`Clock.predict` / `member_time` per member too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from raycompo.costs.exchange import ExchangeCost
from raycompo.errors import ConfigError
from raycompo.system.availability import AvailabilityModel
from raycompo.system.devices import DeviceModel, Rates


def member_time(rates: Rates, samples: float, bytes_down: float, bytes_up: float) -> float:
    """Seconds one member takes for one exchange once online: latency both ways, the
    payload down, its samples, its contribution up. `rates` = (2 * latency, 1 / downlink,
    1 / uplink, flop_per_sample_per_param * d / flops) of its device (`DeviceModel.rates`),
    numbers or arrays of them (one entry per member)."""
    fixed, per_down, per_up, per_sample = rates
    return fixed + bytes_down * per_down + samples * per_sample + bytes_up * per_up


CALLS_PER_SAMPLE = 2
"""Oracle calls of one plain stochastic gradient on one data point (a forward and a backward
pass): the work that a device's `flop_per_sample_per_param` prices per sample."""


def member_work(e: ExchangeCost, i: int) -> float:
    """Member i's compute in exchange `e`, in samples' worth: its oracle calls (docs/costs.md)
    / CALLS_PER_SAMPLE; its samples where the exchange carries no oracle count."""
    return e.oracle_calls[i] / CALLS_PER_SAMPLE if e.oracle_calls else float(e.samples[i])


@dataclass
class Workload:
    """What one member did in one exchange (a prediction's input): its compute in samples'
    worth (`member_work`) and bytes; and, for what a dropped candidate's work is charged
    (`raycompo.system.dropped`), the data points it drew and its oracle calls."""

    samples: float
    """Compute in samples' worth (`member_work`: oracle calls / CALLS_PER_SAMPLE): what the
    clock prices."""
    bytes_down: float
    bytes_up: float
    data_samples: float = 0.0
    """Data points drawn (the ledger's `samples`)."""
    oracle_calls: float = 0.0
    """Oracle calls (the ledger's `oracle_calls`; 0 where the exchange carries no count)."""


def exchange_workload(e: ExchangeCost) -> Workload:
    """The mean member's work in exchange `e` (per distinct member; a member drawn twice
    counts its double work)."""
    k = max(1, e.size)
    return Workload(sum(member_work(e, i) for i in range(len(e.clients))) / k, sum(e.bytes_down) / k,
                    sum(e.bytes_up) / k, sum(e.samples) / k, sum(e.oracle_calls) / k)


def round_time(rates: Rates, workload: Iterable[Workload]) -> float:
    """Seconds a member of these `rates` takes for a round of this `workload` (its exchanges
    in turn, `member_time` each; the barriers' waits for others are not its own)."""
    total = 0.0
    for w in workload:
        total += member_time(rates, w.samples, w.bytes_down, w.bytes_up)
    return total


class Clock:
    """Simulated seconds since the run began (`now`), moved by each exchange's slowest
    member (`exchange`) and by the waits of selection (`wait_until`, `advance`); predicts a
    member's round from the last round's measured work (`predict`)."""

    def __init__(self, devices: DeviceModel, availability: AvailabilityModel, model_bytes: int):
        self.devices = devices
        self.availability = availability
        self.now = 0.0
        """Simulated seconds since the run began (metrics.csv's `sim_time`)."""
        self.workload = [Workload(0.0, float(model_bytes), float(model_bytes))]
        """The last round's work per member and exchange, from which finish times are
        predicted. Before any round ran: the model down and up once, no sample."""
        self._work: list[Workload] = []
        self.arrivals: dict[int, float] = {}
        """When each member's contribution of the round's last exchange so far arrived."""

    def begin_round(self) -> None:
        self._work = []
        self.arrivals = {}
        self.devices.begin_round()

    def end_round(self) -> list[Workload]:
        """The round is over: its measured work predicts the next round's finish times.
        Returns that work (per exchange, the mean member's; empty: no exchange ran)."""
        if self._work:
            self.workload = self._work
        return self._work

    def predict(self, c: int) -> float:
        """Seconds client c would take for a round like the last one."""
        return round_time(self.devices.rates(c), self.workload)

    def predict_many(self, clients: Sequence[int]) -> list[float]:
        """`predict` of each client (their devices drawn at once; the formula applied to
        arrays of their coefficients, elementwise the same arithmetic)."""
        if not len(clients):
            return []
        rates = tuple(self.devices.rate_arrays(clients))
        times = round_time(rates, self.workload)  # type: ignore[arg-type]
        return times.tolist() if isinstance(times, np.ndarray) else [times] * len(clients)  # no work: 0.0 each

    def state(self) -> dict[str, Any]:
        """Plain numbers for a checkpoint: `now` and the last round's `workload` (each
        exchange's samples, bytes down, bytes up, data samples, oracle calls)."""
        return {"now": self.now,
                "workload": [[w.samples, w.bytes_down, w.bytes_up, w.data_samples, w.oracle_calls]
                             for w in self.workload]}

    def load(self, state: dict[str, Any]) -> None:
        """Continue from `state()` (a checkpoint's; the round in progress is not in it)."""
        self.now = float(state["now"])
        self.workload = [Workload(*map(float, w)) for w in state["workload"]]

    def wait_until(self, t: float) -> None:
        self.now = t

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def exchange(self, cost: ExchangeCost, members: set[int], profile: str) -> list[tuple[int, float]]:
        """One exchange: the clock moves by its slowest member's time (a barrier). A member
        not among `members` (the round's cohort: an algorithm that uses every client) is
        waited for until it is online, and the wait counts. Returns the (client, wait) of
        each member waited for."""
        t, worst = self.now, 0.0
        check = not self.availability.always
        rates = self.devices.rates
        waits: list[tuple[int, float]] = []
        for i, c in enumerate(cost.clients):
            wait = 0.0
            if check and c not in members:
                start = self.availability.next_online(c, t)
                if start is None:
                    raise ConfigError(
                        f"system profile {profile!r}: client {c} is never online again after simulated time "
                        f"{t:.0f} s, and round {cost.round}'s phase {cost.phase!r} needs it (an algorithm that uses "
                        "every client waits for each). Give it availability, or use a trace with a period_s")
                wait = start - t
                if wait > 0:
                    waits.append((c, wait))
            took = wait + member_time(rates(c), member_work(cost, i), cost.bytes_down[i], cost.bytes_up[i])
            self.arrivals[c] = t + took
            if took > worst:
                worst = took
        self.now = t + worst
        self._work.append(exchange_workload(cost))
        return waits
