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
      kind: diurnal                # always | bernoulli | diurnal | trace | my_model.py:MyModel
      online_hours: 6
      start_hour: 0
      p_day: 0.9
    selection:
      policy: deadline             # deadline | my_policy.py:MyPolicy
      over_selection: 1.3
      deadline_s: 300
      max_attempts: 20

Every field is checked (type, range: `ranges.RANGES`); an unknown key is refused with the
accepted ones named. A number may be written in any form (1e9, 1.0e9, 1_000:
`ranges.as_number`). Relative file paths are read from the YAML file's folder. Everything
read from disk is untrusted: a malformed file is a `ConfigError` naming it.

The availability and selection sections name a class (`availability.BUILTINS`,
`selection.BUILTINS`, or a plugin) whose `Settings` dataclass holds the section's other
keys: its field defaults are the only defaults, and a profile built in Python
(`Availability("bernoulli", p=0.3)`) is checked exactly as a YAML file is. A plugin spec
(`file.py:Class`, `package.module:Class`, an entry point) is found by a `Resolver` that the
caller passes (`raycompo.configuration.config` passes `raycompo.configuration.plugins.load`: this layer imports no
plugin machinery).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import typing
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from raycompo.errors import ConfigError
from raycompo.system import availability as _availability_models
from raycompo.system import selection as _selection_policies
from raycompo.system.availability import AvailabilityModel
from raycompo.system.ranges import NUMBER_FORMS, RANGES, as_number
from raycompo.system.selection import SelectionPolicy

Resolver = Callable[[str, str, Path], type]
"""(family 'availability' | 'selection', spec, base folder) -> the class a plugin spec names."""


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


class Section:
    """A profile section that names a class (`kind` of availability, `policy` of selection)
    and holds that class's checked `Settings`. Built-in names, classes and, with a
    `Resolver`, plugin specs. Attributes read through to the settings
    (`profile.availability.p`). Compares and records by value."""

    family = ""
    """'availability' or 'selection' (also a plugin kind and its entry point group's suffix)."""
    key = ""
    """The YAML key that names the class."""
    default = ""
    base: type = object
    builtins: dict[str, type] = {}

    def __init__(self, name: str | type | None = None, *, where: str | None = None, base_dir: Path | None = None,
                 resolve: Resolver | None = None, **settings: Any):
        where = where or f"system profile: {self.family}"
        name = self.default if name is None else name
        model, spec = self._model(name, where, base_dir or Path.cwd(), resolve)
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "settings", check_settings(model, settings, f"{where} ({self.key} {spec})",
                                                            base_dir or Path.cwd(), self.key))

    def _model(self, name: str | type, where: str, base: Path, resolve: Resolver | None) -> tuple[type, str]:
        if isinstance(name, type):
            if not issubclass(name, self.base):
                raise ConfigError(f"{where}: {self.key} {name!r} is not a subclass of {self.base.__name__}")
            return name, f"{name.__module__}:{name.__qualname__}"
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}: {self.key} must be one of {', '.join(self.builtins)}, got {name!r}")
        if name in self.builtins:
            return self.builtins[name], name
        if resolve is None:
            raise ConfigError(
                f"{where}: {self.key} must be one of {', '.join(self.builtins)}, got {name!r}; your own class is "
                f"named 'file.py:Class', 'package.module:Class' or by an entry point of the group "
                f"raycompo.{self.family}, and a run resolves it (raycompo.run, --system)")
        return resolve(self.family, name, base), name

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("settings", "model", "spec"):
            raise AttributeError(name)
        try:
            return getattr(self.settings, name)
        except AttributeError:
            raise AttributeError(f"{self.family} {self.spec} has no setting {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __reduce__(self) -> tuple:
        return (_rebuild, (type(self), self.spec, self.model, self.settings))

    @property
    def kind(self) -> str:
        """The spec of the class this section names, as written."""
        return self.spec

    def record(self) -> dict[str, Any]:
        """Plain JSON values: {key: spec, **settings}."""
        return {self.key: self.spec, **asdict(self.settings)}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and (self.spec, self.model, self.settings) == \
            (other.spec, other.model, other.settings)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.spec, self.settings))

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in asdict(self.settings).items())
        return f"{type(self).__name__}({self.spec!r}{', ' if fields else ''}{fields})"


