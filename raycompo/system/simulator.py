"""The simulated system of one run, as the engine drives it: small parts, one job each.

* `clock.Clock`: simulated time, moved by exchanges (one formula, `clock.member_time`) and by
  selection's waits; predictions of a member's round;
* the availability model (`availability.AvailabilityModel`, a plugin): who is online when;
* the selection policy (`selection.SelectionPolicy`, a plugin): who joins a round;
* `candidates.draw_candidates`: online candidates in O(m);
* `counters.ClientCounters` / `counters.RunTotals`: per client (clients.csv) and per run
  (metrics.csv) counts;
* `persist`: the checkpoint's state.

`System` composes them behind the interface the engine calls (`SystemLike`); `NoSystem` has
the same interface and does nothing, so the engine never asks which one it has. It lives in
the driver (a `Federation`), so it is the same object inline and on Ray; its state is a
round boundary's plain numbers (`state` / `load`), saved in checkpoints, so a resumed run
continues the same clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from raycompo.costs.exchange import SYSTEM_COLUMNS, ExchangeCost
from raycompo.errors import ConfigError
from raycompo.system import draws, persist
from raycompo.system.candidates import draw_candidates
from raycompo.system.clock import Clock, Workload
from raycompo.system.counters import COUNTERS, ClientCounters, RunTotals
from raycompo.system.devices import Device, DeviceModel, read_devices_csv
from raycompo.system.dropped import DroppedCosts
from raycompo.system.event_log import Dispatch, EventLog
from raycompo.system.profile import Profile

COLUMNS = SYSTEM_COLUMNS
"""metrics.csv columns of a run with a system (`raycompo.costs.exchange.SYSTEM_COLUMNS`)."""

__all__ = ["COLUMNS", "COUNTERS", "NoSystem", "System", "SystemLike", "Tables", "check_cohort", "check_profile",
           "make_system"]


@dataclass(frozen=True)
class Tables:
    """What a profile's files hold, read once where the run is resolved: the driver (in
    this process or a Ray actor, maybe on another node) gets them with the run's settings
    and never opens a path that may not exist there."""

    devices: tuple[list[Device], bool] | None = None
    """A device CSV's devices and whether they are by client id (`read_devices_csv`)."""
    availability: Any = None
    """What the availability model's `read` returned (a trace's intervals by client)."""


def check_profile(profile: Profile, seed: int, n_clients: int, cohort: int | None = None) -> Tables:
    """Read and check a profile's files against a population of `n_clients` (a device CSV
    listing every client, a trace naming only clients that exist): their content, or a
    ConfigError naming the file and what is wrong. With `cohort` (the algorithm's
    `clients_per_round`), also that at least that many clients can ever be online
    (`check_cohort`): an error before round 0, not at the first selection."""
    d, a = profile.devices, profile.availability
    tables = Tables(read_devices_csv(d.csv, n_clients) if d.csv is not None else None,
                    a.model.read(a.settings, n_clients))
    if cohort is not None:
        model = a.model.create(a.settings, seed, n_clients, tables.availability)
        check_cohort(profile, model.population, cohort)
    return tables


def check_cohort(profile: Profile, population: Sequence[int] | None, m: int,
                 setting: str | None = "clients_per_round") -> None:
    """ConfigError when fewer clients can ever be online under the profile's availability
    (`population`, the model's: e.g. the clients a trace names; None: all of them) than a
    cohort of `m` needs: no round could be filled. `setting`: the setting that asks for m,
    named in the message (None where the algorithm asks for m otherwise)."""
    if population is None or len(population) >= m:
        return
    a = profile.availability
    path = getattr(a.settings, "path", None)
    what = f"availability {a.kind}" + (f" {path}" if path else "")
    asked = f" ({setting}={m})" if setting else ""
    fix = f"list at least {m} clients in the trace" if a.kind == "trace" else f"let at least {m} clients be online"
    lower = f", or lower {setting}" if setting else ""
    raise ConfigError(f"{what} names {len(population)} client(s), and a round's cohort needs {m} online "
                      f"clients{asked}: {fix}{lower}")


class SystemLike(Protocol):
    """What the engine calls, with a system or without (`System`, `NoSystem`)."""

    on: bool

    def begin_round(self, round_: int) -> None: ...
    def end_round(self) -> None: ...
    def select(self, m: int, stream: int, plain_draw: Callable[[int], list[int]]) -> list[int]: ...
    def on_exchange(self, cost: ExchangeCost) -> None: ...
    def columns(self) -> dict[str, Any]: ...
    def client_columns(self, clients: list[int]) -> dict[int, dict[str, Any]] | None: ...
    def reported(self) -> None: ...
    def state(self) -> dict[str, Any] | None: ...
    def load(self, state: dict[str, Any] | None) -> None: ...


