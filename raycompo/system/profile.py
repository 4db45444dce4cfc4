"""System profiles: what the simulated federation's devices, network, availability and
selection policy are. A built-in name (`PROFILES`) or a YAML file of the same shape.

    name: my-phones
    description: low- and high-end phones   # shown by --list
    devices:                       # drawn per client from (seed, client id)
      classes:                     # device classes, drawn with these weights
        - {name: low, weight: 0.4, flops: 1.0e9}
        - {name: high, weight: 0.6, flops: 2.0e10}
      flops_sigma: 0.3             # log-normal spread of FLOP/s within a class
      uplink_bytes_per_s: {median: 6.25e5, sigma: 0.9}
      downlink_bytes_per_s: {median: 2.5e6, sigma: 0.9}
      latency_s: {median: 0.05, sigma: 0.5}     # one way; a number = the same for all
      flop_per_sample_per_param: 6
      # or: csv: devices.csv        (a table of devices; see raycompo/system/devices.py)
    availability:
      kind: diurnal                # always | bernoulli | diurnal | trace
      online_hours: 6
      start_hour: 0
      p_day: 0.9
    selection:
      over_selection: 1.3
      deadline_s: 300
      max_attempts: 20

Every field is checked (type, range: `RANGES`); an unknown key is refused with the accepted
ones named. A number may be written in any form (1e9, 1.0e9, 1_000: `as_number`). Relative file paths are read from the YAML file's folder. Everything read from disk
is untrusted: a malformed file is a `ConfigError` naming it.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from raycompo.errors import ConfigError


@dataclass(frozen=True)
class Spread:
    """A log-normal quantity: `median * exp(sigma * Z)` per client (sigma 0: the same for all)."""

    median: float
    sigma: float = 0.0


@dataclass(frozen=True)
class DeviceClass:
    """One kind of device, drawn with probability proportional to `weight`."""

    name: str
    weight: float
    flops: float
    """Effective training throughput, FLOP/s (far below a chip's peak)."""


@dataclass(frozen=True)
class Devices:
    """How each client's device is found: drawn from the distributions, or read from `csv`."""

    classes: tuple[DeviceClass, ...] = (DeviceClass("uniform", 1.0, 1e10),)
    flops_sigma: float = 0.0
    uplink_bytes_per_s: Spread = Spread(1.25e6)
    """Bytes per second from the client to the server (10 Mbit/s = 1.25e6 B/s; 1 kbit = 1000 bit)."""
    downlink_bytes_per_s: Spread = Spread(1.25e6)
    latency_s: Spread = Spread(0.05)
    """One-way latency in seconds, paid once per direction per exchange."""
    flop_per_sample_per_param: float = 6.0
    """Work of one sample: this many FLOP per model parameter (forward 2 d + backward 4 d
    for a dense model, Kaplan et al. 2020). A sample takes this * d / flops seconds."""
    csv: str | None = None
    """A device table (absolute path once loaded); replaces the distributions."""
    csv_sha256: str | None = None
    """Digest of the table: a resumed run checks that the file did not change."""


@dataclass(frozen=True)
class Availability:
    """When clients are online: `always`, `bernoulli` (online in each slot of `slot_s` with
    probability `p`), `diurnal` (a daily window of `online_hours` from `start_hour` local
    time, time zones spread uniformly, each day with probability `p_day`), or `trace`
    (on-line intervals per client from `trace`)."""

    kind: str = "always"
    p: float = 1.0
    slot_s: float = 600.0
    online_hours: float = 24.0
    start_hour: float = 0.0
    p_day: float = 1.0
    trace: str | None = None
    period_s: float | None = None
    """A trace repeats with this period (None: a client is offline after its last interval)."""
    trace_sha256: str | None = None


@dataclass(frozen=True)
class Selection:
    """How a cohort of m is chosen: `ceil(over_selection * m)` online candidates, the m
    predicted to finish first are kept (and only those within `deadline_s`)."""

    over_selection: float = 1.0
    deadline_s: float | None = None
    max_attempts: int = 20
    """Rounds abandoned in a row (fewer than m candidates within the deadline) before the
    run stops with an error: a deadline no client meets."""


@dataclass(frozen=True)
class Profile:
    """A whole simulated system (see the module docstring for the YAML shape)."""

    name: str
    devices: Devices = field(default_factory=Devices)
    availability: Availability = field(default_factory=Availability)
    selection: Selection = field(default_factory=Selection)
    description: str = ""
    """One line on what it models (shown by `python -m raycompo.run --list`)."""

    def record(self) -> dict[str, Any]:
        """Plain JSON values of what the run uses (`used`): what config.json and the
        checkpoint fingerprint hold."""
        return used(asdict(self))

    @property
    def plain_selection(self) -> bool:
        """Every client always online, no over-selection and no deadline: a cohort is the
        engine's own draw (the same clients as a run without --system)."""
        s = self.selection
        return self.availability.kind == "always" and s.over_selection == 1.0 and s.deadline_s is None


KINDS = ("always", "bernoulli", "diurnal", "trace")
KIND_FIELDS = {"always": (), "bernoulli": ("p", "slot_s"), "diurnal": ("online_hours", "start_hour", "p_day"),
               "trace": ("trace", "period_s", "trace_sha256")}
"""The fields of `Availability` each kind uses."""
DRAWN = ("classes", "flops_sigma", "uplink_bytes_per_s", "downlink_bytes_per_s", "latency_s")
"""The fields of `Devices` a device CSV replaces (the distributions devices are drawn from)."""


def used(record: dict[str, Any]) -> dict[str, Any]:
    """A profile's record (`dataclasses.asdict` of a Profile, or a record that already went
    through here) with only the fields the run uses: with a device CSV, not the drawn
    distributions it replaces (nor the CSV fields without one); of availability, its kind's
    fields. Two records describe the same system exactly when their `used` are equal."""
    out = dict(record)
    if isinstance(out.get("devices"), dict):
        dev = dict(out["devices"])
        drop = DRAWN if dev.get("csv") is not None else ("csv", "csv_sha256")
        out["devices"] = {k: v for k, v in dev.items() if k not in drop}
    if isinstance(out.get("availability"), dict):
        av = out["availability"]
        keep = ("kind", *KIND_FIELDS.get(av.get("kind"), tuple(av)))
        out["availability"] = {k: v for k, v in av.items() if k in keep}
    return out


FILE_DIGESTS = {"csv_sha256": "csv", "trace_sha256": "trace"}
"""A file's digest in a record -> the record's field holding the file's path."""


def changes(was: dict[str, Any], now: dict[str, Any], at: str = "") -> list[str]:
    """What differs between two profile records (`Profile.record`), field by field and
    briefly: 'devices.classes[0].flops 1e+09 then, 2e+09 now', or 'the device CSV
    /x/d.csv was edited (its sha256 differs)'. Empty when they describe the same system."""
    if at == "":
        was, now = used(was), used(now)
    out: list[str] = []
    if isinstance(was, dict) and isinstance(now, dict):
        for k in [*was, *(k for k in now if k not in was)]:
            a, b = was.get(k), now.get(k)
            if a == b:
                continue
            if k in FILE_DIGESTS and a and b:
                if was.get(FILE_DIGESTS[k]) == now.get(FILE_DIGESTS[k]):  # (another path: said by its own field)
                    what = "device CSV" if k == "csv_sha256" else "availability trace"
                    out.append(f"the {what} {now.get(FILE_DIGESTS[k])} was edited (its sha256 differs)")
            else:
                out += changes(a, b, f"{at}.{k}" if at else str(k))
        return out
    if isinstance(was, list) and isinstance(now, list) and len(was) == len(now):
        for i, (a, b) in enumerate(zip(was, now)):
            out += changes(a, b, f"{at}[{i}]")
        return out
    if was != now:
        out.append(f"{at} {_brief(was)} then, {_brief(now)} now")
    return out


def _brief(value: Any) -> str:
    text = f"{value:g}" if isinstance(value, float) else "(none)" if value is None else str(value)
    return text if len(text) <= 60 else text[:57] + "..."

MIN_P = 0.001
"""The smallest probability of being online (Bernoulli `p`, diurnal `p_day`) a profile takes:
below it `next_online` could not find a client's next slot or day in bounded time."""

PROFILES: dict[str, Profile] = {
    "uniform": Profile("uniform", description="equal devices (1e10 FLOP/s, 10 Mbit/s both ways, 50 ms), always online"),
    "mobile": Profile(
        "mobile",
        Devices(
            classes=(DeviceClass("low", 0.4, 1e9), DeviceClass("mid", 0.4, 5e9), DeviceClass("high", 0.2, 2e10)),
            flops_sigma=0.3,
            uplink_bytes_per_s=Spread(6.25e5, 0.9),
            downlink_bytes_per_s=Spread(2.5e6, 0.9),
            latency_s=Spread(0.05, 0.5),
        ),
        Availability("diurnal", online_hours=6.0, start_hour=0.0, p_day=0.9),
        Selection(over_selection=1.3, deadline_s=300.0),
        "heterogeneous phones, online 6 h a night, 130 % over-selection, a 300 s deadline",
    ),
}
PROFILES["mobile-sync"] = Profile(
    "mobile-sync", PROFILES["mobile"].devices,
    description="mobile's devices, always online; the server waits for every client it drew")
"""`mobile`'s devices, always online, no over-selection: the server waits for every client
it drew (the straggler-bound synchronous round; the same cohorts as a run without --system)."""
PROFILES["mobile-fastest"] = Profile(
    "mobile-fastest", PROFILES["mobile"].devices, Availability(), Selection(over_selection=2.0),
    "mobile's devices, always online; twice the cohort drawn, the faster half kept")
"""`mobile`'s devices, always online, twice the cohort drawn and the faster half kept: slow
clients are dropped (the other extreme of `mobile-sync`)."""


def load_profile(spec: str | Profile | dict) -> Profile:
    """A `Profile` from a built-in name, a YAML file path, a dict of the YAML's shape, or a
    Profile (returned as is). Raises ConfigError naming what is wrong."""
    if isinstance(spec, Profile):
        return spec
    if isinstance(spec, dict):
        return parse_profile(spec, where="system", base=Path.cwd())
    if not isinstance(spec, str) or not spec:
        raise ConfigError(f"system must be a profile name ({', '.join(PROFILES)}) or a YAML file path, got {spec!r}")
    if spec in PROFILES:
        return PROFILES[spec]
    path = Path(spec)
    if not _is_file_spec(spec):
        raise ConfigError(f"unknown system profile {spec!r}; choose one of: {', '.join(PROFILES)}, or give a "
                          "YAML file path (.yaml / .yml)")
    return parse_profile(_read_yaml(path), where=str(path), base=path.resolve().parent)


def canonical_system(spec: str | None) -> str | None:
    """`spec` as config.json records it: a built-in name as is, a YAML path made absolute
    (so that `--resume` from another folder finds the same file)."""
    if spec is None or spec in PROFILES or not isinstance(spec, str) or not _is_file_spec(spec):
        return spec  # (an unknown name is reported as such by load_profile)
    return str(Path(spec).resolve())


def _is_file_spec(spec: str) -> bool:
    return Path(spec).suffix.lower() in (".yaml", ".yml") or Path(spec).exists()


def _read_yaml(path: Path) -> dict:
    import yaml

    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"system profile {path} does not exist; give a built-in name ({', '.join(PROFILES)}) "
                          "or an existing YAML file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"system profile {path} is not readable ({type(exc).__name__}: {exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"system profile {path} is not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"system profile {path} must be a YAML mapping (name, devices, availability, "
                          f"selection), got a {type(data).__name__}")
    return data


def parse_profile(data: dict, where: str, base: Path) -> Profile:
    """Check every field of a profile mapping; `base` is the folder of relative paths."""
    _known(data, ("name", "description", "devices", "availability", "selection"), where)
    name = data.get("name", Path(where).stem)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}: name must be a non-empty string, got {name!r}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(f"{where}: description must be a string, got {description!r}")
    return Profile(
        name,
        _devices(_section(data, "devices", where), f"{where}: devices", base),
        _availability(_section(data, "availability", where), f"{where}: availability", base),
        _selection(_section(data, "selection", where), f"{where}: selection"),
        description,
    )


def _section(data: dict, key: str, where: str) -> dict:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key} must be a mapping, got {value!r}")
    return value


def _known(data: dict, accepted: tuple[str, ...], where: str) -> None:
    unknown = sorted(str(k) for k in data if k not in accepted)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; accepted: {', '.join(accepted)}")


RANGES = {
    "flops": (1.0, 1e20),
    "weight": (0.0, math.inf),
    "bytes_per_s": (1.0, 1e15),
    "latency_s": (0.0, 1e5),
    "flop_per_sample_per_param": (0.0, 1e9),
    "slot_s": (1e-3, 1e12),
    "period_s": (1e-3, 1e12),
    "time_s": (0.0, 1e12),
    "deadline_s": (0.0, 1e12),
}
"""(lowest, highest) value of each kind of quantity a profile, a device CSV or a trace
takes. Wide enough for any device (1 FLOP/s to 1e20, 1 B/s to 1 PB/s, a day of latency),
narrow enough that every product the clock forms (samples * FLOP per sample / FLOP/s,
bytes / bandwidth, a slot index t / slot_s) stays a finite float."""

MAX_ATTEMPTS = 1000
"""The most abandoned rounds in a row `selection.max_attempts` may allow: each attempt
draws a cohort again, so a deadline no client meets is reported within bounded work."""


def as_number(value: Any) -> float | None:
    """`value` as a float when it is a number or a string a person writes as one ('1e9',
    '1.0e9', '1_000', '2.5E+3': YAML 1.1 readers such as PyYAML leave 1e9 and 1.0e9 as
    strings); None otherwise (a boolean, any other string or type)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # an integer beyond any float
            return math.inf
    return None


NUMBER_FORMS = "e.g. 6, 0.05, 1e9, 1.0e+9, 1_000"


def number(value: Any, key: str, where: str, low: float = 0.0, strict: bool = True, high: float = math.inf) -> float:
    """`value` (a number, or a string written as one: `as_number`) as a finite float in
    (low, high] (or [low, high] when not `strict`)."""
    x = as_number(value)
    if x is None or not math.isfinite(x):
        raise ConfigError(f"{where}: {key} must be a finite number ({NUMBER_FORMS}), got {value!r}")
    if x < low or (strict and x == low) or x > high:
        span = f"{'(' if strict else '['}{low:g}, {high:g}]"
        raise ConfigError(f"{where}: {key} must be in {span}, got {value!r}")
    return x


def ranged(value: Any, key: str, where: str, kind: str, strict: bool = False) -> float:
    """`number` within `RANGES[kind]` (the lower end excluded when `strict`)."""
    low, high = RANGES[kind]
    return number(value, key, where, low=low, strict=strict, high=high)


def integer(value: Any, key: str, where: str, low: int, high: int) -> int:
    """`value` (an integer, or a number or string of an integral value: 20, 20.0, '1e3') as
    an int in [low, high]."""
    x = as_number(value)
    if x is None or not math.isfinite(x) or x != int(x) or not low <= x <= high:
        raise ConfigError(f"{where}: {key} must be an integer in [{low}, {high}], got {value!r}")
    return int(x)


def _spread(value: Any, key: str, where: str, kind: str) -> Spread:
    """A number (the same for every client) or {median, sigma}; the median in `RANGES[kind]`."""
    if isinstance(value, dict):
        _known(value, ("median", "sigma"), f"{where}: {key}")
        if "median" not in value:
            raise ConfigError(f"{where}: {key} needs a median")
        return Spread(ranged(value["median"], f"{key}.median", where, kind),
                      number(value.get("sigma", 0.0), f"{key}.sigma", where, strict=False, high=5.0))
    return Spread(ranged(value, key, where, kind))


def _file(value: Any, key: str, where: str, base: Path) -> tuple[str, str]:
    """(absolute path, sha256) of a file named in a profile."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: {key} must be a file path, got {value!r}")
    path = Path(value)
    path = path if path.is_absolute() else base / path
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        raise ConfigError(f"{where}: {key} file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{where}: {key} file {path} is not readable ({exc.strerror or exc})") from None
    return str(path), digest


