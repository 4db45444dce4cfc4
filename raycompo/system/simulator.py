"""The simulated system of one run: the engine asks it who joins a round (`select`) and
tells it what each exchange cost (`on_exchange`); it keeps the clock and the counters.

Lives in the driver (a `Federation`), so it is the same object inline and on Ray; its
state is a round boundary's plain numbers (`state` / `load`), saved in checkpoints, so a
resumed run continues the same clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from raycompo.costs import ExchangeCost
from raycompo.errors import ConfigError
from raycompo.system import draws
from raycompo.system.availability import check_cohort, make_availability, read_trace
from raycompo.system.clock import Workload, exchange_workload, predicted_time
from raycompo.system.deadline import candidates_for, choose
from raycompo.system.devices import Device, DeviceModel, read_devices_csv
from raycompo.system.profile import Profile

COLUMNS = ("sim_time", "dropped", "wasted_s")
"""metrics.csv columns of a run with a system: cumulative simulated seconds, clients
selected but not used this round, cumulative device-seconds of work thrown away."""

COUNTERS = ("drawn", "online", "selected", "dropped", "wasted_s", "waited_s")
"""Per-client counters: times drawn as a candidate, found online when drawn, kept in a
cohort, dropped, device-seconds of dropped work, seconds an exchange waited for it."""


@dataclass(frozen=True)
class Tables:
    """What a profile's files hold, read once where the run is resolved: the driver (in
    this process or a Ray actor, maybe on another node) gets them with the run's settings
    and never opens a path that may not exist there."""

    devices: tuple[list[Device], bool] | None = None
    """A device CSV's devices and whether they are by client id (`read_devices_csv`)."""
    trace: dict[int, tuple[list[float], list[float]]] | None = None
    """An availability trace's intervals by client (`read_trace`)."""


