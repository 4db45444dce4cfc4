"""Per-client devices: compute throughput, uplink and downlink bandwidth, latency.

Drawn (the default): client c's class is drawn with the classes' weights from
(seed, c); its FLOP/s is the class's times exp(flops_sigma * Z); each network quantity is
`median * exp(sigma * Z)`, every Z its own keyed standard normal. O(1) per client, no table.

Read from a CSV (`devices.csv` in a profile): a header and one row per device, columns
`flops` (FLOP/s), `uplink_bytes_per_s`, `downlink_bytes_per_s` (bytes/s), `latency_s`
(one way, seconds), optionally `class` (a name) and `client` (an id). With a `client`
column every client 0..n-1 has exactly its row; without it the table is a pool of devices
and client c gets row `hash(seed, c) mod rows` (as FedScale maps clients onto its trace).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from raycompo.errors import ConfigError
from raycompo.system import draws
from raycompo.system.csv_file import csv_reader
from raycompo.system.profile import Devices
from raycompo.system.ranges import RANGES

CSV_COLUMNS = ("flops", "uplink_bytes_per_s", "downlink_bytes_per_s", "latency_s")
"""The numeric columns a device CSV must have (plus optional `client` and `class`)."""
CSV_RANGES = {col: RANGES[kind] for col, kind in zip(CSV_COLUMNS, ("flops", "bytes_per_s", "bytes_per_s", "latency_s"))}
"""Each numeric column's accepted [lowest, highest] (ranges.RANGES, as in a YAML profile)."""

CACHE_MAX = 200_000
"""Devices kept after their first look-up; past this the cache starts again (a device is a
pure function of (seed, client): dropping it loses only time)."""

KEEP_MAX = 8192
"""Rates kept from one round to the next: a population this small is drawn once; past it the
rates are let go at a round's start (at 10^7 clients a client seldom returns, and a large
cache costs more in memory traffic than it saves in draws)."""

KEEP_ACROSS_MAX = 8 * KEEP_MAX
"""A population larger than this keeps the rates of the round in progress only (its
exchanges and its dropped candidates read them): a candidate is among the last `KEEP_MAX`
drawn with probability under 1/8, and filling and clearing a cache of `KEEP_MAX` costs more
than the draws it saves (at 10^7 clients, 130 inserts a round took 23 us into a cache that
grows to 8,192 entries, 8 us into one of a round, plus the clears)."""

MANY_MIN = 8
"""`rate_arrays` draws this many new devices or more at once in numpy (fewer: one by one)."""

Rates = tuple[float, float, float, float]
"""(2 * latency, seconds per byte down, per byte up, per sample) of a device: the
coefficients of `clock.member_time`."""


@dataclass(frozen=True)
class Device:
    """One client's device."""

    cls: str
    """Its class name (e.g. 'low', 'mid', 'high'; a CSV's `class`, or 'csv')."""
    flops: float
    """Effective training throughput, FLOP/s."""
    uplink: float
    """Bytes per second to the server."""
    downlink: float
    """Bytes per second from the server."""
    latency: float
    """One-way latency, seconds."""

    def transfer_s(self, bytes_down: float, bytes_up: float) -> float:
        """Seconds to receive `bytes_down` and send `bytes_up`, a latency each way."""
        return 2 * self.latency + bytes_down / self.downlink + bytes_up / self.uplink