def _devices(d: dict, where: str, base: Path) -> Devices:
    keys = ("classes", "flops_sigma", "uplink_bytes_per_s", "downlink_bytes_per_s", "latency_s",
            "flop_per_sample_per_param", "csv")
    _known(d, keys, where)
    default = Devices()
    classes = default.classes
    if "classes" in d:
        raw = d["classes"]
        if not isinstance(raw, list) or not raw:
            raise ConfigError(f"{where}: classes must be a non-empty list of {{name, weight, flops}}, got {raw!r}")
        parsed = []
        for i, c in enumerate(raw):
            at = f"{where}: classes[{i}]"
            if not isinstance(c, dict):
                raise ConfigError(f"{at} must be a mapping {{name, weight, flops}}, got {c!r}")
            _known(c, ("name", "weight", "flops"), at)
            if not isinstance(c.get("name"), str) or not c["name"]:
                raise ConfigError(f"{at}: name must be a non-empty string, got {c.get('name')!r}")
            parsed.append(DeviceClass(c["name"], ranged(c.get("weight", 1.0), "weight", at, "weight", strict=True),
                                      ranged(c.get("flops"), "flops", at, "flops")))
        classes = tuple(parsed)
    both = [k for k in DRAWN if k in d]
    if "csv" in d and both:
        raise ConfigError(f"{where}: csv replaces the drawn devices ({', '.join(DRAWN)}); give the csv or "
                          f"{', '.join(both)}, not both")
    csv, digest = _file(d["csv"], "csv", where, base) if "csv" in d else (None, None)
    return Devices(
        classes=classes,
        flops_sigma=number(d.get("flops_sigma", 0.0), "flops_sigma", where, strict=False, high=5.0),
        uplink_bytes_per_s=_spread(d.get("uplink_bytes_per_s", default.uplink_bytes_per_s.median), "uplink_bytes_per_s",
                                   where, "bytes_per_s"),
        downlink_bytes_per_s=_spread(d.get("downlink_bytes_per_s", default.downlink_bytes_per_s.median),
                                     "downlink_bytes_per_s", where, "bytes_per_s"),
        latency_s=_spread(d.get("latency_s", default.latency_s.median), "latency_s", where, "latency_s"),
        flop_per_sample_per_param=ranged(d.get("flop_per_sample_per_param", 6.0), "flop_per_sample_per_param", where,
                                         "flop_per_sample_per_param"),
        csv=csv, csv_sha256=digest,
    )