def check_profile(profile: Profile, seed: int, n_clients: int) -> Tables:
    """Read and check a profile's files against a population of `n_clients` (a device CSV
    listing every client, a trace naming only clients that exist): their content, or a
    ConfigError naming the file and what is wrong."""
    d, a = profile.devices, profile.availability
    return Tables(read_devices_csv(d.csv, n_clients) if d.csv is not None else None,
                  read_trace(a.trace, n_clients, a.period_s) if a.kind == "trace" and a.trace is not None else None)


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
        self.devices = DeviceModel(profile.devices, seed, n_clients, model_size, tables.devices)
        self.availability = make_availability(profile.availability, seed, n_clients, tables.trace)
        self._candidate = draws.prefix(seed, draws.CANDIDATE)
        self.now = 0.0
        """Simulated seconds since the run began (metrics.csv's `sim_time`)."""
        self.wasted_s = 0.0
        self.dropped_round = 0
        self.workload = [Workload(0.0, float(model_bytes), float(model_bytes))]
        """The last round's work per member and exchange, from which finish times are
        predicted. Before any round ran: the model down and up once, no sample."""
        self.counters: dict[str, dict[int, float]] = {k: {} for k in COUNTERS}
        self._round = 0
        self._members: set[int] = set()
        self._work: list[Workload] = []

    # --- the round ----------------------------------------------------------------------
    def begin_round(self, round_: int) -> None:
        """Round `round_` (1-based) starts at `now`."""
        self._round, self._members, self._work, self.dropped_round = round_, set(), [], 0

    def end_round(self) -> None:
        """The round is over: its measured work predicts the next round's finish times."""
        if self._work:
            self.workload = self._work

    def s_per_sample(self, c: int) -> float:
        return self.devices.seconds_per_sample(self.devices.device(c))

    def predict(self, c: int) -> float:
        """Seconds client c would take for a round like the last one."""
        return predicted_time(self.devices.device(c), self.s_per_sample(c), self.workload)

    def select(self, m: int, stream: int, plain_draw: Callable[[int], list[int]]) -> list[int]:
        """A cohort of m clients for this round (see docs/system.md): `plain_draw(m)` when
        every client is always online and there is no over-selection or deadline; else m of
        ceil(over_selection * m) online candidates, the m predicted to finish first within
        the deadline. An abandoned attempt (fewer than m within the deadline) costs the
        deadline and is drawn again, at most `max_attempts` times in a row."""
        if self.profile.plain_selection:
            cohort = plain_draw(m)
            for c in cohort:
                for key in ("drawn", "online", "selected"):
                    self._add(key, c, 1)
            self._members.update(cohort)
            return cohort
        sel = self.profile.selection
        if self.availability.population is not None:  # a trace: only the clients it names are ever online
            check_cohort(len(self.availability.population), m, self.profile.availability.trace, None)
        fastest = float("inf")
        for attempt in range(sel.max_attempts):
            candidates, start = self._candidates(m, stream, attempt)
            self.now = start  # waiting for check-ins counts
            predicted = {c: self.predict(c) for c in candidates}
            fastest = min(fastest, min(predicted.values()))
            choice = choose(predicted, m, sel.deadline_s)
            for c in choice.dropped:  # each worked until the round closed (or was abandoned)
                self._add("dropped", c, 1)
                self._add("wasted_s", c, min(predicted[c], choice.close_s))
                self.wasted_s += min(predicted[c], choice.close_s)
            self.dropped_round += len(choice.dropped)
            if choice.kept:
                for c in choice.kept:
                    self._add("selected", c, 1)
                self._members.update(choice.kept)
                return choice.kept
            assert sel.deadline_s is not None
            self.now += sel.deadline_s
        raise ConfigError(
            f"system profile {self.profile.name!r}: round {self._round} was abandoned {sel.max_attempts} times in a "
            f"row: fewer than {m} of the candidates were predicted to finish within deadline_s={sel.deadline_s:g} s "
            f"(the fastest was predicted to take {fastest:.3g} s). Raise selection.deadline_s or selection.over_selection")

    def _candidates(self, m: int, stream: int, attempt: int) -> tuple[list[int], float]:
        """(ceil(over_selection * m) candidates online at `now`, or at the returned later
        time when too few are: the time the last of them checks in). Candidates are drawn
        uniformly (keyed by seed, round, stream, attempt) and the offline ones rejected:
        O(m) draws while a fair share of clients is online, never a scan of all n."""
        pop = self.availability.population
        size = self.n_clients if pop is None else len(pop)
        k = candidates_for(m, self.profile.selection.over_selection, size)
        t = self.now
        online: list[int] = []
        offline: list[int] = []
        seen: set[int] = set()
        cap = 20 * k + 100
        i = 0
        while len(online) < k and i < cap and len(seen) < size:
            h = draws.index(self._candidate, size, self._round, stream, attempt, i)
            i += 1
            c = h if pop is None else pop[h]
            if c in seen:
                continue
            seen.add(c)
            self._add("drawn", c, 1)
            if self.availability.online(c, t):
                online.append(c)
                self._add("online", c, 1)
            else:
                offline.append(c)
        if len(online) >= k:
            return online, t
        # the earliest check-ins among the first offline ones drawn (bounded work per round)
        later = sorted((nt, c) for c in offline[: 2 * k + 10] if (nt := self.availability.next_online(c, t)) is not None)
        if len(online) + len(later) < m:
            raise ConfigError(
                f"system profile {self.profile.name!r}: round {self._round} needs {m} clients, but of the {len(seen)} "
                f"drawn at simulated time {t:.0f} s only {len(online) + len(later)} are ever online (no client is "
                "online often enough). Check the availability section (p, online_hours, p_day, the trace)")
        fill = later[: k - len(online)]
        return online + [c for _, c in fill], fill[-1][0] if fill else t

    def on_exchange(self, cost: ExchangeCost) -> None:
        """One exchange: the clock moves by its slowest member's time (a barrier). A member
        that was not drawn online this round (an algorithm that uses every client) is
        waited for until it is online, and the wait counts."""
        if cost.round != self._round:
            self.begin_round(cost.round)
        t, worst = self.now, 0.0
        check = not self.availability.always
        rates = self.devices.rates
        for i, c in enumerate(cost.clients):
            wait = 0.0
            if check and c not in self._members:
                start = self.availability.next_online(c, t)
                if start is None:
                    raise ConfigError(
                        f"system profile {self.profile.name!r}: client {c} is never online again after simulated time "
                        f"{t:.0f} s, and round {cost.round}'s phase {cost.phase!r} needs it (an algorithm that uses "
                        "every client waits for each). Give it availability, or use a trace with a period_s")
                wait = start - t
                if wait > 0:
                    self._add("waited_s", c, wait)
            fixed, per_down, per_up, per_sample = rates(c)  # = member_time(device, ...), its terms cached
            took = wait + fixed + cost.bytes_down[i] * per_down + cost.samples[i] * per_sample + cost.bytes_up[i] * per_up
            if took > worst:
                worst = took
        self.now = t + worst
        self._work.append(exchange_workload(cost))

    def _add(self, key: str, c: int, v: float) -> None:
        d = self.counters[key]
        d[c] = d.get(c, 0) + v

    # --- what the engine reads -----------------------------------------------------------
    def columns(self) -> dict[str, Any]:
        """The row's system columns: `sim_time`, `dropped` (this round), `wasted_s`."""
        return {"sim_time": self.now, "dropped": self.dropped_round, "wasted_s": self.wasted_s}

    def client_columns(self, clients: list[int]) -> dict[int, dict[str, Any]]:
        """Per client asked: its device (class, FLOP/s, seconds per sample, bandwidths,
        latency) and its counters. O(len(clients))."""
        out = {}
        for c in clients:
            d = self.devices.device(c)
            out[c] = {"device": d.cls, "flops": d.flops, "s_per_sample": self.devices.seconds_per_sample(d),
                      "uplink_bytes_per_s": d.uplink, "downlink_bytes_per_s": d.downlink, "latency_s": d.latency,
                      **{k: self.counters[k].get(c, 0) for k in COUNTERS}}
        return out

    # --- checkpoints ---------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Plain numbers and lists (a checkpoint's `system`): the clock, the last round's
        workload and the per-client counters."""
        return {"profile": self.profile.name, "now": self.now, "wasted_s": self.wasted_s,
                "workload": [[w.samples, w.bytes_down, w.bytes_up] for w in self.workload],
                "counters": {k: [[c, v] for c, v in d.items()] for k, d in self.counters.items()}}

    def load(self, state: dict[str, Any]) -> None:
        """Continue from `state` (a checkpoint's), taken by a run of the same profile."""
        if state.get("profile") != self.profile.name:
            raise ConfigError(f"the checkpoint's system profile is {state.get('profile')!r}, this run's "
                              f"{self.profile.name!r}: it belongs to another run")
        self.now, self.wasted_s = float(state["now"]), float(state["wasted_s"])
        self.workload = [Workload(*map(float, w)) for w in state["workload"]]
        self.counters = {k: {int(c): v for c, v in state["counters"].get(k, [])} for k in COUNTERS}


class NoSystem:
    """No simulated system (a run without --system): cohorts are the engine's own draws, no
    column is added, nothing is saved. Lets the engine call the same methods either way."""

    on = False

    def begin_round(self, round_: int) -> None:
        pass

    def end_round(self) -> None:
        pass

    def select(self, m: int, stream: int, plain_draw: Callable[[int], list[int]]) -> list[int]:
        return plain_draw(m)

    def columns(self) -> dict[str, Any]:
        return {}

    def state(self) -> None:
        return None


def make_system(profile: Profile | None, seed: int, n_clients: int, model_size: int,
                model_bytes: int, tables: Tables | None = None) -> System | NoSystem:
    """The run's system: a `System` of `profile` (its files' `tables` as read at
    resolution), or `NoSystem()` when it is None."""
    if profile is None:
        return NoSystem()
    return System(profile, seed, n_clients, model_size, model_bytes, tables)