class DeviceModel:
    """`device(c)`: client c's Device, from the profile's distributions or its CSV."""

    def __init__(self, spec: Devices, seed: int, n_clients: int, model_size: int,
                 table: tuple[list[Device], bool] | None = None):
        """`table`: the CSV's content as `read_devices_csv` returned it (None: read it here)."""
        self.spec = spec
        self.seed = seed
        self.n_clients = n_clients
        self.flop_per_sample = spec.flop_per_sample_per_param * model_size
        """FLOP of one sample (flop_per_sample_per_param * d)."""
        self._cache: dict[int, Device] = {}
        self._rates: dict[int, tuple[float, float, float, float]] = {}
        self._rows: list[Device] | None = None
        self._by_client = False
        if spec.csv is not None:
            self._rows, self._by_client = table if table is not None else read_devices_csv(spec.csv, n_clients)
        self._pre = {p: draws.prefix(seed, p) for p in (draws.DEVICE_CLASS, draws.DEVICE_FLOPS, draws.UPLINK,
                                                         draws.DOWNLINK, draws.LATENCY, draws.DEVICE_ROW)}
        # weights over the largest first: their sum stays finite for any finite weights
        top = max(c.weight for c in spec.classes)
        w = [c.weight / top for c in spec.classes]
        self._cum = [sum(w[: i + 1]) / sum(w) for i in range(len(w))]
        # what `_draw_many` reads each time, made once
        self._cum_array = np.array(self._cum)
        self._class_flops = np.array([c.flops for c in spec.classes])
        self._many_pres = [self._pre[k] for k in (draws.DEVICE_CLASS, draws.DEVICE_FLOPS, draws.UPLINK, draws.DOWNLINK,
                                                  draws.LATENCY)]

    def seconds_per_sample(self, device: Device) -> float:
        """Compute seconds of one sample on `device`: flop_per_sample_per_param * d / flops."""
        return self.flop_per_sample / device.flops

    def begin_round(self) -> None:
        """A round starts: past `KEEP_MAX` clients, or in a population over `KEEP_ACROSS_MAX`,
        the rates of earlier rounds are let go."""
        if len(self._rates) > KEEP_MAX or (self.n_clients > KEEP_ACROSS_MAX and self._rates):
            self._rates.clear()

    def rates(self, c: int) -> Rates:
        """(2 * latency, seconds per byte down, per byte up, per sample) of client c's
        device: the coefficients of `clock.member_time`, cached (an exchange of every client
        reads them once per member)."""
        r = self._rates.get(c)
        if r is None:
            r = self._keep(c, self.device(c))
        return r

    def rate_arrays(self, clients: Sequence[int]) -> np.ndarray:
        """`rates(c)` of each client as a (4, len(clients)) array, a row per coefficient; the
        devices not yet known are drawn at once (numpy for the keyed draws and the
        arithmetic, Python's own inverse normal CDF and exp per number: bit for bit the
        rates of `rates`) and cached for the exchanges that follow."""
        if self._rows is None and len(clients) >= MANY_MIN and self._rates.keys().isdisjoint(clients):
            return self._draw_rates(list(clients))  # all new (at 10^7 clients, the usual case)
        get = self._rates.get
        known = [get(c) for c in clients]
        missing = [i for i, r in enumerate(known) if r is None]
        if len(missing) < MANY_MIN or self._rows is not None:
            return np.array([r if r is not None else self.rates(c) for c, r in zip(clients, known)],
                            dtype=np.float64).reshape(len(clients), 4).T
        new = self._draw_rates([clients[i] for i in missing])
        if len(missing) == len(clients):
            return new
        out = np.empty((4, len(clients)))
        out[:, missing] = new
        have = [i for i, r in enumerate(known) if r is not None]
        out[:, have] = np.array([known[i] for i in have]).T
        return out

    def _draw_rates(self, ids: list[int]) -> np.ndarray:
        """`rate_arrays` of clients `ids`, none of them cached: drawn at once, then cached."""
        _, flops, up, down, lat = self._draw_many(ids)
        new = np.empty((4, len(ids)))
        np.multiply(lat, 2, out=new[0])
        np.divide(1.0, down, out=new[1])
        np.divide(1.0, up, out=new[2])
        np.divide(self.flop_per_sample, flops, out=new[3])
        if len(self._rates) + len(ids) > CACHE_MAX:
            self._rates.clear()
        self._rates.update(zip(ids, zip(*new.tolist())))
        return new

    def _draw_many(self, ids: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(class index, FLOP/s, uplink, downlink, latency) arrays of drawn clients `ids`:
        `_make`'s draws, at once (the five keyed draws in one numpy pass, the four
        log-normal factors in one pass of Python's own arithmetic)."""
        s = self.spec
        u = draws.units_each(self._many_pres, ids)
        kinds = np.searchsorted(self._cum_array, u[0], side="left")
        np.minimum(kinds, len(self._cum) - 1, out=kinds)
        spreads = (s.uplink_bytes_per_s, s.downlink_bytes_per_s, s.latency_s)
        # exp(sigma Z) of each draw: with sigma 0 exactly 1, so median * factor is `draws.lognormal`
        factor = draws.exp_normals(u[1:], (s.flops_sigma, *(x.sigma for x in spreads)))
        flops = self._class_flops[kinds] * factor[0]
        up, down, lat = (x.median * f for x, f in zip(spreads, factor[1:]))
        return kinds, flops, up, down, lat

    def _keep(self, c: int, d: Device) -> Rates:
        if len(self._rates) >= CACHE_MAX:
            self._rates.clear()
        r = self._rates[c] = (2 * d.latency, 1.0 / d.downlink, 1.0 / d.uplink, self.seconds_per_sample(d))
        return r

    def device(self, c: int) -> Device:
        d = self._cache.get(c)
        if d is None:
            if len(self._cache) >= CACHE_MAX:
                self._cache.clear()
            d = self._cache[c] = self._make(c)
        return d

    def _make(self, c: int) -> Device:
        if self._rows is not None:
            return self._rows[c] if self._by_client else self._rows[draws.index(self._pre[draws.DEVICE_ROW], len(self._rows), c)]
        s, p = self.spec, self._pre
        u = draws.unit(p[draws.DEVICE_CLASS], c)
        k = next((i for i, edge in enumerate(self._cum) if u <= edge), len(self._cum) - 1)
        cls = s.classes[k]
        return Device(
            cls.name,
            draws.lognormal(p[draws.DEVICE_FLOPS], cls.flops, s.flops_sigma, c),
            draws.lognormal(p[draws.UPLINK], s.uplink_bytes_per_s.median, s.uplink_bytes_per_s.sigma, c),
            draws.lognormal(p[draws.DOWNLINK], s.downlink_bytes_per_s.median, s.downlink_bytes_per_s.sigma, c),
            draws.lognormal(p[draws.LATENCY], s.latency_s.median, s.latency_s.sigma, c),
        )


def read_devices_csv(path: str, n_clients: int) -> tuple[list[Device], bool]:
    """(the devices, whether they are by client id) of a device CSV; ConfigError on a
    malformed file, a client id out of range or listed twice, or a client missing."""
    where = f"device CSV {path}"
    with csv_reader(path, where) as reader:
        header = reader.fieldnames or []
        missing = [c for c in CSV_COLUMNS if c not in header]
        if missing:
            raise ConfigError(f"{where}: missing column(s) {', '.join(missing)}; a device CSV has a header with "
                              f"{', '.join(CSV_COLUMNS)} and optionally client, class")
        extra = [c for c in header if c not in (*CSV_COLUMNS, "client", "class")]
        if extra:
            raise ConfigError(f"{where}: unknown column(s) {', '.join(extra)}; accepted: "
                              f"{', '.join((*CSV_COLUMNS, 'client', 'class'))}")
        by_client = "client" in header
        rows: list[tuple[int, Device]] = []
        for line, r in enumerate(reader, 2):
            if None in r or None in r.values():
                raise ConfigError(f"{where}: line {line} does not have the header's {len(header)} fields")
            vals = []
            for col in CSV_COLUMNS:
                try:
                    v = float(r[col])
                except ValueError:
                    raise ConfigError(f"{where}: line {line}: {col}={r[col]!r} is not a number") from None
                low, high = CSV_RANGES[col]
                if not (math.isfinite(v) and low <= v <= high):
                    raise ConfigError(f"{where}: line {line}: {col}={r[col]} must be a number in [{low:g}, {high:g}]")
                vals.append(v)
            cid = _client_id(r["client"], where, line, n_clients) if by_client else line - 2
            rows.append((cid, Device(r.get("class") or "csv", *vals)))
    if not rows:
        raise ConfigError(f"{where} holds no device (a header and at least one row)")
    if not by_client:
        return [d for _, d in rows], False
    table: list[Device | None] = [None] * n_clients
    for cid, d in rows:
        if table[cid] is not None:
            raise ConfigError(f"{where}: client {cid} is listed twice")
        table[cid] = d
    absent = [c for c, d in enumerate(table) if d is None]
    if absent:
        raise ConfigError(f"{where}: the task has {n_clients} clients and the CSV lists {n_clients - len(absent)}; "
                          f"missing e.g. {', '.join(map(str, absent[:5]))}. List every client, or drop the client "
                          "column to use the table as a pool of devices")
    return [d for d in table if d is not None], True


def _client_id(text: str, where: str, line: int, n_clients: int) -> int:
    try:
        cid = int(text)
    except ValueError:
        raise ConfigError(f"{where}: line {line}: client={text!r} is not an integer id") from None
    if not 0 <= cid < n_clients:
        raise ConfigError(f"{where}: line {line}: client {cid} does not exist (the task has clients 0..{n_clients - 1})")
    return cid