def _availability(d: dict, where: str, base: Path) -> Availability:
    kind = d.get("kind", "always")
    if kind not in KINDS:
        raise ConfigError(f"{where}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    accepted = {"always": (), "bernoulli": ("p", "slot_s"), "diurnal": ("online_hours", "start_hour", "p_day"),
                "trace": ("path", "period_s")}[kind]
    _known(d, ("kind", *accepted), f"{where} (kind {kind})")
    if kind == "bernoulli":
        p = number(d.get("p", 0.5), "p", where, strict=False, high=1.0)
        if p < MIN_P:
            raise ConfigError(f"{where}: p={p:g} means no client is ever online (or too rarely to simulate); "
                              f"give p in [{MIN_P:g}, 1]")
        return Availability(kind, p=p, slot_s=ranged(d.get("slot_s", 600.0), "slot_s", where, "slot_s"))
    if kind == "diurnal":
        hours = number(d.get("online_hours", 6.0), "online_hours", where, strict=False, high=24.0)
        p_day = number(d.get("p_day", 1.0), "p_day", where, strict=False, high=1.0)
        if hours == 0 or p_day < MIN_P:
            raise ConfigError(f"{where}: online_hours={hours:g}, p_day={p_day:g} means no client is ever online (or "
                              f"too rarely to simulate); give online_hours in (0, 24] and p_day in [{MIN_P:g}, 1]")
        start = number(d.get("start_hour", 0.0), "start_hour", where, strict=False, high=24.0)
        return Availability(kind, online_hours=hours, start_hour=start, p_day=p_day)
    if kind == "trace":
        if "path" not in d:
            raise ConfigError(f"{where}: kind trace needs a path (a CSV of client,start_s,end_s)")
        path, digest = _file(d["path"], "path", where, base)
        period = d.get("period_s")
        return Availability(kind, trace=path, trace_sha256=digest,
                            period_s=None if period is None else ranged(period, "period_s", where, "period_s"))
    return Availability(kind)


def _selection(d: dict, where: str) -> Selection:
    _known(d, ("over_selection", "deadline_s", "max_attempts"), where)
    deadline = d.get("deadline_s")
    return Selection(
        over_selection=number(d.get("over_selection", 1.0), "over_selection", where, low=1.0, strict=False, high=100.0),
        deadline_s=None if deadline is None else ranged(deadline, "deadline_s", where, "deadline_s", strict=True),
        max_attempts=integer(d.get("max_attempts", 20), "max_attempts", where, 1, MAX_ATTEMPTS),
    )
