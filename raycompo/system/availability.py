"""When each client is online. Two questions, asked in any order (the clock may ask about
a time before the last one asked: a resumed run, a cohort drawn again):

* `online(c, t)`: is client c online at simulated time t (seconds)?
* `next_online(c, t)`: the first time >= t at which c is online (None: never again).

Kinds:

* `Always`: every client, always.
* `Bernoulli(p, slot_s)`: time is cut into slots of `slot_s` seconds; client c is online for
  the whole of slot k with probability p, keyed by (seed, c, k).
* `Diurnal(online_hours, start_hour, p_day)`: client c lives in a time zone offset
  uniformly over 24 h (keyed by (seed, c)) and is online `online_hours` a day from
  `start_hour` local time (phones train while charging, idle and on an unmetered network,
  mostly at night: Bonawitz et al. 2019), each day with probability `p_day`.
* `Trace`: intervals [start_s, end_s) per client from a CSV, answered by a binary search
  over the client's sorted intervals: O(log k) for k intervals, whatever was asked before.

Nothing here scans the n clients: each answer looks at one client.
"""

from __future__ import annotations

import bisect
import math

from raycompo.errors import ConfigError
from raycompo.system import draws
from raycompo.system.csv_file import csv_reader
from raycompo.system.profile import RANGES
from raycompo.system.profile import Availability as Spec

DAY_S = 86400.0
SEARCH_MAX = 20_000
"""Slots (Bernoulli) or days (diurnal) `next_online` looks ahead before it answers None.
Profiles refuse p and p_day below `profile.MIN_P` = 0.001, so a client that is online at all is
found within it but with probability (1 - 0.001)^20000 < 1e-8."""
CACHE_MAX = 200_000
"""Clients whose time-zone offset is kept (a pure function of (seed, client): dropping one
loses only time)."""


class Always:
    """Every client is online at every time."""

    population: list[int] | None = None
    """The clients that can ever be online when not all of them (a trace's); None: all."""
    always = True
    """Every client online at every time (nothing to look up)."""

    def online(self, c: int, t: float) -> bool:
        return True

    def next_online(self, c: int, t: float) -> float | None:
        return t


class Bernoulli(Always):
    """Online in slot k = floor(t / slot_s) with probability p, independently per (client, slot)."""

    always = False

    def __init__(self, p: float, slot_s: float, seed: int):
        self.p, self.slot_s = p, slot_s
        self._pre = draws.prefix(seed, draws.SLOT)

    def _on(self, c: int, k: int) -> bool:
        return self.p >= 1.0 or draws.unit(self._pre, c, k) < self.p

    def online(self, c: int, t: float) -> bool:
        return self._on(c, math.floor(t / self.slot_s))

    def next_online(self, c: int, t: float) -> float | None:
        k = math.floor(t / self.slot_s)
        if self._on(c, k):
            return t
        for j in range(k + 1, k + SEARCH_MAX):
            if self._on(c, j):
                return j * self.slot_s
        return None


class Diurnal(Always):
    """Online `online_hours` a day from `start_hour` in the client's own time zone."""

    always = False

    def __init__(self, online_hours: float, start_hour: float, p_day: float, seed: int):
        self.window = online_hours * 3600.0
        self.start = start_hour * 3600.0
        self.p_day = p_day
        self._zone = draws.prefix(seed, draws.ZONE)
        self._day = draws.prefix(seed, draws.DAY)
        self._offsets: dict[int, float] = {}

    def _local(self, c: int, t: float) -> float:
        """Seconds since the client's first window began (its time zone's offset added),
        to the microsecond: a window's start found by `next_online` reads back as online."""
        off = self._offsets.get(c)
        if off is None:
            if len(self._offsets) >= CACHE_MAX:
                self._offsets.clear()
            off = self._offsets[c] = draws.unit(self._zone, c) * DAY_S - self.start
        return round(t + off, 6)

    def _day_on(self, c: int, day: int) -> bool:
        return self.p_day >= 1.0 or draws.unit(self._day, c, day & ((1 << 63) - 1)) < self.p_day

    def online(self, c: int, t: float) -> bool:
        return self._online_at(c, self._local(c, t))

    def _online_at(self, c: int, x: float) -> bool:
        day = math.floor(x / DAY_S)
        return x - day * DAY_S < self.window and self._day_on(c, day)

    def next_online(self, c: int, t: float) -> float | None:
        x = self._local(c, t)
        if self._online_at(c, x):
            return t
        day = math.floor(x / DAY_S) + 1  # today's window is over or was skipped
        for d in range(day, day + SEARCH_MAX):
            if self._day_on(c, d):
                return t + (d * DAY_S - x)
        return None


