"""When each client is online. Three questions, asked in any order (the clock may ask about
a time before the last one asked: a resumed run, a cohort drawn again):

* `online(c, t)`: is client c online at simulated time t (seconds)?
* `next_online(c, t)`: the first time >= t at which c is online (None: never again).
* `online_until(c, t)`: when the online interval that holds t ends (c online at t; inf: it
  never goes offline). A member whose interval ends before its work does leaves mid-round.

Built-in models (`BUILTINS`, the `kind` of a profile's availability section):

* `always`: every client, always.
* `bernoulli(p, slot_s)`: time is cut into slots of `slot_s` seconds; client c is online for
  the whole of slot k with probability p, keyed by (seed, c, k).
* `diurnal(online_hours, start_hour, p_day)`: client c lives in a time zone offset
  uniformly over 24 h (keyed by (seed, c)) and is online `online_hours` a day from
  `start_hour` local time (phones train while charging, idle and on an unmetered network,
  mostly at night: Bonawitz et al. 2019), each day with probability `p_day`.
* `trace(path, period_s)`: intervals [start_s, end_s) per client from a CSV, answered by a
  binary search over the client's sorted intervals: O(log k) for k intervals, whatever was
  asked before.

Your own model is one file: a subclass of `AvailabilityModel` with a `name`, a `Settings`
dataclass (its fields are the YAML keys beside `kind`, their defaults the only defaults)
and the three questions; a profile names it `kind: my_model.py:MyModel` (or
`package.module:Class`, or an entry point of the group `raycompo.availability`). See
docs/system.md. Nothing here scans the n clients: each answer looks at one client.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from raycompo.errors import ConfigError
from raycompo.seeding import splitmix_into
from raycompo.system import draws
from raycompo.system.csv_file import csv_reader
from raycompo.system.ranges import RANGES

DAY_S = 86400.0
_MASK63 = np.int64((1 << 63) - 1)  # a day keyed as `fold` keys it: its low 63 bits
SEARCH_MAX = 20_000
"""Slots (Bernoulli) or days (diurnal) `next_online` and `online_until` look ahead before
they answer None (inf). Profiles refuse p and p_day below `MIN_P` = 0.001, so a client that
is online at all is found within it but with probability (1 - 0.001)^20000 < 1e-8."""
CACHE_MAX = 200_000
"""Clients whose time-zone offset is kept (a pure function of (seed, client): dropping one
loses only time)."""
EDGE_S = 1e-6
"""Diurnal's `online_many` asks one at a time the clients this close to a window's edge
(where `online`'s rounding to the microsecond decides)."""
MIN_P = 0.001
"""The smallest probability of being online (Bernoulli `p`, diurnal `p_day`) a profile takes:
below it `next_online` could not find a client's next slot or day in bounded time."""


def bounded(low: float = 0.0, high: float = math.inf, strict: bool = True) -> dict[str, Any]:
    """A settings field's range, read by the profile's checks: a finite number in
    (low, high] (strict) or [low, high]."""
    return {"low": low, "high": high, "strict": strict}


class AvailabilityModel:
    """Who is online when: the base of every availability model (a plugin subclasses it).

    A subclass sets `name`, a frozen `Settings` dataclass (fields with defaults; a float
    field's range in its metadata, `bounded(...)`; `check(where)` for what involves several
    fields) and answers `online`, `next_online` and `online_until`. `create` builds it for a
    run; `read` (optional) reads its files once where the run is resolved."""

    name = ""

    @dataclass(frozen=True)
    class Settings:
        """No setting."""

        def check(self, where: str) -> None:
            """Raise ConfigError (naming `where`) for settings that cannot run together."""

    population: list[int] | None = None
    """The clients that can ever be online when not all of them (a trace's); None: all."""
    always = False
    """Every client online at every time (nothing to look up, nobody leaves)."""

    @classmethod
    def read(cls, settings: Any, n_clients: int) -> Any:
        """The model's files' content, read and checked once where the run is resolved (the
        driver, maybe on another node, gets it with the run): None when it has none."""
        return None

    @classmethod
    def create(cls, settings: Any, seed: int, n_clients: int, data: Any = None) -> AvailabilityModel:
        """The model of one run: `cls(settings, seed, n_clients)` unless overridden; `data`
        is what `read` returned."""
        return cls(settings, seed, n_clients)  # type: ignore[call-arg]

    def online(self, c: int, t: float) -> bool:
        raise NotImplementedError(f"availability model {type(self).__name__} must define online(c, t)")

    def next_online(self, c: int, t: float) -> float | None:
        raise NotImplementedError(f"availability model {type(self).__name__} must define next_online(c, t)")

    def online_until(self, c: int, t: float) -> float:
        raise NotImplementedError(f"availability model {type(self).__name__} must define online_until(c, t)")

    def online_many(self, clients: Sequence[int], t: float) -> list[bool]:
        """`online(c, t)` for each client (a model may answer many at once faster)."""
        return [self.online(c, t) for c in clients]

    def online_until_many(self, clients: Sequence[int], t: float) -> list[float]:
        """`online_until(c, t)` for each client (a model may answer many at once faster)."""
        return [self.online_until(c, t) for c in clients]

    def online_array(self, ids: np.ndarray, t: float) -> np.ndarray:
        """`online_many` of an int64 array of clients, as a bool array."""
        return np.asarray(self.online_many(ids.tolist(), t), dtype=bool)


class Always(AvailabilityModel):
    """Every client is online at every time."""

    name = "always"
    always = True

    def __init__(self, *args: Any) -> None:
        pass

    def online(self, c: int, t: float) -> bool:
        return True

    def next_online(self, c: int, t: float) -> float | None:
        return t

    def online_until(self, c: int, t: float) -> float:
        return math.inf

    def online_many(self, clients: Sequence[int], t: float) -> list[bool]:
        return [True] * len(clients)

    def online_array(self, ids: np.ndarray, t: float) -> np.ndarray:
        return np.ones(len(ids), dtype=bool)


class Bernoulli(AvailabilityModel):
    """Online in slot k = floor(t / slot_s) with probability p, independently per (client, slot)."""

    name = "bernoulli"

    @dataclass(frozen=True)
    class Settings:
        p: float = field(default=0.5, metadata=bounded(0.0, 1.0, strict=False))
        """Probability of being online in a slot, at least `MIN_P`."""
        slot_s: float = field(default=600.0, metadata=bounded(*RANGES["slot_s"], strict=False))
        """Seconds of a slot."""

        def check(self, where: str) -> None:
            if self.p < MIN_P:
                raise ConfigError(f"{where}: p={self.p:g} means no client is ever online (or too rarely to "
                                  f"simulate); give p in [{MIN_P:g}, 1]")

    @classmethod
    def create(cls, settings: Any, seed: int, n_clients: int, data: Any = None) -> Bernoulli:
        return cls(settings.p, settings.slot_s, seed)

    def __init__(self, p: float, slot_s: float, seed: int):
        self.p, self.slot_s = p, slot_s
        self._pre = draws.prefix(seed, draws.SLOT)
        self._below = draws.below(p) if p < 1.0 else None  # (p >= 1: always online, never compared)

    def _on(self, c: int, k: int) -> bool:
        return self.p >= 1.0 or draws.unit(self._pre, c, k) < self.p

    def online(self, c: int, t: float) -> bool:
        return self._on(c, math.floor(t / self.slot_s))

    def online_many(self, clients: Sequence[int], t: float) -> list[bool]:
        return self.online_array(np.asarray(clients, dtype=np.int64), t).tolist()

    def online_array(self, ids: np.ndarray, t: float) -> np.ndarray:
        if self.p >= 1.0:
            return np.ones(len(ids), dtype=bool)
        return draws.folds(self._pre, ids, math.floor(t / self.slot_s)) < self._below

    def next_online(self, c: int, t: float) -> float | None:
        k = math.floor(t / self.slot_s)
        if self._on(c, k):
            return t
        for j in range(k + 1, k + SEARCH_MAX):
            if self._on(c, j):
                return j * self.slot_s
        return None

    def online_until(self, c: int, t: float) -> float:
        if self.p >= 1.0:
            return math.inf
        k = math.floor(t / self.slot_s)
        for j in range(k + 1, k + SEARCH_MAX):
            if not self._on(c, j):
                return j * self.slot_s
        return math.inf


class Diurnal(AvailabilityModel):
    """Online `online_hours` a day from `start_hour` in the client's own time zone."""

    name = "diurnal"

    @dataclass(frozen=True)
    class Settings:
        online_hours: float = field(default=6.0, metadata=bounded(0.0, 24.0, strict=False))
        """Hours a day a client is online (its window)."""
        start_hour: float = field(default=0.0, metadata=bounded(0.0, 24.0, strict=False))
        """Local hour the window starts."""
        p_day: float = field(default=1.0, metadata=bounded(0.0, 1.0, strict=False))
        """Probability that a client is online on a given day (its window), at least `MIN_P`."""

        def check(self, where: str) -> None:
            if self.online_hours == 0 or self.p_day < MIN_P:
                raise ConfigError(f"{where}: online_hours={self.online_hours:g}, p_day={self.p_day:g} means no "
                                  f"client is ever online (or too rarely to simulate); give online_hours in (0, 24] "
                                  f"and p_day in [{MIN_P:g}, 1]")

    @classmethod
    def create(cls, settings: Any, seed: int, n_clients: int, data: Any = None) -> Diurnal:
        return cls(settings.online_hours, settings.start_hour, settings.p_day, seed)

    def __init__(self, online_hours: float, start_hour: float, p_day: float, seed: int):
        self.window = online_hours * 3600.0
        self.start = start_hour * 3600.0
        self.p_day = p_day
        self._zone = draws.prefix(seed, draws.ZONE)
        self._day = draws.prefix(seed, draws.DAY)
        self._pres = np.array([[self._zone]] + ([[self._day]] if p_day < 1.0 else []), dtype=np.uint64)
        """The prefixes of a batch's draws (`online_array`): the zone's; the day's with p_day < 1."""
        self._p_below = draws.below(p_day) if p_day < 1.0 else None
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

    def online_many(self, clients: Sequence[int], t: float) -> list[bool]:
        """`online` of each client at once, bit for bit: the keyed draws and the arithmetic
        in numpy; where rounding to the microsecond could move a client across a window's
        edge (within 1e-6 s of one), the client is asked one at a time."""
        return self.online_array(np.asarray(clients, dtype=np.int64), t).tolist()

    def online_array(self, ids: np.ndarray, t: float) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) == 0:
            return np.zeros(0, dtype=bool)
        # fold(zone, c) and, with p_day < 1, fold(day, c) (the day's draw then adds the day) in one pass
        h = self._pres ^ ids.view(np.uint64)
        splitmix_into(h)
        x = self._local_many(h[0], t)
        day = np.floor(x / DAY_S)
        within = x - day * DAY_S
        inside = within < self.window
        if self._p_below is not None:  # fold(day, c, day) of each, its unit below p_day
            key = day.astype(np.int64)
            key &= _MASK63
            h[1] ^= key.view(np.uint64)
            splitmix_into(h[1])
            inside &= h[1] < self._p_below
        edge = np.abs(within - self.window) < EDGE_S
        edge |= within < EDGE_S
        edge |= within > DAY_S - EDGE_S
        if edge.any():
            for i in np.flatnonzero(edge).tolist():
                inside[i] = self.online(int(ids[i]), t)
        return inside

    def online_until_many(self, clients: Sequence[int], t: float) -> list[float]:
        """`online_until` of each client (all online at t), bit for bit, in numpy (one at a
        time within 1e-6 s of a day's edge, where the rounding decides the day)."""
        if self.window >= DAY_S or not len(clients):
            return [self.online_until(c, t) for c in clients]
        ids = np.asarray(clients, dtype=np.int64)
        h = ids.view(np.uint64) ^ self._pres[0]
        splitmix_into(h)
        x = self._local_many(h, t)
        day = np.floor(x / DAY_S)
        out = (t + (day * DAY_S + self.window - x)).tolist()
        within = x - day * DAY_S
        edge = within < EDGE_S
        edge |= within > DAY_S - EDGE_S
        if edge.any():
            for i in np.flatnonzero(edge).tolist():
                out[i] = self.online_until(int(ids[i]), t)
        return out

    def _local_many(self, zone: np.ndarray, t: float) -> np.ndarray:
        """`_local` of clients whose fold(zone, c) is `zone`, before its rounding: t + offset."""
        off = draws.units_of(zone)
        off *= DAY_S
        if self.start:
            off -= self.start
        off += t
        return off

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

    def online_until(self, c: int, t: float) -> float:
        """The end of today's window (a 24 h window goes on through the next days that are
        on): t + (day start + window - x), x the client's local time unrounded, its day
        that of the rounded time `online` reads."""
        x = self._local(c, t)
        day = math.floor(x / DAY_S)
        if self.window < DAY_S:
            return t + (day * DAY_S + self.window - (t + self._offsets[c]))
        for d in range(day + 1, day + SEARCH_MAX):
            if not self._day_on(c, d):
                return t + (d * DAY_S - x)
        return math.inf