class System:
    """A profile applied to a population of `n_clients` and a model of `model_size`
    parameters (`model_bytes` bytes: the first round's predicted payload each way)."""

    on = True

    def __init__(self, profile: Profile, seed: int, n_clients: int, model_size: int, model_bytes: int,
                 tables: Tables | None = None):
        """`tables`: the profile's files as `check_profile` read them (None: read them here)."""
        self.profile = profile
        self.n_clients = n_clients
        tables = tables if tables is not None else check_profile(profile, seed, n_clients)
        a, s = profile.availability, profile.selection
        self.devices = DeviceModel(profile.devices, seed, n_clients, model_size, tables.devices)
        self.availability = a.model.create(a.settings, seed, n_clients, tables.availability)
        self.policy = s.model.create(s.settings, seed)
        self.clock = Clock(self.devices, self.availability, model_bytes)
        self.counters = ClientCounters()
        self.totals = RunTotals()
        self.dropped_costs = DroppedCosts()
        """The round's dropped candidates and what they cost (`dropped`: DROPPED_COLUMNS)."""
        self._candidate = draws.prefix(seed, draws.CANDIDATE)
        self.events: EventLog | None = None
        """The run's event log (`--log-events`; set by the driver), or None: dropped
        candidates are logged as they are dropped, members' times are kept for it."""
        self._started: dict[int, float] = {}
        self._round_start = 0.0
        self.round = 0
        self._members: set[int] = set()
        self._stream = 0
        self._plain: Callable[[int], list[int]] | None = None

    # --- read-outs the tests and a user see --------------------------------------------
    @property
    def now(self) -> float:
        """Simulated seconds since the run began (metrics.csv's `sim_time`)."""
        return self.clock.now

    @now.setter
    def now(self, t: float) -> None:
        self.clock.now = t

    @property
    def workload(self) -> list[Workload]:
        return self.clock.workload

    @property
    def wasted_s(self) -> float:
        return self.totals.wasted_s

    @property
    def dropped_round(self) -> int:
        return self.totals.dropped_round

    def predict(self, c: int) -> float:
        """Seconds client c would take for a round like the last one (`Clock.predict`)."""
        return self.clock.predict(c)

    # --- the round ----------------------------------------------------------------------
    def begin_round(self, round_: int) -> None:
        """Round `round_` (1-based) starts at `now`."""
        self.round, self._members = round_, set()
        self._started = {}
        self._round_start = self.clock.now
        self.clock.begin_round()
        self.totals.begin_round()
        self.dropped_costs.begin_round()
        self.counters.begin_round()

    def end_round(self) -> None:
        """The round is over: its measured work predicts the next round's finish times, and
        charges its dropped candidates (`dropped.DroppedCosts`)."""
        self.dropped_costs.end_round(self.clock.end_round(), self.devices.rates)

    def end_step(self, work: Workload) -> None:
        """An asynchronous server step is over: its lost clients are charged their work until
        they left, each dispatch's work being `work` (the predicted member's), as a
        synchronous round charges a departed candidate (`dropped.DroppedCosts`)."""
        self.dropped_costs.end_round([work], self.devices.rates)

    def member_times(self, c: int) -> tuple[float | None, float | None]:
        """(dispatched, finished) in simulated seconds of member c of the round in progress
        (for the event log): sent when kept (the round's start for a member the policy did
        not choose, e.g. every client), finished when its last contribution arrived."""
        return self._started.get(c, self._round_start), self.clock.arrivals.get(c)

    def select(self, m: int, stream: int, plain_draw: Callable[[int], list[int]]) -> list[int]:
        """A cohort of m clients for this round, as the profile's selection policy chooses
        it (`selection.Deadline`: the engine's `plain_draw(m)` when every client is always
        online and there is no over-selection or deadline)."""
        check_cohort(self.profile, self.availability.population, m, None)  # only those are ever online
        self._stream, self._plain = stream, plain_draw
        return self.policy.select(m, self)

    def on_exchange(self, cost: ExchangeCost) -> None:
        """One exchange: the clock moves by its slowest member's time (`Clock.exchange`); an
        asynchronous step's arrivals (not a barrier) moved it by their own events already."""
        if not cost.barrier:
            return
        if cost.round != self.round:
            self.begin_round(cost.round)
        for c, wait in self.clock.exchange(cost, self._members, self.profile.name):
            self.counters.add("waited_s", c, wait)

    # --- SelectionView: what the policy sees ---------------------------------------------
    @property
    def profile_name(self) -> str:
        return self.profile.name

    @property
    def always(self) -> bool:
        return self.availability.always

    @property
    def population_size(self) -> int:
        pop = self.availability.population
        return self.n_clients if pop is None else len(pop)

    def plain_draw(self, m: int) -> list[int]:
        assert self._plain is not None
        cohort = self._plain(m)
        self.counters.count("drawn", cohort)
        self.counters.count("online", cohort)
        return cohort

    def candidates(self, k: int, m: int, attempt: int) -> tuple[list[int], float]:
        got = draw_candidates(self.availability, self._candidate, self.n_clients, k, m, self.clock.now,
                              (self.round, self._stream, attempt), self.profile.name)
        self.counters.count("drawn", got.drawn)
        self.counters.count("online", got.online)
        return got.candidates, got.start

    def predict_many(self, clients: list[int]) -> list[float]:
        return self.clock.predict_many(clients)

    def online_until_many(self, clients: list[int], t: float) -> list[float]:
        return self.availability.online_until_many(clients, t)

    def wait_until(self, t: float) -> None:
        self.clock.wait_until(t)

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def drop(self, c: int, wasted_s: float, left: bool, charge: bool = True) -> None:
        """`drop_many` of one client, not logged (an asynchronous server logs its own
        dispatches); `charge` False: its work is in the ledger already (a stale update)."""
        self.counters.count("dropped", [c])
        if left:
            self.counters.count("left", [c])
        self.counters.add_many("wasted_s", [c], [wasted_s])
        self.totals.drop_many([wasted_s])
        if charge:
            self.dropped_costs.drop_many([c], [wasted_s])

    def drop_many(self, clients: list[int], wasted_s: list[float], left: list[bool]) -> None:
        self.counters.count("dropped", clients)
        self.counters.count("left", [c for c, gone in zip(clients, left) if gone])
        self.counters.add_many("wasted_s", clients, wasted_s)
        self.totals.drop_many(wasted_s)
        self.dropped_costs.drop_many(clients, wasted_s)
        if self.events is not None:  # each dropped candidate started at `now` (the attempt's start)
            first, now = self.events.number(len(clients)), self.clock.now
            for i, (c, w, gone) in enumerate(zip(clients, wasted_s, left)):
                self.events.add(Dispatch(self.round, first + i, c, self.round - 1, now, now + w,
                                         "lost" if gone else "dropped", None))

    def keep(self, clients: list[int]) -> list[int]:
        self.counters.count("selected", clients)
        self._members.update(clients)
        if self.events is not None:
            self._started.update(dict.fromkeys(clients, self.clock.now))
        return clients

    # --- what the engine reads -----------------------------------------------------------
    def columns(self) -> dict[str, Any]:
        """The row's system columns: `sim_time`, `dropped` (this round), `wasted_s`, then what
        the dropped candidates cost (`costs.DROPPED_COLUMNS`)."""
        return {**self.totals.columns(self.clock.now), **self.dropped_costs.columns()}

    def client_columns(self, clients: list[int]) -> dict[int, dict[str, Any]]:
        """Per client asked: its device (class, FLOP/s, seconds per sample, bandwidths,
        latency) and its counters since the previous evaluation (`counters`). O(asked + window)."""
        counts = self.counters.columns(clients)
        out = {}
        for c in clients:
            d = self.devices.device(c)
            out[c] = {"device": d.cls, "flops": d.flops, "s_per_sample": self.devices.seconds_per_sample(d),
                      "uplink_bytes_per_s": d.uplink, "downlink_bytes_per_s": d.downlink, "latency_s": d.latency,
                      **counts[c]}
        return out

    def reported(self) -> None:
        """The per-client counters went into clients.csv: a new window starts with the next round."""
        self.counters.reported()

    # --- checkpoints ---------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Plain numbers and lists (a checkpoint's `system`, `persist.state`)."""
        return persist.state(self)

    def load(self, state: dict[str, Any] | None) -> None:
        """Continue from `state` (a checkpoint's), taken by a run of the same profile
        (`persist.load`); None (a checkpoint without a system's state) changes nothing."""
        if state is not None:
            persist.load(self, state)


class NoSystem:
    """No simulated system (a run without --system): cohorts are the engine's own draws, no
    column is added, nothing is counted or saved. The same interface as `System`."""

    on = False
    events = None

    def begin_round(self, round_: int) -> None:
        pass

    def member_times(self, c: int) -> tuple[None, None]:
        return None, None

    def end_round(self) -> None:
        pass

    def select(self, m: int, stream: int, plain_draw: Callable[[int], list[int]]) -> list[int]:
        return plain_draw(m)

    def on_exchange(self, cost: ExchangeCost) -> None:
        pass

    def columns(self) -> dict[str, Any]:
        return {}

    def client_columns(self, clients: list[int]) -> None:
        return None

    def reported(self) -> None:
        pass

    def state(self) -> None:
        return None

    def load(self, state: dict[str, Any] | None) -> None:
        pass


def make_system(profile: Profile | None, seed: int, n_clients: int, model_size: int,
                model_bytes: int, tables: Tables | None = None) -> System | NoSystem:
    """The run's system: a `System` of `profile` (its files' `tables` as read at
    resolution), or `NoSystem()` when it is None."""
    if profile is None:
        return NoSystem()
    return System(profile, seed, n_clients, model_size, model_bytes, tables)
