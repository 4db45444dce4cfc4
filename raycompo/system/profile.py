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

Every field is checked (type, range); an unknown key is refused with the accepted ones
named. Relative file paths are read from the YAML file's folder. Everything read from disk
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
        """Plain JSON values: what config.json and the checkpoint fingerprint hold."""
        return asdict(self)

    @property
    def plain_selection(self) -> bool:
        """Every client always online, no over-selection and no deadline: a cohort is the
        engine's own draw (the same clients as a run without --system)."""
        s = self.selection
        return self.availability.kind == "always" and s.over_selection == 1.0 and s.deadline_s is None


KINDS = ("always", "bernoulli", "diurnal", "trace")
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


def number(value: Any, key: str, where: str, low: float = 0.0, strict: bool = True, high: float = math.inf) -> float:
    """`value` as a finite float in (low, high] (or [low, high] when not `strict`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{where}: {key} must be a finite number, got {value!r}")
    if value < low or (strict and value == low) or value > high:
        span = f"{'(' if strict else '['}{low:g}, {high:g}]"
        raise ConfigError(f"{where}: {key} must be in {span}, got {value!r}")
    return float(value)


def _spread(value: Any, key: str, where: str, strict: bool = True) -> Spread:
    """A number (the same for every client) or {median, sigma}; `strict`: the median > 0."""
    if isinstance(value, dict):
        _known(value, ("median", "sigma"), f"{where}: {key}")
        if "median" not in value:
            raise ConfigError(f"{where}: {key} needs a median")
        return Spread(number(value["median"], f"{key}.median", where, strict=strict),
                      number(value.get("sigma", 0.0), f"{key}.sigma", where, strict=False, high=5.0))
    return Spread(number(value, key, where, strict=strict))


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
            parsed.append(DeviceClass(c["name"], number(c.get("weight", 1.0), "weight", at),
                                      number(c.get("flops"), "flops", at)))
        classes = tuple(parsed)
    csv, digest = _file(d["csv"], "csv", where, base) if "csv" in d else (None, None)
    return Devices(
        classes=classes,
        flops_sigma=number(d.get("flops_sigma", 0.0), "flops_sigma", where, strict=False, high=5.0),
        uplink_bytes_per_s=_spread(d.get("uplink_bytes_per_s", default.uplink_bytes_per_s.median), "uplink_bytes_per_s", where),
        downlink_bytes_per_s=_spread(d.get("downlink_bytes_per_s", default.downlink_bytes_per_s.median),
                                     "downlink_bytes_per_s", where),
        latency_s=_spread(d.get("latency_s", default.latency_s.median), "latency_s", where, strict=False),
        flop_per_sample_per_param=number(d.get("flop_per_sample_per_param", 6.0), "flop_per_sample_per_param", where,
                                         strict=False),
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
        return Availability(kind, p=p, slot_s=number(d.get("slot_s", 600.0), "slot_s", where))
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
                            period_s=None if period is None else number(period, "period_s", where))
    return Availability(kind)


def _selection(d: dict, where: str) -> Selection:
    _known(d, ("over_selection", "deadline_s", "max_attempts"), where)
    deadline = d.get("deadline_s")
    attempts = d.get("max_attempts", 20)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ConfigError(f"{where}: max_attempts must be an integer >= 1, got {attempts!r}")
    return Selection(
        over_selection=number(d.get("over_selection", 1.0), "over_selection", where, low=1.0, strict=False, high=100.0),
        deadline_s=None if deadline is None else number(deadline, "deadline_s", where),
        max_attempts=attempts,
    )