class Trace(AvailabilityModel):
    """Per-client on-line intervals, optionally repeating every `period_s`."""

    name = "trace"

    @dataclass(frozen=True)
    class Settings:
        path: str | None = field(default=None, metadata={"file": "sha256"})
        """The CSV of intervals (client,start_s,end_s), an absolute path once loaded."""
        period_s: float | None = field(default=None, metadata=bounded(*RANGES["period_s"], strict=False))
        """The trace repeats with this period (None: a client is offline after its last interval)."""
        sha256: str | None = None
        """Digest of the file: a resumed run checks that it did not change."""

        def check(self, where: str) -> None:
            if self.path is None:
                raise ConfigError(f"{where}: kind trace needs a path (a CSV of client,start_s,end_s)")

    @classmethod
    def read(cls, settings: Any, n_clients: int) -> dict[int, tuple[list[float], list[float]]]:
        return read_trace(settings.path, n_clients, settings.period_s)

    @classmethod
    def create(cls, settings: Any, seed: int, n_clients: int, data: Any = None) -> Trace:
        return cls(data if data is not None else cls.read(settings, n_clients), settings.period_s)

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

    def online_until(self, c: int, t: float) -> float:
        """The end of the interval holding t; with a period, an interval that ends where the
        next period's first one starts goes on (a client always online: inf)."""
        starts, ends, base, i = self._find(c, t)
        if i < 0 or t - base >= ends[i]:
            return t  # not online at t: it has already left
        end = base + ends[i]
        if self.period is None or ends[i] < self.period or starts[0] > 0:
            return end
        if len(starts) == 1:
            return math.inf  # [0, period) every period: always online
        return end + ends[0]


BUILTINS: dict[str, type[AvailabilityModel]] = {cls.name: cls for cls in (Always, Bernoulli, Diurnal, Trace)}
"""The built-in availability models by name: a profile's `kind`."""


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