class Trace(Always):
    """Per-client on-line intervals, optionally repeating every `period_s`."""

    always = False

    def __init__(self, intervals: dict[int, tuple[list[float], list[float]]], period_s: float | None):
        self.intervals = intervals
        self.period = period_s
        self.population = sorted(intervals)

    def _find(self, c: int, t: float) -> tuple[list[float], list[float], float, int]:
        """(starts, ends, the period's origin, the index of the last interval starting <= t)."""
        starts, ends = self.intervals.get(c, ([], []))
        base = 0.0
        if self.period is not None:
            base = math.floor(t / self.period) * self.period
        return starts, ends, base, bisect.bisect_right(starts, t - base) - 1

    def online(self, c: int, t: float) -> bool:
        starts, ends, base, i = self._find(c, t)
        return i >= 0 and t - base < ends[i]

    def next_online(self, c: int, t: float) -> float | None:
        starts, ends, base, i = self._find(c, t)
        if not starts:
            return None
        if i >= 0 and t - base < ends[i]:
            return t
        if i + 1 < len(starts):
            return base + starts[i + 1]
        return None if self.period is None else base + self.period + starts[0]


def read_trace(path: str, n_clients: int, period_s: float | None) -> dict[int, tuple[list[float], list[float]]]:
    """{client: (sorted starts, ends)} of a trace CSV with header `client,start_s,end_s`
    (overlapping or touching intervals of a client are merged). ConfigError on a malformed
    file, a client that does not exist, an interval with end <= start or past `period_s`,
    or a trace in which no client is ever online."""
    where = f"availability trace {path}"
    spans: dict[int, list[tuple[float, float]]] = {}
    with csv_reader(path, where) as reader:
        if list(reader.fieldnames or []) != ["client", "start_s", "end_s"]:
            raise ConfigError(f"{where}: the header must be exactly client,start_s,end_s (seconds of simulated "
                              f"time), got {','.join(reader.fieldnames or [])!r}")
        for line, r in enumerate(reader, 2):
            if None in r or None in r.values():
                raise ConfigError(f"{where}: line {line} does not have 3 fields")
            try:
                c, a, b = int(r["client"]), float(r["start_s"]), float(r["end_s"])
            except ValueError:
                raise ConfigError(f"{where}: line {line}: expected an integer client and two numbers, got "
                                  f"{r['client']!r}, {r['start_s']!r}, {r['end_s']!r}") from None
            if not 0 <= c < n_clients:
                raise ConfigError(f"{where}: line {line}: client {c} does not exist (the task has clients "
                                  f"0..{n_clients - 1})")
            if not (math.isfinite(a) and math.isfinite(b) and 0 <= a < b <= RANGES["time_s"][1]):
                raise ConfigError(f"{where}: line {line}: an interval needs 0 <= start_s < end_s <= "
                                  f"{RANGES['time_s'][1]:g} (seconds), got {a:g}, {b:g}")
            if period_s is not None and b > period_s:
                raise ConfigError(f"{where}: line {line}: end_s {b:g} is past the trace's period_s {period_s:g}")
            spans.setdefault(c, []).append((a, b))
    if not spans:
        raise ConfigError(f"{where} holds no interval: no client is ever online")
    out = {}
    for c, items in spans.items():
        items.sort()
        merged = [list(items[0])]
        for a, b in items[1:]:
            if a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        out[c] = ([m[0] for m in merged], [m[1] for m in merged])
    return out


def check_cohort(named: int, m: int, path: str | None, setting: str | None = "clients_per_round") -> None:
    """ConfigError when a trace names fewer clients (`named`) than a cohort of `m` needs:
    only the clients it names are ever online, so no round could be filled. `setting`: the
    setting that asks for m, named in the message."""
    if named < m:
        asked = f" ({setting}={m})" if setting else ""
        lower = f", or lower {setting}" if setting else ""
        raise ConfigError(f"availability trace {path} names {named} client(s), and a round's cohort needs {m} online "
                          f"clients{asked}: list at least {m} clients in the trace{lower}")


def make_availability(spec: Spec, seed: int, n_clients: int,
                      intervals: dict[int, tuple[list[float], list[float]]] | None = None) -> Always:
    """The availability model of a profile's section; a trace's `intervals` as `read_trace`
    returned them (None: the trace is read and checked here)."""
    if spec.kind == "bernoulli":
        return Bernoulli(spec.p, spec.slot_s, seed)
    if spec.kind == "diurnal":
        return Diurnal(spec.online_hours, spec.start_hour, spec.p_day, seed)
    if spec.kind == "trace":
        assert spec.trace is not None
        return Trace(intervals if intervals is not None else read_trace(spec.trace, n_clients, spec.period_s),
                     spec.period_s)
    return Always()
