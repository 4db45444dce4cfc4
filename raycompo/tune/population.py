"""Populations of trials (issue 42): the trials of a sweep that one batched computation can
run side by side, one row per trial.

The trials of a population share everything that changes shapes or control flow: the
algorithm, the task, the rounds, the evaluation schedule, the seed (so the same random
streams, keyed by (seed, client, round, step), draw the same cohorts and batches) and every
structural setting. They differ only in *per-row* settings, scalars that only scale the
arithmetic of a row: step sizes (lr, eta), moving-average and momentum weights (gamma,
alpha), regularizations (lam, q), ...

The rule (`per_row_settings`), read from the algorithm's Settings dataclass: a field whose
declared type is exactly `float` is per-row; everything else is structural, namely integers
(tau, p, I, batch sizes, the cohort size m, evaluation steps), strings (objective,
normalizer), booleans (first_order), optional floats (None picks another code path:
eval_lr, personal_lr), the task's settings (data, model) and the RunConfig fields a space
sweeps (system, budget, compression, DP noise). A float that steers control flow in spite
of its type is declared in CONTROL_FLOW_FLOATS, by the Settings class that declares it.
"""

from __future__ import annotations

import dataclasses
import itertools
import typing
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

from raycompo.algorithms.base import Algorithm
from raycompo.errors import ConfigError

T = TypeVar("T")

CONTROL_FLOW_FLOATS: dict[str, tuple[str, ...]] = {
    # CVaR keeps the ceil(alpha n) largest losses: alpha sets a shape
    "raycompo.algorithms.fastdro.FastDROSettings": ("cvar_alpha",),
}
"""Settings class (module.qualname) -> its float fields that are structural all the same;
a subclass inherits the entry."""

AUTO_MAX = 32
"""The largest population `--population auto` forms."""


def per_row_settings(algo_cls: type[Algorithm]) -> frozenset[str]:
    """The settings of `algo_cls` (an Algorithm class) that may differ within a population:
    its Settings fields typed `float`, less CONTROL_FLOW_FLOATS (see the module docstring)."""
    settings = algo_cls.Settings
    hints = typing.get_type_hints(settings)
    floats = {f.name for f in dataclasses.fields(settings) if hints.get(f.name) is float}
    for klass in settings.__mro__:
        floats -= set(CONTROL_FLOW_FLOATS.get(f"{klass.__module__}.{klass.__qualname__}", ()))
    return frozenset(floats)


def population_key(config: Mapping[str, Any], meta: Mapping[str, Any],
                   known: dict[str, frozenset[str]] | None = None) -> tuple[Any, ...]:
    """The structural key of one trial: trials with equal keys may share a population.

    `config`: the trial's config as the sweep's searcher hands it to Tune (`algorithm` and
    the swept values of its point); `meta`: the sweep's meta (sweep.json: task, rounds, seed,
    space). The values fixed for the whole sweep (`settings`, `--set`, the backend) are the
    same for every trial and are not in the key. `known`: a sweep's {algorithm: its
    `per_row_settings`}, filled on first use (a sweep asks for hundreds of keys; loading the
    algorithm by name reads the installed entry points' state each time, 2-3 ms)."""
    from raycompo.configuration.plugins import load

    algo = config["algorithm"]
    per_row = known.get(algo) if known is not None else None
    if per_row is None:
        path = meta.get("space", {}).get("path")
        per_row = per_row_settings(load("algorithm", algo, base_dir=_folder(path)))
        if known is not None:
            known[algo] = per_row
    structure = tuple(
        (k, config[k]) for k in sorted(config) if k != "algorithm" and k not in per_row
    )
    return (
        algo,
        meta["task"],
        meta["rounds"],
        meta["seed"],
        meta.get("space", {}).get("eval_every"),
        structure,
    )


