"""A sweep: one Ray Tune run over all algorithms of the space, recorded in one folder.

Each algorithm has its own searcher and budget (PerAlgorithmSearcher hands out trials
round-robin): `--search grid` gives Tune the grid points not yet run (ListSearcher);
`--search optuna` asks Ray Tune's OptunaSearch (TPE, categorical over the space's lists,
warm-started with the trials already recorded) through UniqueSearcher, which never runs a
configuration twice. One Tune run (not one per algorithm) lets trials of different
algorithms run side by side and reuse the same trial actors (`reuse_actors`: the process,
its imports and its cached data partition survive from one trial to the next).

`--population P` (tune/population.py, issue 42): each Tune trial is a population of up to P
trials that share every structural setting (`PopulationSearcher`), run as one computation
(`run_population_trial`, raycompo/engine/population.py), each recorded as a trial of its own;
Optuna is asked P configurations at a time (`BatchedOptunaSearch`, ask/tell), and the sweep
prints how the trials it ran group into populations. Without it, the sweep runs and records
as before (sweep.json has no `population`). With `--scheduler asha` Tune gets no scheduler:
each trial, alone or a population's member, is stopped on its own by ASHA's rule
(tune/member_asha.py, the decisions of Ray Tune's AsyncHyperBandScheduler) against the
sweep's rungs actor, which a resumed sweep fills with the values it had recorded.

A `Recorder` callback (in this process) collects each trial's rows and writes them when
the trial ends, and prints one progress line per finished trial.

`--resume DIR` reads DIR/sweep.json (the options and the space as they were) and runs
only what is missing: grid points without a finished row, or the Optuna samples still
owed per algorithm. Trials that were running when the sweep stopped start again from
round 0 (they had not been recorded), or, with `--checkpoint-every N`, from their last
checkpoint (tune/trial_checkpoints.py; trials.csv's `resumed_at` says from which round).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from raycompo.configuration.backends import get_backend
from raycompo.configuration.plugins import loaded
from raycompo.costs.axes import COST_AXES, missing_columns, where_from
from raycompo.errors import ConfigError
from raycompo.runfolder.failure import root_error
from raycompo.runfolder.results import error_line
from raycompo.tasks.sampler import DEFAULT_SAMPLER, RECORDED_BEFORE
from raycompo.tune.member_asha import earlier_rewards, start_rungs, stop_rungs
from raycompo.tune.pending import pending_trials, trial_needs, trials_at_once
from raycompo.tune.population import (
    auto_population,
    check_population,
    default_population,
    describe_populations,
    memory_bound,
    population_key,
    populations_handed,
    structure_points,
    too_few_members,
    trial_memory,
    without_population_form,
)
from raycompo.tune.population_search import MEMBER, MEMBERS, PopulationSearcher
from raycompo.tune.population_trial import run_population_trial
from raycompo.tune.results import SweepStore, _num, best_table, command_line
from raycompo.tune.searchers import ListSearcher, PerAlgorithmSearcher, UniqueSearcher, point_key
from raycompo.tune.space import (
    Space,
    check_metric,
    load_plugins,
    load_space,
    plugin_specs,
    probe_metrics,
    validate,
)
from raycompo.tune.trainable import TrialSpec, bundles, host_plan, run_trial, trial_config
from raycompo.tune.trial_checkpoints import (
    RESUMED_AT,
    TrialCheckpoints,
    checkpoints_of,
    forget_all,
    pending,
)

SEARCHES = ("optuna", "grid")
SCHEDULERS = ("none", "asha")


@dataclass
class SweepOptions:
    space: str = "dro"
    search: str = "optuna"
    samples: int | None = None
    """Optuna trials per algorithm (default: the space's `samples`)."""
    rounds: int | None = None
    metric: str | None = None
    mode: str | None = None
    scheduler: str = "none"
    max_concurrent: int | None = None
    backend: str = "inline"
    hosts_per_trial: int = 2
    driver_cpus: float | None = None
    cpus_per_actor: float = 0.25
    gpus_per_actor: float = 0.0
    full: bool = False
    data_dir: str | None = None
    seed: int | None = None
    algorithms: list[str] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    """Fixed settings of every trial, over the space's `settings` (--set)."""
    out: str | None = None
    reuse_actors: bool = True
    reuse_hosts: bool = True
    """--backend ray: a trial actor keeps its host actors for its next trial (trainable.py)."""
    optuna_seed: int = 0
    rank_at: str | None = None
    """A cost axis (samples, values, bytes, sim_time): rank the trials at equal cost
    (tune/equal_cost.py) instead of after the last round. The search itself is unchanged."""
    system: str | None = None
    """A simulated system for every trial (`--system`), over the space's `system` key."""
    budget: dict[str, float] | None = None
    """A cost budget for every trial (`--budget KEY=VALUE`), over the space's `budget` key."""
    checkpoint_every: int | None = None
    """`--checkpoint-every N`: each trial writes a checkpoint every N rounds into the sweep
    folder (tune/trial_checkpoints.py), so that `--resume` continues a killed sweep's running
    trials from there. None (default): no checkpoints; they start again from round 0."""
    population: int | str | None = None
    """`--population P`: trials per population (tune/population.py), an integer >= 1 or 'auto';
    each Tune trial runs a population of up to P trials as one computation, and Optuna is asked
    P configurations at a time. 1: one trial at a time, as before populations. None (default):
    'auto', or 1 where populations cannot run (--backend ray, --tracker;
    `population.default_population`)."""


@dataclass
class SweepOutcome:
    store: SweepStore
    best: dict[str, Any]
    interrupted: bool
    ran: int
    table: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    left: int = 0
    """Trials still to run (interrupted, or failed with an error)."""
    tune_path: str | None = None
    """This run's Ray Tune experiment folder (None when nothing was left to run)."""
    tensorboard_dir: str | None = None
    """Where TensorBoard finds the sweep's event files, of this run and earlier ones (None:
    none written, e.g. without tensorboardX)."""
    stopped: bool = False
    """Stopped before its end (Ctrl-C, SIGTERM, --stop-after); `interrupted` without it:
    the sweep ran to its end and trials failed."""


def trial_id(meta: dict[str, Any], algo: str, point: dict[str, Any]) -> str:
    key = json.dumps([meta["task"], algo, meta["rounds"], meta["seed"], point_key(point)])
    return f"{algo}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def check_options(opts: SweepOptions) -> None:
    """A new sweep's options that need no space: a ConfigError naming the first one out of range."""
    if opts.search not in SEARCHES:
        raise ConfigError(f"unknown --search {opts.search!r}; choose one of: {', '.join(SEARCHES)}")
    if opts.scheduler not in SCHEDULERS:
        raise ConfigError(f"unknown --scheduler {opts.scheduler!r}; choose one of: {', '.join(SCHEDULERS)}")
    for name, value in (("samples", opts.samples), ("rounds", opts.rounds), ("max-concurrent", opts.max_concurrent)):
        if value is not None and value < 1:
            raise ConfigError(f"--{name} must be >= 1, got {value}")
    every = opts.checkpoint_every
    if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
        raise ConfigError(f"--checkpoint-every must be an integer >= 1 (rounds), got {every!r}")


def prepare(opts: SweepOptions, resume: str | None = None, space: Space | None = None,
            trackers: Sequence[str] = ()) -> tuple[Space, dict[str, Any], SweepStore]:
    """Load and check everything (no trial starts): the space (`opts.space`, or `space`
    given as an object), its settings, the metric, the result folder, the population
    (`default_population`: `trackers`, the sweep's --tracker, turn it off). Raises ConfigError
    / DataUnavailableError."""
    if resume:
        if opts.checkpoint_every is not None:
            raise ConfigError(f"--checkpoint-every is set when a sweep starts: --resume {resume} goes on with the "
                              "interval its sweep.json records (options.checkpoint_every)")
        return _prepare_resume(resume, trackers)
    check_options(opts)
    backend = get_backend(opts.backend)  # a ConfigError naming the backends
    population, off = default_population(check_population(opts.population), backend.uses_ray, trackers)
    space = space if space is not None else load_space(opts.space)
    for key in opts.settings:
        swept = [a for a in space.algorithms if key in space.algorithms[a]]
        if swept:
            raise ConfigError(f"--set {key}=...: {key} is swept by space {space.name} for {', '.join(swept)}")
    space.settings = {**space.settings, **opts.settings}
    for key, value in (("system", opts.system), ("budget", opts.budget or None)):
        if value is None:
            continue
        swept = [a for a in space.algorithms if key in space.algorithms[a]]
        if swept:
            raise ConfigError(f"--{key}: {key} is swept by space {space.name} for {', '.join(swept)}")
        space.run[key] = dict(value) if isinstance(value, dict) else value
    algos = opts.algorithms or list(space.algorithms)
    mode = opts.mode or space.mode
    if mode not in ("max", "min"):
        raise ConfigError(f"--mode must be max or min, got {mode!r}")
    validate(space, full=opts.full, data_dir=opts.data_dir, algorithms=algos)
    metric = opts.metric or space.metric
    columns = probe_metrics(space, full=opts.full, data_dir=opts.data_dir)
    check_metric(space, metric, columns)
    if opts.rank_at is not None:
        check_rank_at(opts.rank_at, columns, space.task)
    out = Path(opts.out or f"sweep_results/{space.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    store = SweepStore(out)
    if store.exists() or store.trials_path.exists():
        raise ConfigError(f"{out} already holds a sweep; continue it with --resume {out}, or choose another --out")
    o = asdict(opts)
    del o["population"]  # recorded below as asked and as resolved
    meta: dict[str, Any] = {
        "space": space.to_dict(), "options": o, "algorithms": algos, "metric": metric, "mode": mode,
        "task": space.full_task if opts.full else space.task, "rounds": opts.rounds or space.rounds,
        "seed": space.seed if opts.seed is None else opts.seed,
        "samples": opts.samples or space.samples, "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "rank_at": opts.rank_at,
        "sampler": DEFAULT_SAMPLER,  # the default a trial draws with where the space sets none (`recorded_sampler`)
    }
    meta["space"]["name"] = space.name
    record_population(meta, space, opts, population, off)
    check_population_run(meta, trackers)
    return space, meta, store


def record_population(meta: dict[str, Any], space: Space, opts: Any, population: int | str,
                      off: str | None) -> None:
    """Into `meta` (sweep.json): the population asked (`default`, `auto` or P), the P the
    sweep runs with ('auto' resolved: `resolve_auto`) and, where off, why."""
    meta["population_asked"] = "default" if opts.population is None else population
    if population == "auto":
        population, off = resolve_auto(space, meta["algorithms"], opts, meta["samples"])
    meta["population"] = population
    if off:
        meta["population_off"] = off


def resolve_auto(space: Space, algos: list[str], opts: Any, samples: int) -> tuple[int, str | None]:
    """`--population auto` (the default): 1 and why where the sweep's populations would be
    too small to gain (`too_few_members`), else `auto_population` bounded by `auto_memory`."""
    from raycompo.configuration.plugins import load

    runs = {a: space.grid_size(a) if opts.search == "grid" else min(samples, space.grid_size(a))
            for a in algos}  # the grid's points or the Optuna samples of each algorithm
    base = str(Path(space.path).parent) if space.path else None
    structures = {a: structure_points(space.algorithms[a], load("algorithm", a, base_dir=base)) for a in algos}
    small = too_few_members(runs, structures)
    if small:
        return 1, small
    return auto_population(runs, memory=auto_memory(space, structures, opts)), None


def check_rank_at(axis: str, columns: list[str], task: str) -> None:
    """ConfigError unless `axis` is a cost axis whose columns the task's rows have."""
    if axis not in COST_AXES:
        raise ConfigError(f"unknown --rank-at {axis!r}; choose one of: {', '.join(COST_AXES)}")
    missing = missing_columns(columns, axis)
    if missing and axis == "sim_time":
        raise ConfigError("--rank-at sim_time needs the column sim_time, which a trial has only on a simulated "
                          "system: give the space a `system: PROFILE` key (or --system PROFILE, system= in "
                          "raycompo.tune), e.g. uniform or mobile")
    if missing:
        raise ConfigError(f"--rank-at {axis} needs the column(s) {', '.join(COST_AXES[axis])}, which the rows of "
                          f"task {task} lack ({', '.join(missing)}): {where_from(axis)}")


RESUME_OPTIONS = ("search", "scheduler", "backend", "hosts_per_trial", "driver_cpus", "cpus_per_actor", "gpus_per_actor",
                  "full", "data_dir")
"""The options of sweep.json that a resumed sweep reads."""


def auto_memory(space: Space, structures: dict[str, list[dict[str, Any]]], opts: Any,
                available: float | None = None) -> int:
    """The largest population of this sweep's trials that fits the memory `available` (default:
    this machine's): `memory_bound` of the largest per-trial and shared `trial_memory` over
    every structure of every algorithm (`structures`: each algorithm's `structure_points`, a
    tau or a batch size swept weighed at each of its values; step sizes do not change the memory)."""
    from raycompo.configuration.config import resolve
    from raycompo.engine.memory import available_local

    per_trial, shared = 0.0, 0.0
    for algo, points in structures.items():
        for point in points:
            cfg = space.run_config(algo, point, full=opts.full, data_dir=opts.data_dir)
            trial, common = trial_memory(resolve(cfg))
            per_trial, shared = max(per_trial, trial), max(shared, common)
    return memory_bound(per_trial, shared, available if available is not None else available_local())


def check_population_run(meta: dict[str, Any], trackers: Sequence[str] = ()) -> None:
    """A sweep whose trials run as populations (P > 1): they run in one process, so inline
    only, and without trackers (which log one run per Tune trial). (`--scheduler asha` stops
    members one by one: tune/member_asha.py.)"""
    if meta.get("population", 1) <= 1:
        return
    opts = meta["options"]
    if get_backend(opts["backend"]).uses_ray:
        raise ConfigError(f"--population {meta['population']} runs each population's trials in one process: it needs "
                          f"--backend inline, not {opts['backend']!r} (or --population 1)")
    if trackers:
        raise ConfigError(f"--population {meta['population']} runs several trials in one Tune trial, and --tracker "
                          f"{' '.join(trackers)} logs one run per Tune trial: leave out --population (each trial on "
                          "its own then) or --tracker")


def member_asha(meta: dict[str, Any]) -> bool:
    """Whether the sweep stops trials by ASHA (`--scheduler asha`): by its own rungs actor
    (tune/member_asha.py), for a trial alone as for a population's members, rather than by
    a Tune scheduler, so that a resumed sweep's rungs hold the trials it had recorded."""
    return meta["options"]["scheduler"] == "asha"


def _prepare_resume(folder: str, trackers: Sequence[str] = ()) -> tuple[Space, dict[str, Any], SweepStore]:
    """The sweep in `folder`, checked the way `run_sweep` will read it, before anything is
    written: a damaged file is one ConfigError naming it; its populations refuse `trackers`
    as a new sweep's do (`check_population_run`)."""
    store = SweepStore(folder)
    if not store.exists():
        raise ConfigError(f"--resume {folder}: no sweep there (no sweep.json)")
    meta = store.read_meta()
    store.check()
    try:
        missing = [k for k in RESUME_OPTIONS if k not in meta["options"]]
        if missing:
            raise KeyError(f"options lack {', '.join(missing)}")
        space = Space.from_dict(recorded_sampler(meta)["space"])
        load_plugins(space)
        validate(space, full=meta["options"]["full"], data_dir=meta["options"]["data_dir"], algorithms=meta["algorithms"])
        plan(space, meta, store)  # what is left: reads trials.csv's rows against the space
        check_population_run(meta, trackers)
    except ConfigError as exc:
        raise ConfigError(f"--resume {folder}: sweep.json describes a sweep that cannot run: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise store.damaged(store.meta_path, f"{type(exc).__name__}: {exc}") from None
    return space, meta, store


def recorded_sampler(meta: dict[str, Any]) -> dict[str, Any]:
    """`meta` (sweep.json) whose space names the sampler its trials ran with: a sweep started
    before 'keyed' was the default records no `sampler` and ran every trial with 'randperm'
    (RECORDED_BEFORE), so its trials left run with it too (a space that sets one keeps it)."""
    space = meta["space"]
    if "sampler" not in meta and "sampler" not in {**space.get("run", {}), **space.get("settings", {})}:
        space.setdefault("run", {})["sampler"] = RECORDED_BEFORE
    return meta


def trial_bundles(meta: dict[str, Any], n_clients: int) -> list[dict[str, float]]:
    opts = meta["options"]
    _, hosts = host_plan(n_clients, opts["hosts_per_trial"])
    ray_backend = get_backend(opts["backend"]).uses_ray
    driver_cpus = opts["driver_cpus"] if opts["driver_cpus"] is not None else (0.5 if ray_backend else 1.0)
    return bundles(opts["backend"], hosts, driver_cpus, opts["cpus_per_actor"], opts["gpus_per_actor"])


def check_resources(space: Space, meta: dict[str, Any]) -> None:
    """A trial whose placement group the cluster can never hold would wait forever: fail
    now instead (a cluster with an autoscaler may grow, so only without --address)."""
    import ray

    from raycompo.configuration.config import resolve

    opts = meta["options"]
    first = meta["algorithms"][0]
    n = resolve(space.run_config(first, space.grid(first)[0], full=opts["full"], data_dir=opts["data_dir"])).n_clients
    need = trial_needs(trial_bundles(meta, n))
    have = ray.cluster_resources()
    for k, v in need.items():
        if v > have.get(k, 0.0) + 1e-9:
            raise ConfigError(
                f"one trial needs {v:g} {k} (placement group {trial_bundles(meta, n)}) but the Ray cluster has "
                f"{have.get(k, 0.0):g}; lower --hosts-per-trial / --cpus-per-actor / --gpus-per-actor / --driver-cpus"
            )


def plan(space: Space, meta: dict[str, Any], store: SweepStore) -> dict[str, dict[str, Any]]:
    """Per algorithm: the points still to run (grid) or the samples still owed (optuna),
    and the finished ones (point, value) for warm starts."""
    opts = meta["options"]
    done = store.done_rows()
    metric = meta["metric"]
    out: dict[str, dict[str, Any]] = {}
    for algo in meta["algorithms"]:
        rows = done[done["algorithm"] == algo] if len(done) else done
        keys = list(space.algorithms[algo])
        finished = []
        for _, r in rows.iterrows():
            settings = json.loads(r["settings"])
            point = {k: settings[k] for k in keys if k in settings}
            value = _num(r.get(f"final_{metric}"))
            if r["status"] == "diverged" or value is None:
                value = -math.inf if meta["mode"] == "max" else math.inf
            finished.append((point, value))
        ids = set(rows["trial_id"]) if len(rows) else set()
        if opts["search"] == "grid":
            todo = [p for p in space.grid(algo) if trial_id(meta, algo, p) not in ids]
            out[algo] = {"todo": todo, "n": len(todo), "finished": finished}
        else:
            n = max(0, min(meta["samples"], space.grid_size(algo)) - len(finished))
            out[algo] = {"todo": None, "n": n, "finished": finished}
    return out



def trial_record(meta: dict[str, Any], space: Space, algo: str, point: dict[str, Any], rows: list[dict[str, Any]],
                 result: dict[str, Any], status: str, error: str) -> dict[str, Any]:
    """trials.csv's row of a finished trial: its settings, status, final and best values and
    the command that re-runs it."""
    metric = meta["metric"]
    cfg = space.run_config(algo, point, full=meta["options"]["full"], rounds=meta["rounds"], seed=meta["seed"],
                           backend=meta["options"]["backend"], data_dir=meta["options"]["data_dir"]
                           ).canonical().to_dict()  # its command finds a plugin from any folder
    final = rows[-1] if rows else {}
    rec: dict[str, Any] = {"trial_id": trial_id(meta, algo, point), "algorithm": algo, "task": cfg["task"],
                           "status": status, "rounds_done": int(final.get("round", 0)) if rows else 0}
    rec.update(point)
    for k, v in final.items():
        if k not in ("round", "status", "diverged", "best_round", "trial_time", RESUMED_AT) and not k.startswith("best_") and isinstance(v, (int, float)):
            rec[f"final_{k}"] = v
    if RESUMED_AT in final:  # continued from its checkpoint by --resume (tune/trial_checkpoints.py)
        rec[RESUMED_AT] = int(final[RESUMED_AT])
    if status == "diverged":
        rec[f"final_{metric}"] = -math.inf if meta["mode"] == "max" else math.inf
    rec[f"best_{metric}"] = final.get(f"best_{metric}")
    rec["best_round"] = final.get("best_round")
    rec["time_s"] = round(float(final.get("trial_time", result.get("time_total_s", 0.0))), 3)
    rec["seed"] = cfg["seed"]
    rec["rounds"] = cfg["rounds"]
    rec["settings"] = json.dumps(cfg["settings"])
    rec["command"] = command_line(cfg)
    rec["error"] = error
    return rec


def make_recorder(meta, space, store, printer, counter):
    from ray.tune import Callback
    from ray.tune.result import AUTO_RESULT_KEYS

    drop = set(AUTO_RESULT_KEYS) | {"trial_id", "done", "experiment_tag", "experiment_id", "should_checkpoint",
                                    "time_this_iter_s", "training_iteration"}
    metric = meta["metric"]
    order = space.swept_keys() + [f"final_{metric}", f"best_{metric}"]

    class Recorder(Callback):
        """Rows by (Tune trial, member): a population trial's members (`population_search`)
        are recorded as trials of their own, each with its point and its last row's status."""

        def __init__(self):
            self.rows: dict[tuple[str, Any], list[dict[str, Any]]] = {}
            self.last: dict[tuple[str, Any], dict[str, Any]] = {}
            self.dropped = 0

        def on_trial_result(self, iteration, trials, trial, result, **info):
            key = (trial.trial_id, result.get(MEMBER))
            row = {k: v for k, v in result.items() if k not in drop and k != MEMBER and not isinstance(v, dict)}
            self.rows.setdefault(key, []).append(row)
            self.last[key] = result

        def _keys(self, trial) -> list[tuple[str, Any]]:
            """The trial's keys: (id, None), or (id, i) for each member of a population."""
            if MEMBERS in trial.config:
                return [(trial.trial_id, i) for i in range(len(trial.config[MEMBERS]))]
            return [(trial.trial_id, None)]

        def _record(self, trial, key, status: str, error: str = ""):
            rows = self.rows.pop(key, [])
            result = self.last.pop(key, {})
            algo = trial.config["algorithm"]
            source = trial.config if key[1] is None else trial.config[MEMBERS][key[1]]
            point = {k: source[k] for k in space.algorithms[algo] if k in source}
            if rows and rows[-1].get("status") == "error":  # a population's member that failed
                status, error = "error", str(rows[-1].get("error", "error"))
                rows = rows[:-1]
            rec = trial_record(meta, space, algo, point, rows, result, status, error)
            store.record(rec, rows, order=order)
            counter["done"] += 1
            printer(rec, point)

        def on_trial_complete(self, iteration, trials, trial, **info):
            for key in self._keys(trial):
                rows = self.rows.get(key, [])
                status = rows[-1].get("status", "running") if rows else "running"
                if status == "running":  # stopped by an interruption: not finished (ASHA's last row says 'stopped')
                    self.rows.pop(key, None)
                    self.dropped += 1
                    continue
                self._record(trial, key, status)

        def on_trial_error(self, iteration, trials, trial, **info):
            msg = trial_error(trial)
            for key in self._keys(trial):  # a population's members that had ended keep their own status
                rows = self.rows.get(key, [])
                ended = rows[-1].get("status") if rows and key[1] is not None else None
                if ended in ("completed", "diverged", "stopped"):  # stopped: by ASHA (tune/member_asha.py)
                    self._record(trial, key, ended)
                else:
                    self._record(trial, key, "error", msg[:500])

    return Recorder()


def trial_error(trial: Any) -> str:
    """A failed Tune trial's error in one line: the error its code raised (the last line of the
    traceback Tune wrote to the trial's error file: `get_error()` is not set yet when the
    callbacks hear of it), else Tune's; 'error' where neither can be read."""
    path = getattr(trial, "error_file", None)
    try:
        text = Path(path).read_text() if path and Path(path).is_file() else ""
    except OSError:
        text = ""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if lines:
        return lines[-1].strip()
    err = trial.get_error()
    return error_line(root_error(err)) if err else "error"


def _progress_printer(meta: dict[str, Any], total: int, stream, start: float, progress=None) -> Callable:
    """One line per finished trial; with `progress` (a `raycompo.watch.progress.SweepProgress`)
    the lines go above its bar (trials done / total, best so far, ETA) on a terminal."""
    metric = meta["metric"]
    state = {"n": 0}

    def show(rec: dict[str, Any], point: dict[str, Any]) -> None:
        state["n"] += 1
        v = rec.get(f"final_{metric}")
        vs = f"{v:.4f}" if isinstance(v, (int, float)) and math.isfinite(v) else "-"
        b = rec.get(f"best_{metric}")
        bs = f"{b:.4f}" if isinstance(b, (int, float)) and math.isfinite(b) else "-"
        if rec["status"] == "diverged":  # its best before the divergence is no result: it ranks last
            note = f"diverged at round {rec.get('rounds_done', '?')}, ranked last"
        elif rec["status"] == "error":
            note = "failed, not ranked"
        else:
            note = f"best {bs}"
        settings = " ".join(f"{k}={v}" for k, v in point.items())
        elapsed = time.perf_counter() - start
        line = (f"[{state['n']:>3}/{total}] {rec['algorithm']:<8} {settings:<32} {metric} {vs} ({note})  "
                f"{rec['status']}{' ' + rec['error'] if rec.get('error') else ''}  {rec['time_s']:.1f}s  [{elapsed:.0f}s]")
        if progress is not None:
            ok = rec["status"] in ("completed", "stopped")
            progress.done(line, value=v if ok else None, label=f"{rec['algorithm']} {settings}".strip())
        else:
            print(line, file=stream or sys.stderr, flush=True)  # looked up now: Tune pickles its callbacks

    return show


def tune_loggers() -> list[Any]:
    """Ray Tune's own per-trial files, so that Tune's tools read a sweep: result.json (every
    report) and progress.csv per trial, which `tune.ExperimentAnalysis(<tune_path>)` reads,
    and, when tensorboardX is installed (ray[tune] brings it), TensorBoard event files:
    the same three as Tune's automatic loggers, whatever TUNE_DISABLE_AUTO_CALLBACK_LOGGERS
    says."""
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    loggers: list[Any] = [JsonLoggerCallback(), CSVLoggerCallback()]
    try:
        from ray.tune.logger import TBXLoggerCallback

        loggers.append(TBXLoggerCallback())  # ImportError without tensorboardX
    except ImportError:
        pass
    return loggers


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Join `address` or start a local Ray (127.0.0.1 only) for a sweep: engine/ray_start.py,
    with the connection time limit and no dashboard (`ray start --head` keeps one up)."""
    from raycompo.engine.ray_start import ensure_ray as start

    start(address, include_dashboard=False, num_cpus=num_cpus, quiet=True)


def _one_process_per_folder(fn):
    """`run_sweep` holds the sweep folder's lock while it runs (SweepStore.lock)."""

    @functools.wraps(fn)
    def locked(space: Space, meta: dict[str, Any], store: SweepStore, *args: Any, **kwargs: Any) -> SweepOutcome:
        with store.lock():
            return fn(space, meta, store, *args, **kwargs)

    return locked


@_one_process_per_folder
def run_sweep(space: Space, meta: dict[str, Any], store: SweepStore, *, max_concurrent: int | None = None,
              stream=None, quiet: bool = False, stop_after: int | None = None,
              trackers: list[str] | None = None) -> SweepOutcome:
    """Run what `plan` says is left, in one Tune run; write the result files.
    `stop_after`: stop the sweep (as Ctrl-C does) once this many trials have finished.
    `trackers`: 'mlflow' / 'wandb': each trial also logged there by Ray Tune's own
    callbacks (raycompo/watch/trackers.py), into the sweep folder by default."""
    _import_tune_quietly()
    opts = meta["options"]
    metric, mode = meta["metric"], meta["mode"]
    if not store.exists():
        store.write_meta(meta)
    store.forget_unfinished()
    todo = plan(space, meta, store)
    total = sum(t["n"] for t in todo.values())
    start = time.perf_counter()
    progress = None
    if not quiet:
        from raycompo.watch.progress import SweepProgress

        progress = SweepProgress(total, metric=metric, mode=mode, unit="trial", stream=stream)
    printer = _progress_printer(meta, total, stream, start, progress) if not quiet else (lambda rec, point: None)
    counter = {"done": 0}
    max_conc = max_concurrent or opts.get("max_concurrent")
    if not quiet:
        _announce(space, meta, store, todo, total, stream)
    interrupted, tune_path = False, None
    rungs, handle = (start_rungs(meta["rounds"], earlier_rewards(store.logged_rows(), metric, mode, meta["rounds"]))
                     if total and member_asha(meta) else (None, None))  # one by one; a resumed sweep's rungs as they were
    try:
        if total:
            recorder_parts = (printer, counter)
            tune_path, interrupted = _fit(space, meta, store, todo, total, recorder_parts, progress, rungs,
                                          max_concurrent=max_conc, stop_after=stop_after, trackers=trackers,
                                          stream=stream, quiet=quiet)
    finally:
        if handle is not None:
            stop_rungs(handle)
    return _outcome(space, meta, store, interrupted, counter["done"], tune_path)


def _fit(space: Space, meta: dict[str, Any], store: SweepStore, todo: dict[str, dict[str, Any]], total: int,
         recorder_parts: tuple[Callable, dict[str, int]], progress: Any, rungs: str | None, *,
         max_concurrent: int | None, stop_after: int | None, trackers: list[str] | None, stream: Any,
         quiet: bool) -> tuple[str, bool]:
    """One Tune run of the `total` trials left: (its experiment folder, whether it was
    interrupted). `rungs`: the sweep's ASHA rungs actor (`--scheduler asha`, tune/member_asha.py;
    Tune has no scheduler of its own)."""
    import ray
    from ray import tune

    opts = meta["options"]
    metric, mode = meta["metric"], meta["mode"]
    printer, counter = recorder_parts
    checkpoints = checkpoints_of(store.dir, opts.get("checkpoint_every"))
    spec, n_clients = _trial_spec(space, meta, checkpoints)
    trainable = _trainable(spec, n_clients, meta, rungs)
    searcher = _searcher(space, meta, continued_first(space, todo, checkpoints, spec))
    recorder = make_recorder(meta, space, store, printer, counter)
    loggers = tune_loggers()
    if trackers:
        from raycompo.watch.trackers import tune_callbacks

        loggers += tune_callbacks(trackers, store.dir, space.name)
    stopper = _StopAfter(counter, stop_after) if stop_after else None
    tuner = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            search_alg=searcher, metric=metric, mode=mode, num_samples=total,
            max_concurrent_trials=max_concurrent, reuse_actors=opts.get("reuse_actors", True),
            trial_dirname_creator=lambda trial: trial.trial_id,
        ),
        run_config=tune.RunConfig(
            name=f"{space.name}-{time.strftime('%Y%m%d-%H%M%S')}", storage_path=str((store.dir / "tune").resolve()),
            callbacks=[recorder, *loggers], verbose=0, stop=stopper,
        ),
    )
    if progress is not None:
        progress.begin()
    # with max_concurrent, Tune keeps that many pending (its ConcurrencyLimiter); else as
    # many as the cluster runs at once, so that their actors start together (tune/pending.py)
    try:
        pending = contextlib.nullcontext() if max_concurrent else \
            pending_trials(min(trials_at_once(trial_bundles(meta, n_clients), ray.cluster_resources()), total))
        with pending:
            grid = tuner.fit()
    finally:
        if progress is not None:
            progress.close()
    interrupted = bool(counter.get("stopping")) or _was_interrupted(grid) or recorder.dropped > 0
    if meta.get("population_off") and not quiet:
        print(f"populations: off ({meta['population_off']})", file=stream or sys.stderr, flush=True)
    elif meta.get("population", 1) > 1 and not quiet:
        groups = (searcher.handed if isinstance(searcher, PopulationSearcher)
                  else populations_handed(searcher.handed, meta["population"], meta))
        print(describe_populations(groups, meta["population"], without_population_form(groups, meta)),
              file=stream or sys.stderr, flush=True)
    return grid.experiment_path, interrupted


def _import_tune_quietly() -> None:
    """Import Ray Tune and Optuna with their own output turned down: Tune's tables and
    logs, tensorboardX's warnings and Optuna's notes (the sweep prints one line per trial)."""
    import logging

    os.environ["RAY_AIR_NEW_OUTPUT"] = "0"  # Tune's own tables off (verbose=0): one line per trial instead
    for name in ("ray.tune", "ray.air", "ray.train", "tensorboardX"):  # tensorboardX: "NaN or Inf found" of diverged trials
        logging.getLogger(name).setLevel(logging.ERROR)
    import optuna
    from ray import tune  # noqa: F401  (imported once its loggers are quiet)
    from ray.tune.search.optuna import OptunaSearch  # noqa: F401

    optuna.logging.set_verbosity(optuna.logging.WARNING)


def _announce(space: Space, meta: dict[str, Any], store: SweepStore, todo: dict[str, dict[str, Any]], total: int,
              stream) -> None:
    """The sweep's first line: its task, search, rounds, trials to run (and done), backend and folder."""
    opts = meta["options"]
    already = sum(len(t["finished"]) for t in todo.values())
    print(f"sweep {space.name}: task {meta['task']}, {opts['search']} search, {meta['rounds']} rounds per trial, "
          f"{total} trial(s) to run" + (f" ({already} already done)" if already else "") +
          f", backend {opts['backend']}; results in {store.dir}", file=stream or sys.stderr, flush=True)


def continued_first(space: Space, todo: dict[str, dict[str, Any]], checkpoints: TrialCheckpoints | None,
                    spec: TrialSpec) -> dict[str, dict[str, Any]]:
    """`todo` with the trials a killed sweep was running (those holding a checkpoint,
    tune/trial_checkpoints.py) first: at the head of a grid's points, or as an Optuna
    algorithm's `first` configurations, so that they continue from their checkpoints."""
    if checkpoints is None:
        return todo
    candidates = {}
    for algo, t in todo.items():
        if t["n"] == 0:
            continue
        done = {point_key(p) for p, _ in t["finished"]}
        candidates[algo] = t["todo"] if t["todo"] is not None else [p for p in space.grid(algo) if point_key(p) not in done]
    held = pending(checkpoints, candidates, lambda algo, point: trial_config(spec, algo, point))
    out = dict(todo)
    for algo, points in held.items():
        keys = {point_key(p) for p in points}
        if todo[algo]["todo"] is not None:
            out[algo] = {**todo[algo], "todo": points + [p for p in todo[algo]["todo"] if point_key(p) not in keys]}
        else:
            out[algo] = {**todo[algo], "first": points[: todo[algo]["n"]]}
    return out


def _trial_spec(space: Space, meta: dict[str, Any], checkpoints: TrialCheckpoints | None) -> tuple[TrialSpec, int]:
    """What every trial shares (every algorithm's base RunConfig, the hosts, the plugins,
    where trials keep their checkpoints) and the task's number of clients."""
    from raycompo.configuration.config import resolve

    opts = meta["options"]
    first = meta["algorithms"][0]
    n = resolve(space.run_config(first, space.grid(first)[0], full=opts["full"], data_dir=opts["data_dir"])).n_clients
    per, hosts = host_plan(n, opts["hosts_per_trial"])
    ray_backend = get_backend(opts["backend"]).uses_ray
    bases = {
        algo: space.run_config(algo, {}, full=opts["full"], rounds=meta["rounds"], seed=meta["seed"],
                               backend=opts["backend"], data_dir=opts["data_dir"],
                               clients_per_actor=per if ray_backend else None,
                               cpus_per_actor=opts["cpus_per_actor"], gpus_per_actor=opts["gpus_per_actor"]).to_dict()
        for algo in meta["algorithms"]
    }
    # The user's own classes travel with every trial (pickled by value where they are not
    # installed packages), so a trial on a node without the user's files still finds them.
    spec = TrialSpec(bases=bases, metric=meta["metric"], mode=meta["mode"], hosts=hosts,
                     reuse_hosts=opts.get("reuse_hosts", True), classes=loaded(plugin_specs(space)),
                     checkpoints=checkpoints)
    return spec, n


def _trainable(spec: TrialSpec, n: int, meta: dict[str, Any], rungs: str | None = None) -> Any:
    """Tune's trainable: `run_trial` with `spec`, in a placement group that holds one trial's
    driver and hosts for a task of `n` clients (`run_population_trial` with `--population P`,
    told the member-ASHA actor `rungs`)."""
    from ray import tune

    pgf = tune.PlacementGroupFactory(trial_bundles(meta, n))
    if meta.get("population", 1) > 1:  # a population per trial
        return tune.with_resources(tune.with_parameters(run_population_trial, spec=spec, rungs=rungs), pgf)
    return tune.with_resources(tune.with_parameters(run_trial, spec=spec, rungs=rungs), pgf)


def _searcher(space: Space, meta: dict[str, Any], todo: dict[str, dict[str, Any]]) -> Any:
    """The trials left, algorithm by algorithm: the grid points not yet run (ListSearcher),
    or Optuna's samples warm-started with the finished trials, never one twice (UniqueSearcher)."""
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    from raycompo.tune.batched_search import BatchedOptunaSearch

    opts = meta["options"]
    metric, mode = meta["metric"], meta["mode"]
    searchers: dict[str, Any] = {}
    for algo, t in todo.items():
        if t["n"] == 0:
            continue
        if opts["search"] == "grid" or not space.algorithms[algo]:
            # nothing swept (`fedavg: {}`): its one configuration, the defaults, is the grid
            todo_points = t["todo"] if t["todo"] is not None else space.grid(algo)
            searchers[algo] = ListSearcher(todo_points, metric=metric, mode=mode)
            continue
        dist = {k: optuna.distributions.CategoricalDistribution(v) for k, v in space.algorithms[algo].items()}
        finished = t["finished"]
        inner: Any
        if meta.get("population", 1) > 1:  # a population of P configurations asked at once
            inner = BatchedOptunaSearch(dist, metric=metric, mode=mode, population=meta["population"],
                                        seed=opts.get("optuna_seed", 0), finished=finished)
        else:
            inner = OptunaSearch(
                space=dist, metric=metric, mode=mode, seed=opts.get("optuna_seed", 0),
                points_to_evaluate=[p for p, _ in finished] or None,
                evaluated_rewards=[v for _, v in finished] or None,
            )
        searchers[algo] = UniqueSearcher(inner, {point_key(p): v for p, v in finished}, metric=metric, mode=mode,
                                         first=t.get("first"))
    searcher = PerAlgorithmSearcher(searchers, {a: t["n"] for a, t in todo.items()}, metric=metric, mode=mode)
    if meta.get("population", 1) > 1:  # each Tune trial a population of up to P trials (tune/population_search.py)
        known: dict[str, frozenset[str]] = {}  # each algorithm's per-row settings, read once for the sweep
        return PopulationSearcher(searcher, meta["population"], lambda config: population_key(config, meta, known),
                                  metric=metric, mode=mode)
    return searcher


def _outcome(space: Space, meta: dict[str, Any], store: SweepStore, interrupted: bool, ran: int,
             tune_path: str | None) -> SweepOutcome:
    """What the sweep came to, its metrics and best settings written: what is left, the
    best table, the trials by status, TensorBoard's folder."""
    store.forget_unfinished()
    left = sum(t["n"] for t in plan(space, meta, store).values())
    stopped = interrupted
    interrupted = interrupted or left > 0  # Ctrl-C, --stop-after, or failed trials: --resume runs the rest
    if not interrupted:
        forget_all(store.dir)  # nothing to continue: no checkpoint folder stays (tune/trial_checkpoints.py)
    store.write_metrics()
    best = store.write_best(meta)
    table = best_table(best, {a: list(space.algorithms[a]) for a in meta["algorithms"]})
    counts = store.trials()["status"].value_counts().to_dict() if store.trials_path.exists() else {}
    events = store.dir / "tune"  # TensorBoard's files of every run of the sweep (tensorboardX)
    tensorboard = str(events) if events.is_dir() and next(events.rglob("events.out.tfevents*"), None) else None
    return SweepOutcome(store, best, interrupted, ran, table, counts, left, tune_path, tensorboard, stopped)


def _stop_after_class():
    from ray.tune import Stopper

    class StopAfter(Stopper):
        """Ends the whole sweep once `n` trials have finished (running ones are dropped)."""

        def __init__(self, counter: dict[str, int], n: int):
            self.counter, self.n = counter, n

        def __call__(self, trial_id, result) -> bool:
            return False

        def stop_all(self) -> bool:
            if self.counter["done"] >= self.n:
                self.counter["stopping"] = 1
            return bool(self.counter.get("stopping"))

    return StopAfter


def _StopAfter(counter, n):  # noqa: N802
    return _stop_after_class()(counter, n)


def _was_interrupted(grid) -> bool:
    try:
        from ray.tune.experiment import Trial

        trials = grid._experiment_analysis.trials
        return any(t.status not in (Trial.TERMINATED, Trial.ERROR) for t in trials)
    except Exception:
        return False