def _rebuild(cls: type, spec: str, model: type, settings: Any) -> Section:
    out: Section = object.__new__(cls)
    object.__setattr__(out, "spec", spec)
    object.__setattr__(out, "model", model)
    object.__setattr__(out, "settings", settings)
    return out


class Availability(Section):
    """When clients are online: `kind` names an availability model (`always`, `bernoulli`,
    `diurnal`, `trace`, or a plugin; raycompo/system/availability.py), the other keys are
    its settings: `Availability("diurnal", online_hours=6, p_day=0.9)`."""

    family = "availability"
    key = "kind"
    default = "always"
    base = AvailabilityModel
    builtins = _availability_models.BUILTINS


class Selection(Section):
    """How a cohort of m is chosen: `policy` names a selection policy (`deadline`, or a
    plugin; raycompo/system/selection.py), the other keys are its settings:
    `Selection(over_selection=1.3, deadline_s=300)`."""

    family = "selection"
    key = "policy"
    default = "deadline"
    base = SelectionPolicy
    builtins = _selection_policies.BUILTINS

    @property
    def policy(self) -> str:
        return self.spec


def check_settings(model: Any, values: dict[str, Any], where: str, base: Path, key: str = "kind") -> Any:
    """`model.Settings` from `values`, every field checked: unknown keys refused with the
    accepted ones named; a number written in any form (`ranges.as_number`), a float field
    within its range (metadata `bounded`), an integer field within its (metadata
    `integer`), a file field (metadata `file`: the field
    that receives its digest) made absolute and digested; then `Settings.check(where)`."""
    cls = model.Settings
    fields = {f.name: f for f in dataclasses.fields(cls)}
    digests = {f.metadata["file"] for f in fields.values() if "file" in f.metadata}
    _known(values, (key, *(n for n in fields if n not in digests)), where)
    hints = typing.get_type_hints(cls)
    out: dict[str, Any] = {}
    for name, value in values.items():
        f = fields[name]
        meta = f.metadata
        if value is None and f.default is None:
            out[name] = None
        elif "low" in meta:
            out[name] = number(value, name, where, low=meta["low"], strict=meta["strict"], high=meta["high"])
        elif "integer" in meta:
            out[name] = integer(value, name, where, meta["integer"], meta.get("integer_max"))
        elif "file" in meta:
            out[name], out[meta["file"]] = _file(value, name, where, base)
        elif hints.get(name) is str and not isinstance(value, str):
            raise ConfigError(f"{where}: {name} must be a string, got {value!r}")
        else:
            out[name] = value
    try:
        settings = cls(**out)
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    check = getattr(settings, "check", None)
    if check is not None:
        check(where)
    return settings


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
        checkpoint fingerprint hold. The availability and selection sections record their
        class's settings only (`Section.record`)."""
        return used({"name": self.name, "devices": asdict(self.devices), "availability": self.availability.record(),
                     "selection": self.selection.record(), "description": self.description})

    @property
    def plain_selection(self) -> bool:
        """Every client always online and a policy whose cohort is then the engine's own
        draw (no over-selection, no deadline): the same clients as a run without --system."""
        return bool(self.availability.model.always and self.selection.model.create(self.selection.settings, 0).plain)


DRAWN = ("classes", "flops_sigma", "uplink_bytes_per_s", "downlink_bytes_per_s", "latency_s")
"""The fields of `Devices` a device CSV replaces (the distributions devices are drawn from)."""


def used(record: dict[str, Any]) -> dict[str, Any]:
    """A profile's record (`Profile.record`, or one with every field of `Devices`, as
    checkpoints hold from before records kept only what is used) with only the fields the
    run uses: with a device CSV, not the drawn distributions it replaces (nor the CSV fields
    without one). (The availability and selection sections record only their own class's
    settings.) Two records describe the same system exactly when their `used` are equal."""
    out = dict(record)
    if isinstance(out.get("devices"), dict):
        dev = dict(out["devices"])
        drop = DRAWN if dev.get("csv") is not None else ("csv", "csv_sha256")
        out["devices"] = {k: v for k, v in dev.items() if k not in drop}
    return out


