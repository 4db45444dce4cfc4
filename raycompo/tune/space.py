"""Search spaces: `sweeps/<name>.yaml` files, loaded and checked before any trial starts.

Format (every key but `task` and `algorithms` is optional)::

    description: ComFedL journal 5.3 grid, imbalanced MNIST
    task: dro-mnist5k          # task swept by default (must need no download if offline)
    full_task: dro-mnist       # task swept with --full
    rounds: 30                 # rounds per trial (--rounds overrides)
    metric: val_acc_worst      # default --metric (a column of the task's rows)
    mode: max                  # default --mode (max or min)
    samples: 4                 # default --samples per algorithm for --search optuna
    seed: 0                    # RunConfig.seed of every trial (--seed overrides)
    eval_every: 1              # RunConfig.eval_every of every trial
    offline: true              # false: `task` needs a data download (CI skips its tiny sweep)
    settings: {}               # task/algorithm settings of every trial (flat keys); an
                               # algorithm that sweeps one of them uses its swept values
    system: mobile             # RunConfig.system of every trial (a simulated system: a profile
                               # name or a YAML file, docs/system.md); default none
    budget: {sim_time: 3600}   # RunConfig.budget: every trial ends at the first round whose
                               # cumulative cost column reaches its limit (raycompo/costs/budget.py)
    aggregation: buffered      # any other field of RunConfig that is not the sweep's own
                               # (see RUN_KEYS): the same value for every trial
    algorithms:                # algorithm -> {setting: list of the paper's values}
      comfedl: {lr: [0.01, 0.1], gamma: [0.1, 0.5, 1, 5], tau: [1, 5, 10]}
      fedavg: {lr: [0.1], buffer: [5, 10], concurrency: [10, 20]}  # RunConfig keys swept too

A scalar instead of a list is a one-value list; `{}` runs the algorithm's defaults.
A key of an algorithm's mapping (or of `settings`, or `--set`) that is a field of RunConfig
in `run_keys()` (system, budget, and the engine's options such as an aggregation's buffer K
and concurrency C) sets that field of the trial's RunConfig; every other key is a task or
algorithm setting. So an engine option is searched like any hyperparameter, and the trial's
re-run command (trials.csv's `command`) carries it as the option of `python -m raycompo.run`.
`compress`, `compress_down` (a string 'KEY=METHOD[,KEY=METHOD...]', or 'none'), `dp_clip`,
`dp_noise` and `dp_delta` may be set and swept like settings: they become the trial's
payload transforms (docs/compression.md), e.g. `fedavg: {compress: [none, "*=topk:0.01", "*=qsgd:4"]}`.
`--search grid` runs the Cartesian product of the lists of each algorithm; `--search
optuna` samples categorical choices over the same values.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from raycompo.configuration.config import RunConfig, resolve
from raycompo.errors import ConfigError, DataUnavailableError, RaycompoError

REQUIRED_KEYS = ("task", "algorithms")
OPTIONAL_KEYS = (
    "description", "full_task", "rounds", "metric", "mode", "samples", "seed", "eval_every", "offline", "settings",
)
DEFAULTS: dict[str, Any] = {
    "description": "", "full_task": None, "rounds": 30, "metric": "val_acc_worst", "mode": "max", "samples": 4,
    "seed": 0, "eval_every": 1, "offline": True, "settings": {},
}
MAX_GRID = 20000

SWEEP_OWNED = ("task", "algo", "rounds", "seed", "settings", "backend", "data_dir", "eval_every", "clients_per_actor",
               "cpus_per_actor", "gpus_per_actor")
"""RunConfig fields the sweep sets itself (from the space's own keys and the command line)."""


def run_keys() -> tuple[str, ...]:
    """The RunConfig fields a space may set (a top-level key: every trial's value) or sweep
    (a key of an algorithm's mapping): every field but the sweep's own (SWEEP_OWNED), e.g.
    `system`, `budget`, `eval_clients`, and any option the engine adds (an aggregation, its
    buffer and concurrency), read from RunConfig itself so that a new field needs nothing here."""
    return tuple(f.name for f in dataclasses.fields(RunConfig) if f.name not in SWEEP_OWNED)


def split_run_keys(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(RunConfig fields, task/algorithm settings) of a flat mapping (a point, `settings`)."""
    keys = set(run_keys())
    return ({k: v for k, v in values.items() if k in keys}, {k: v for k, v in values.items() if k not in keys})


def sweeps_dirs() -> list[Path]:
    """Where `--space NAME` is looked up: ./sweeps, then the repository's sweeps/."""
    repo = Path(__file__).resolve().parents[2] / "sweeps"
    dirs = [Path.cwd() / "sweeps", repo]
    out: list[Path] = []
    for d in dirs:
        if d.is_dir() and d.resolve() not in [o.resolve() for o in out]:
            out.append(d)
    return out


def available_spaces() -> list[str]:
    names = {p.stem for d in sweeps_dirs() for p in d.glob("*.y*ml") if p.suffix in (".yaml", ".yml")}
    return sorted(names)


def space_path(name: str) -> Path:
    """A space name (file stem in sweeps/) or a path to a YAML file."""
    p = Path(name)
    if p.suffix in (".yaml", ".yml") and p.is_file():
        return p
    for d in sweeps_dirs():
        for suffix in (".yaml", ".yml"):
            if (d / f"{name}{suffix}").is_file():
                return d / f"{name}{suffix}"
    avail = available_spaces()
    raise ConfigError(
        f"unknown space {name!r}; available spaces: {', '.join(avail) if avail else '(none found)'} "
        f"(files in {', '.join(str(d) for d in sweeps_dirs()) or 'sweeps/'}), or give a path to a .yaml file"
    )


@dataclass
class Space:
    name: str
    task: str
    algorithms: dict[str, dict[str, list[Any]]]
    description: str = ""
    full_task: str | None = None
    rounds: int = 30
    metric: str = "val_acc_worst"
    mode: str = "max"
    samples: int = 4
    seed: int = 0
    eval_every: int = 1
    offline: bool = True
    settings: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)
    """The space's top-level RunConfig keys (`system`, `budget`, ...: see `run_keys`)."""
    path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        import dataclasses

        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Space:
        return cls(**d)

    def swept_keys(self, algo: str | None = None) -> list[str]:
        algos = [algo] if algo else list(self.algorithms)
        keys: list[str] = []
        for a in algos:
            for k in self.algorithms[a]:
                if k not in keys:
                    keys.append(k)
        return keys

    def grid(self, algo: str) -> list[dict[str, Any]]:
        """The Cartesian product of `algo`'s lists, in file order (last key fastest)."""
        spec = self.algorithms[algo]
        keys = list(spec)
        return [dict(zip(keys, values)) for values in itertools.product(*(spec[k] for k in keys))]

    def grid_size(self, algo: str | None = None) -> int:
        algos = [algo] if algo else list(self.algorithms)
        return sum(math.prod(len(v) for v in self.algorithms[a].values()) for a in algos)

    def run_config(self, algo: str, point: dict[str, Any], *, full: bool = False, rounds: int | None = None,
                   seed: int | None = None, backend: str = "inline", data_dir: str | None = None,
                   **engine: Any) -> RunConfig:
        """The RunConfig of one trial (the same one `python -m raycompo.run` builds from its row):
        the space's RunConfig keys, then those of `settings` and of the point (`split_run_keys`)."""
        task = self.full_task if full else self.task
        settings, transforms = split_transforms({**self.settings, **point})
        fields, settings = split_run_keys(settings)
        return RunConfig(
            task=task, algo=algo, rounds=rounds or self.rounds, seed=self.seed if seed is None else seed,
            settings=settings, backend=backend, eval_every=self.eval_every, data_dir=data_dir,
            **{**self.run, **fields, **transforms}, **engine,
        )


TRANSFORM_KEYS = ("compress", "compress_down", "dp_clip", "dp_noise", "dp_delta")
"""Keys of a space's settings or points that are RunConfig fields (payload transforms), not
task or algorithm settings."""


def split_transforms(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(task and algorithm settings, RunConfig transform fields) of a trial's values; a
    compress value 'nw=topk:0.01,u=qsgd:4' becomes {'nw': 'topk:0.01', 'u': 'qsgd:4'} ('none'
    or '': {})."""
    settings = {k: v for k, v in values.items() if k not in TRANSFORM_KEYS}
    fields: dict[str, Any] = {}
    for key in TRANSFORM_KEYS:
        if key not in values:
            continue
        value = values[key]
        if key.startswith("compress"):
            text = "" if value is None else str(value).strip()
            pairs = [] if text.lower() in ("", "none") else [p.partition("=") for p in text.split(",")]
            bad = [k + s + m for k, s, m in pairs if not s or not k.strip() or not m.strip()]
            if bad:
                raise ConfigError(f"{key} {value!r}: expected 'KEY=METHOD[:PARAM][,KEY=METHOD...]' or 'none'")
            value = {k.strip(): m.strip() for k, _, m in pairs}
        fields[key] = value
    return settings, fields


def _fail(where: str, msg: str) -> ConfigError:
    return ConfigError(f"{where}: {msg}")


def load_space(name: str) -> Space:
    """Read and check the shape of a space file (not yet its settings: see `validate`)."""
    path = space_path(name)
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise _fail(f"space file {path}", f"not valid YAML: {exc}") from None
    return parse_space(raw, path)


def space_from_dict(raw: dict[str, Any], name: str = "custom") -> Space:
    """A space given as a dict (the Python API) with the keys of a space file, checked the
    same way. Algorithm keys and `task` may be classes: they become their specs."""
    from raycompo.configuration.plugins import spec_of

    raw = dict(raw)
    name = str(raw.pop("name", name))
    if isinstance(raw.get("task"), type):
        raw["task"] = spec_of(raw["task"], "task")
    if isinstance(raw.get("algorithms"), dict):
        raw["algorithms"] = {spec_of(k, "algorithm") if isinstance(k, type) else k: v
                             for k, v in raw["algorithms"].items()}
    return parse_space(raw, Path(f"{name}.yaml"), source=f"space {name} (a dict)")


def parse_space(raw: Any, path: Path, source: str | None = None) -> Space:
    """Check the shape of a space's mapping `raw` read from `path`; load its plugin
    classes (a relative 'file.py:Class' is looked up from the current folder, then from
    the space file's folder)."""
    where = source or f"space file {path}"
    if not isinstance(raw, dict):
        raise _fail(where, "must be a YAML mapping with keys task, algorithms, ...")
    allowed = REQUIRED_KEYS + OPTIONAL_KEYS + run_keys()
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise _fail(where, f"unknown key(s) {', '.join(map(str, unknown))}; allowed keys: {', '.join(allowed)}")
    missing = [k for k in REQUIRED_KEYS if k not in raw]
    if missing:
        raise _fail(where, f"missing key(s) {', '.join(missing)}")
    run = {k: raw[k] for k in run_keys() if k in raw}
    d = {**DEFAULTS, **{k: v for k, v in raw.items() if k not in run and (v is not None or k == "full_task")}}
    if not isinstance(d["task"], str):
        raise _fail(where, f"task must be a task name, got {d['task']!r}")
    if d["full_task"] is not None and not isinstance(d["full_task"], str):
        raise _fail(where, f"full_task must be a task name, got {d['full_task']!r}")
    for k in ("rounds", "samples", "eval_every"):
        if not isinstance(d[k], int) or isinstance(d[k], bool) or d[k] < 1:
            raise _fail(where, f"{k} must be an integer >= 1, got {d[k]!r}")
    if not isinstance(d["seed"], int) or d["seed"] < 0:
        raise _fail(where, f"seed must be an integer >= 0, got {d['seed']!r}")
    if d["mode"] not in ("max", "min"):
        raise _fail(where, f"mode must be 'max' or 'min', got {d['mode']!r}")
    if not isinstance(d["metric"], str):
        raise _fail(where, f"metric must be a column name, got {d['metric']!r}")
    if not isinstance(d["offline"], bool):
        raise _fail(where, f"offline must be true or false, got {d['offline']!r}")
    if not isinstance(d["settings"], dict):
        raise _fail(where, f"settings must be a mapping of setting -> value, got {d['settings']!r}")
    algos = d["algorithms"]
    if not isinstance(algos, dict) or not algos:
        raise _fail(where, "algorithms must be a non-empty mapping: algorithm -> {setting: [values]}")
    clean: dict[str, dict[str, list[Any]]] = {}
    for algo, spec in algos.items():
        spec = {} if spec is None else spec
        if not isinstance(spec, dict):
            raise _fail(where, f"algorithms.{algo} must be a mapping setting -> list of values, got {spec!r}")
        clean[str(algo)] = {}
        for key, values in spec.items():
            values = values if isinstance(values, list) else [values]
            if not values:
                raise _fail(where, f"algorithms.{algo}.{key} is an empty list")
            if any(isinstance(v, (dict, list)) for v in values):
                raise _fail(where, f"algorithms.{algo}.{key} must list scalar values, got {values!r}")
            if len(set(map(repr, values))) != len(values):
                raise _fail(where, f"algorithms.{algo}.{key} lists a value twice: {values!r}")
            clean[str(algo)][str(key)] = values
    d["algorithms"] = clean
    if "budget" in run and not isinstance(run["budget"], dict):
        raise _fail(where, f"budget must be a mapping of cost column to limit (e.g. {{sim_time: 3600}}), "
                           f"got {run['budget']!r}")
    space = Space(name=path.stem, path=str(path) if source is None else None, run=run, **d)
    load_plugins(space)
    return space


def plugin_specs(space: Space) -> dict[str, str]:
    """{spec: kind} of the space's tasks and algorithms given as 'file.py:Class' or
    'module:Class' (not registered names)."""
    from raycompo.configuration.plugins import is_spec_string

    out = {t: "task" for t in (space.task, space.full_task) if t and is_spec_string(t)}
    out.update({a: "algorithm" for a in space.algorithms if is_spec_string(a)})
    return out


def load_plugins(space: Space) -> None:
    """Load the space's plugin classes now (a ConfigError names a missing file or class),
    relative files from the current folder or the space file's folder."""
    from raycompo.configuration.plugins import load

    base = Path(space.path).parent if space.path else None
    for spec, kind in plugin_specs(space).items():
        try:
            load(kind, spec, base_dir=base)
        except ConfigError as exc:
            raise ConfigError(f"space {space.name}{f' ({space.path})' if space.path else ''}: {exc}") from None


def validate(space: Space, *, full: bool = False, data_dir: str | None = None, algorithms: list[str] | None = None) -> None:
    """Every value of every algorithm must resolve (known task, algorithm and settings,
    values in range; the whole grid when it is small); raises ConfigError naming the
    space file and the problem. Without the task's data (a download task), the checks
    that need it (the number of clients) are skipped."""
    if full and not space.full_task:
        raise ConfigError(f"space {space.name} has no full_task: --full is not available for it")
    for algo in algorithms or list(space.algorithms):
        if algo not in space.algorithms:
            raise ConfigError(f"space {space.name} has no algorithm {algo!r}; it has: {', '.join(space.algorithms)}")
        n = space.grid_size(algo)
        if n > MAX_GRID:
            raise ConfigError(f"space {space.name}: algorithm {algo} has a grid of {n} points, more than the "
                              f"{MAX_GRID} a grid search runs; give fewer values, or search with optuna")
        offline_ok = True
        for point in _check_points(space, algo):
            cfg = space.run_config(algo, point, full=full, data_dir=data_dir)
            try:
                if offline_ok:
                    try:
                        resolve(cfg)
                        continue
                    except DataUnavailableError:
                        offline_ok = False  # the task's data is not here: check without it
                check_without_data(cfg)
            except ConfigError as exc:
                raise ConfigError(f"space {space.name} ({space.path}), algorithm {algo}, point {point}: {exc}") from None


def _check_points(space: Space, algo: str, max_product: int = 32) -> list[dict[str, Any]]:
    """The whole grid when small; else each value of each setting once (the other
    settings at their first value): every value is checked, pairs only on small grids."""
    if space.grid_size(algo) <= max_product:
        return space.grid(algo)
    spec = space.algorithms[algo]
    first = {k: v[0] for k, v in spec.items()}
    return [{**first, k: value} for k, values in spec.items() for value in values]


def check_without_data(cfg: RunConfig) -> None:
    """`resolve` minus what needs the task's data (its number of clients): names, types
    and ranges of the settings."""
    resolve(cfg, check_clients=False)


def probe_metrics(space: Space, *, full: bool = False, data_dir: str | None = None) -> list[str]:
    """The columns of the task's rows: round 0 of an inline federation (evaluation only)."""
    from raycompo.engine.federation import Federation

    algo = next(iter(space.algorithms))
    cfg = space.run_config(algo, space.grid(algo)[0], full=full, data_dir=data_dir, rounds=1)
    try:
        fed = Federation(cfg)
        row = fed.initial_row()
        fed.close()
    except RaycompoError:
        raise
    except (OSError, RuntimeError, ValueError) as exc:
        raise ConfigError(f"space {space.name}: could not build task {cfg.task} to check the metric: {exc}") from None
    return [k for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]


def check_metric(space: Space, metric: str, columns: list[str]) -> None:
    if metric not in columns:
        raise ConfigError(
            f"metric {metric!r} is not produced by task {space.task}; its rows have: {', '.join(columns)}"
        )