def structure_points(spec: Mapping[str, Sequence[Any]], algo_cls: type[Algorithm]) -> list[dict[str, Any]]:
    """One point of a space's algorithm `spec` (key -> its list of values) per structure: the
    product of its structural lists (`per_row_settings` of `algo_cls` left out), each per-row
    setting at its first value. What `--population auto`'s memory bound weighs."""
    per_row = per_row_settings(algo_cls)
    keys = list(spec)
    lists = [list(spec[k])[:1] if k in per_row else list(spec[k]) for k in keys]
    return [dict(zip(keys, values)) for values in itertools.product(*lists)]


def _folder(path: str | None) -> str | None:
    from pathlib import Path

    return str(Path(path).parent) if path else None


def group_populations(
    points: Sequence[T], size: int, key: Callable[[T], Hashable]
) -> list[list[T]]:
    """`points` split into populations of at most `size` points with equal `key`s, in order:
    a population lists its points in their order in `points`, and the populations come in
    the order of their first points. Each key's points fill ceil(count / size) populations
    (all full but its last)."""
    if size < 1:
        raise ValueError(f"a population holds at least 1 trial, got size {size}")
    filling: dict[Hashable, list[T]] = {}
    out: list[list[T]] = []
    for point in points:
        k = key(point)
        group = filling.get(k)
        if group is None or len(group) >= size:
            group = filling[k] = []
            out.append(group)
        group.append(point)
    return out


def describe_populations(populations: Sequence[Sequence[Mapping[str, Any]]], size: int,
                         apart: Sequence[str] = ()) -> str:
    """One line: 'populations: 4 of up to 8 trials (fedavg: 2, comfedl: 2)', the count of
    populations per algorithm in the order they first appear; then, for the algorithms
    `apart` (`without_population_form`), that their trials were each computed on their own."""
    per_algo: dict[str, int] = {}
    for population in populations:
        algo = str(population[0].get("algorithm", "?")) if population else "?"
        per_algo[algo] = per_algo.get(algo, 0) + 1
    counts = ", ".join(f"{a}: {n}" for a, n in per_algo.items())
    line = f"populations: {len(populations)} of up to {size} trial{'s' if size != 1 else ''} ({counts or 'none'})"
    if apart:
        line += (f"; {', '.join(apart)} ha{'s' if len(apart) == 1 else 've'} no population form: "
                 "their trials ran side by side in one process, each computed on its own")
    return line


def has_population_form(algo_cls: type[Algorithm]) -> bool:
    """Whether an algorithm class declares phases a population runs as one computation (its
    own `population_phases`: a subclass does not inherit them, engine/population.py)."""
    return bool(algo_cls.__dict__.get("population_phases"))


def without_population_form(populations: Sequence[Sequence[Mapping[str, Any]]], meta: Mapping[str, Any]) -> list[str]:
    """The algorithms of populations of several trials that have no population form."""
    from raycompo.configuration.plugins import load

    path = meta.get("space", {}).get("path")
    algos = dict.fromkeys(str(p[0]["algorithm"]) for p in populations if len(p) > 1)
    return [a for a in algos if not has_population_form(load("algorithm", a, base_dir=_folder(path)))]


def check_population(value: Any) -> int | str | None:
    """`--population` / `population=` as given: None (not given: `default_population`),
    'auto', or an integer >= 1 (a digit string is read as one).
    Raises ConfigError otherwise."""
    if value is None or value == "auto":
        return value
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"--population must be an integer >= 1 or 'auto', got {value!r}")
    return value


def default_population(given: int | str | None, uses_ray: bool, trackers: Sequence[str] = ()
                       ) -> tuple[int | str, str | None]:
    """The population a sweep runs with, and why populations are off where they are: `given`
    (`check_population`) when the user gave one, else 'auto', except where a population cannot
    run, which gets 1 (each trial on its own, as before populations) and the reason:
    `uses_ray` (a population runs in one process) or `trackers` (Ray Tune's tracker callbacks
    log one run per Tune trial, which would mix a population's members)."""
    if given is not None:
        return given, None
    if uses_ray:
        return 1, "--backend ray runs each trial on host actors of its own; populations need --backend inline"
    if trackers:
        return 1, (f"--tracker {' '.join(trackers)} logs one run per Tune trial, which would mix a "
                   "population's members; each trial ran on its own")
    return "auto", None