def file_digests(section: str, record: dict[str, Any]) -> dict[str, str]:
    """A section's record's file digests -> the field holding each file's path: the device
    CSV's, and those of a built-in availability model's or selection policy's settings
    (metadata `file`, e.g. the trace's `sha256` of its `path`)."""
    if section == "devices":
        return {"csv_sha256": "csv"}
    cls: Any = {"availability": Availability, "selection": Selection}.get(section)
    model = cls.builtins.get(record.get(cls.key)) if cls is not None else None
    if model is None:
        return {}
    return {f.metadata["file"]: f.name for f in dataclasses.fields(model.Settings) if "file" in f.metadata}


def changes(was: dict[str, Any], now: dict[str, Any], at: str = "") -> list[str]:
    """What differs between two profile records (`Profile.record`), field by field and
    briefly: 'devices.classes[0].flops 1e+09 then, 2e+09 now', or 'the device CSV
    /x/d.csv was edited (its sha256 differs)'. Empty when they describe the same system."""
    if at == "":
        was, now = used(was), used(now)
    out: list[str] = []
    if isinstance(was, dict) and isinstance(now, dict):
        digests = file_digests(at, now)
        for k in [*was, *(k for k in now if k not in was)]:
            a, b = was.get(k), now.get(k)
            if a == b:
                continue
            if k in digests and a and b:
                path = digests[k]
                if was.get(path) == now.get(path):  # (another path: said by its own field)
                    what = "device CSV" if at == "devices" else f"{at} {now.get('kind', now.get('policy'))}"
                    out.append(f"the {what} {now.get(path)} was edited (its sha256 differs)")
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


def load_profile(spec: str | Profile | dict, resolve: Resolver | None = None) -> Profile:
    """A `Profile` from a built-in name, a YAML file path, a dict of the YAML's shape, or a
    Profile (returned as is). `resolve` finds the plugin classes the profile names (None:
    built-in names only). Raises ConfigError naming what is wrong."""
    if isinstance(spec, Profile):
        return spec
    if isinstance(spec, dict):
        return parse_profile(spec, where="system", base=Path.cwd(), resolve=resolve)
    if not isinstance(spec, str) or not spec:
        raise ConfigError(f"system must be a profile name ({', '.join(PROFILES)}) or a YAML file path, got {spec!r}")
    if spec in PROFILES:
        return PROFILES[spec]
    path = Path(spec)
    if not _is_file_spec(spec):
        raise ConfigError(f"unknown system profile {spec!r}; choose one of: {', '.join(PROFILES)}, or give a "
                          "YAML file path (.yaml / .yml)")
    return parse_profile(_read_yaml(path), where=str(path), base=path.resolve().parent, resolve=resolve)


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


def parse_profile(data: dict, where: str, base: Path, resolve: Resolver | None = None) -> Profile:
    """Check every field of a profile mapping; `base` is the folder of relative paths (and
    of plugin files), `resolve` finds plugin classes."""
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
        _plugin_section(Availability, _section(data, "availability", where), f"{where}: availability", base, resolve),
        _plugin_section(Selection, _section(data, "selection", where), f"{where}: selection", base, resolve),
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


def integer(value: Any, key: str, where: str, low: int, high: int | None = None) -> int:
    """`value` (an integer, or a number or string of an integral value: 20, 20.0, '1e3') as
    an int in [low, high] (None: no highest)."""
    x = as_number(value)
    if x is None or not math.isfinite(x) or x != int(x) or x < low or (high is not None and x > high):
        span = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ConfigError(f"{where}: {key} must be an integer {span}, got {value!r}")
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


def _plugin_section(cls: Any, d: dict, where: str, base: Path, resolve: Resolver | None) -> Any:
    """An availability or selection section of a YAML mapping: its class (`kind` /
    `policy`) and that class's settings, checked."""
    values = dict(d)
    return cls(values.pop(cls.key, None), where=where, base_dir=base, resolve=resolve, **values)


KINDS = tuple(_availability_models.BUILTINS)
"""The built-in availability models' names."""

# (built last: the sections are checked by the functions above)
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