AUTO_MIN_MEMBERS = 4.0
"""`auto` forms populations only where they would hold at least this many trials on average.
Measured on 2 cores (docs/benchmarks.md): the README's quick start, whose Optuna samples
spread over 3 values of the structural tau (about 2.7 trials a population), took 64-71 s
with populations against 50-52 s without; a grid of 4 trials a population 1.23x faster,
of 8 trials 2.6x (`python -m raycompo.bench population --sweep --population 4` / `8`)."""


def too_few_members(runs: Mapping[str, int], structures: Mapping[str, Sequence[Mapping[str, Any]]],
                    least: float = AUTO_MIN_MEMBERS) -> str | None:
    """Why `auto` leaves populations off, or None: the trials to run per algorithm (`runs`)
    spread over its structures (`structures`: its `structure_points`) make on average fewer
    than `least` trials a population (sum of runs / sum of min(runs, structures))."""
    total = sum(runs.values())
    groups = sum(min(n, max(1, len(structures.get(a, ())))) for a, n in runs.items())
    mean = total / max(groups, 1)
    if mean >= least:
        return None
    swept = sorted({k for points in structures.values() for k in points[0]
                    if len({repr(p[k]) for p in points}) > 1}) if structures else []
    over = f" (the structural {', '.join(swept)} swept)" if swept else ""
    return (f"auto: about {mean:.1f} trials a population, {total} trials over {groups} structures{over}; "
            f"fewer than {least:g}, where one trial at a time is faster; --population P forms them anyway")


AUTO_MEMORY_FRACTION = 0.5
"""The share of the memory available when a sweep starts that `auto`'s population may fill."""
TRIAL_BYTES = 32 * 2**20
"""One trial's own memory in a population besides its clients' states (measured: 1-9 MB per
added trial, `python -m raycompo.bench population --memory`; rounded up)."""


def memory_bound(per_trial: float, shared: float, available: float,
                 fraction: float = AUTO_MEMORY_FRACTION) -> int:
    """The largest P with `shared + P * per_trial <= fraction * available` (bytes), at least
    1: `shared` is held once per population (the process, the task's data), `per_trial` by
    every trial (`TRIAL_BYTES` plus its client states, engine/memory.py)."""
    room = fraction * available - shared
    return max(1, int(room // per_trial)) if per_trial > 0 else AUTO_MAX


def auto_population(trials_per_algorithm: Mapping[str, int], limit: int = AUTO_MAX,
                    memory: int | None = None) -> int:
    """`--population auto`: as many trials as the algorithm with the most trials to run
    (its grid points or its Optuna samples), at most `limit` and at most `memory` (the
    `memory_bound` of the sweep's trials, None: unbounded), at least 1."""
    size = max(1, min(limit, max(trials_per_algorithm.values(), default=1)))
    return size if memory is None else max(1, min(size, memory))


def trial_memory(resolved: Any) -> tuple[float, float]:
    """(per trial, shared) bytes of a population of trials like `resolved` (engine/memory.py's
    estimate of one inline run, split): shared, the process and the client data; per trial,
    the rest (client states, their index, the cohort draw, the checkpoint) plus `TRIAL_BYTES`."""
    from raycompo.engine.memory import estimate

    parts = estimate(resolved, ray=False).parts
    shared = parts.get("processes", 0.0) + parts.get("client data", 0.0)
    return sum(parts.values()) - shared + TRIAL_BYTES, shared


def populations_handed(
    handed: Sequence[tuple[int, Mapping[str, Any]]], size: int, meta: Mapping[str, Any]
) -> list[list[Mapping[str, Any]]]:
    """The populations of the configs a sweep handed to Tune (`PerAlgorithmSearcher.handed`:
    (batch, config) pairs): configs asked in the same batch (one Optuna population; 0 for
    every point of a grid) with equal `population_key`s, at most `size` per population."""
    known: dict[str, frozenset[str]] = {}
    groups = group_populations(list(handed), size, key=lambda h: (h[0], population_key(h[1], meta, known)))
    return [[config for _, config in group] for group in groups]
