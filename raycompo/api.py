"""The Python API: `raycompo.run` and `raycompo.resume` (here) and `raycompo.tune` (in the
`tune` package, tune/api.py, which sits above this module).

    import raycompo

    result = raycompo.run("dro-mnist5k", "comfedl", rounds=20, settings={"lr": 0.1})
    result.metrics            # a DataFrame: the rows and columns of metrics.csv
    result.status, result.config

    sweep = raycompo.tune("dro", search="grid", rounds=5)
    sweep.trials, sweep.best  # a DataFrame of trials; the best settings per algorithm

Each takes what the command line takes (`python -m raycompo.run`, `python -m
raycompo.tune`) as keyword arguments, and raises a `raycompo.RaycompoError` subclass on
bad input (`ConfigError`, `DataUnavailableError`, `CorruptDataError`) where the command
line prints the message and exits 2.

`raycompo.run` and `raycompo.tune` are also the modules behind ``python -m raycompo.run``
and ``python -m raycompo.tune``; those modules are callable (`callable_module`), so both
spellings work whatever was imported first.
"""

from __future__ import annotations

import dataclasses
import inspect
import shutil
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from raycompo.configuration.arguments import Arg, check, positive_int
from raycompo.errors import ConfigError
from raycompo.watch.observers import Observer, Row

TaskSpec = Any
"""A task: a registered name, 'path/to/file.py:ClassName', 'package.module:ClassName', or
a `Task` subclass (e.g. one made by `raycompo.task_from_arrays`)."""
AlgoSpec = Any
"""An algorithm: a registered name, 'path/to/file.py:ClassName', 'package.module:ClassName',
or an `Algorithm` subclass."""


def run_arguments() -> dict[str, Arg]:
    """What `run` accepts, argument by argument (`raycompo.configuration.arguments`; task and algo are
    checked by `plugins.load`); `resume` and `raycompo.tune` take the same for the
    arguments they share."""
    from raycompo.configuration.backends import backend_names
    from raycompo.configuration.vectorize import MODES as VECTORIZE
    from raycompo.tasks.sampler import SAMPLERS
    from raycompo.watch.progress import MODES
    from raycompo.watch.trackers import TRACKERS

    return {
        "rounds": positive_int(), "settings": Arg(("mapping",), none=True), "seed": Arg(("int",), at_least=0),
        "backend": Arg(("choice",), choices=tuple(backend_names())), "out": Arg(("path",), none=True),
        "overwrite": Arg(("bool",)), "eval_every": positive_int(), "eval_clients": positive_int(none=True),
        "clients_per_actor": positive_int(none=True), "cpus_per_actor": Arg(("number",), above=0),
        "gpus_per_actor": Arg(("number",), at_least=0), "address": Arg(("str",), none=True),
        "dashboard": Arg(("bool",), none=True), "checkpoint_every": positive_int(none=True),
        "max_failures": Arg(("int",), at_least=0), "state_memory": Arg(("number",), above=0, none=True),
        "host_timeout": Arg(("number",), above=0), "data_dir": Arg(("path",), none=True),
        "threads": positive_int(none=True), "vectorize": Arg(("choice",), choices=tuple(VECTORIZE)),
        "vectorize_memory": Arg(("number",), above=0),
        "sampler": Arg(("choice",), choices=SAMPLERS), "system": Arg(("path",), none=True),
        "aggregation": Arg(("choice",), choices=("sync", "buffered", "async")),
        "concurrency": positive_int(none=True), "buffer": positive_int(none=True),
        "compress": Arg(("mapping",), none=True), "compress_down": Arg(("mapping",), none=True),
        "dp_clip": Arg(("number",), none=True), "dp_noise": Arg(("number",), none=True), "dp_delta": Arg(("number",)),
        "log_events": Arg(("bool",)), "uplink": Arg(("specs",), none=True), "on_row": Arg(("callable",), none=True),
        "progress": Arg(("bool", "choice"), choices=MODES),
        "tracker": Arg(("names",), choices=TRACKERS, none=True),
        "observers": Arg(("instances",), cls=Observer),
        "seeds": Arg(("seeds",), none=True),
    }


_RESUME_ARGS = ("address", "dashboard", "checkpoint_every", "max_failures", "on_row", "progress", "tracker")
"""The arguments `resume` shares with `run`."""


def run(
    task: TaskSpec,
    algo: AlgoSpec,
    *,
    rounds: int = 100,
    settings: Mapping[str, Any] | None = None,
    seed: int = 0,
    backend: str = "inline",
    out: str | Path | None = None,
    overwrite: bool = False,
    eval_every: int = 1,
    eval_clients: int | None = None,
    clients_per_actor: int | None = None,
    cpus_per_actor: float = 1.0,
    gpus_per_actor: float = 0.0,
    address: str | None = None,
    dashboard: bool | None = None,
    checkpoint_every: int | None = None,
    max_failures: int = 3,
    state_memory: float | None = None,
    host_timeout: float = 1800.0,
    data_dir: str | None = None,
    threads: int | None = None,
    vectorize: str = "auto",
    vectorize_memory: float = 512.0,
    sampler: str = "keyed",
    system: str | Path | None = None,
    aggregation: str = "sync",
    concurrency: int | None = None,
    buffer: int | None = None,
    budget: Mapping[str, float] | None = None,
    compress: Mapping[str, str] | None = None,
    compress_down: Mapping[str, str] | None = None,
    dp_clip: float | None = None,
    dp_noise: float | None = None,
    dp_delta: float = 1e-5,
    log_events: bool = False,
    uplink: Sequence[str | type] | None = None,
    on_row: Callable[[Row], None] | None = None,
    progress: bool | str = False,
    tracker: str | Sequence[str] | None = None,
    observers: Sequence[Observer] = (),
    seeds: Sequence[int] | None = None,
):
    """Run one federated experiment and return its `RunResult`.

    task, algo: a registered name, 'path/to/file.py:ClassName',
        'package.module:ClassName', or the class itself (a class defined in a notebook or
        in `__main__` works on every backend: Ray ships its code to the workers).
    rounds: communication rounds S. settings: task and algorithm settings by flat key
        (lr, tau, gamma, ...; `task.KEY` / `algo.KEY` where a key is ambiguous).
    seed: seed of every random draw; the same seed gives the same rows on every backend.
    backend: 'inline' (one process, the reference) or 'ray' (client hosts as Ray actors;
        joins `address`, or starts a local Ray bound to 127.0.0.1). The default here is
        'inline', while `python -m raycompo.run` defaults to 'ray': a call from a notebook or
        a script starts no cluster (seconds saved per run) and gives the same rows as 'ray'
        to 1e-6 for the same seed; the command line is where experiments scale out.
    out: a folder for config.json, metrics.csv, clients.csv and checkpoint.pt (None: nothing written);
        `overwrite` replaces a run already there.
    eval_every, eval_clients, clients_per_actor, cpus_per_actor, gpus_per_actor,
    checkpoint_every, max_failures, state_memory (GB), host_timeout (s), data_dir,
    dashboard: as --eval-every, --eval-clients, ... of `python -m raycompo.run`.
    vectorize: 'auto' (default), 'on' or 'off': run each host's clients as one batched
        computation where the algorithm, task and model allow it (raycompo/configuration/vectorize.py);
        vectorize_memory (MB): what one batched chunk of clients may use.
    sampler: how clients' mini-batches are drawn (as --sampler): 'keyed' (default: counter-based
        keyed hashes, raycompo/keyed.py: a batched chunk's draws in one call, the same on
        CPU and CUDA; `compress`'s QSGD and rand-k draws keyed too) or 'randperm' (the draws
        of releases up to 0.1.1).
    system: a simulated system (as --system): a built-in profile ('uniform', 'mobile',
        'mobile-sync', 'mobile-fastest') or a YAML file path; cohorts are drawn among online
        clients and the rows gain sim_time, dropped, wasted_s and the dropped_* costs
        (docs/system.md). None (default): no system.
    aggregation: 'sync' (default), 'buffered' (FedBuff) or 'async' (FedAsync), as
        --aggregation; the asynchronous ones need `system`, `rounds` then counts server
        steps, and their settings (staleness, staleness_a, staleness_b, server_lr,
        max_staleness, async_alpha, async_rho) go in `settings` (docs/system.md).
    concurrency: C, clients in flight (None: the algorithm's cohort size); buffer: K,
        arrivals per server step (None: min(10, C)); as --concurrency and --buffer.
    budget: end the run, status 'completed', at the first round whose cumulative cost
        column reaches its limit, e.g. {'samples': 1e6, 'values_up': 1e8} (keys: samples,
        values_up, values_down, bytes_up, bytes_down, exchanges; sim_time with a simulated
        system; epsilon with client-level DP); as --budget KEY=VALUE.
    compress: compression of what clients send up, {contribution key or '*': method}, methods
        'qsgd:S', 'topk:K', 'randk:K', 'sign' (as --compress KEY=METHOD; `--list` shows each
        algorithm's keys); bytes_up counts the encoded messages (docs/compression.md).
        compress_down: the same for the payload the server sends down (as --compress-down).
    dp_clip, dp_noise, dp_delta: client-level DP as DP-FedAvg (as --dp-clip C --dp-noise z
        --dp-delta): each client's contribution clipped to L2 norm C, N(0, z^2 C^2) added to
        the server's sums, the column `epsilon` at delta (budget {'epsilon': 8} ends a run there).
    log_events: write `out`/events.csv (as --log-events): one row per dispatch, its client,
        the model version it downloaded, its dispatch and finish times (simulated seconds,
        with `system`) and its fate (applied at server step s with staleness tau, stale,
        dropped, lost), for synchronous and asynchronous runs; `.events` is the same frame
        (kept in memory without `out`). docs/system.md#eventscsv.
    uplink: your own steps applied to what clients send up, after `compress` and
        `dp_clip`'s, in order (as --uplink SPEC): specs 'path/to/file.py:ClassName' or
        'package.module:ClassName', or the classes, of
        `raycompo.compression.uplink.UplinkStep` subclasses (docs/compression.md).
    threads: torch threads of this process (`torch.set_num_threads`; it stays set).
        Recorded in config.json (this process's number when None), and `resume` sets it
        again: a resumed run's sums of floats are split over threads as before.
    on_row(row): called with each row (a dict) as soon as it is computed (live plots).
    progress: True shows a progress bar (`tqdm.auto`: a widget in a notebook, a bar on a
        terminal, at most ~100 plain lines elsewhere); or a mode of `raycompo.watch.progress`
        ('bar', 'notebook', 'lines').
    tracker: 'mlflow' and/or 'wandb' (a name or a list): also log the settings, every row
        and the run folder's files there (see `raycompo.watch.trackers`; optional packages).
    observers: more `Observer`s (on_start / on_row / on_end / on_failure) of the run.
    seeds: several seeds of this configuration (`seed` is then not used), run as one
        population (raycompo/engine/population.py): each seed is a run of its own, its rows
        as it alone (to float rounding, 1e-5), written to `out`/seed-<s>; their clients' local
        steps run as rows of one batched computation where the algorithm allows it. Returns
        a list of `RunResult`s, one per seed, in order; the first seed's error, if any, is
        raised once every seed has ended. Needs backend 'inline' (the population runs in this
        process); `on_row` hears every seed's rows, each with a key `seed` saying whose (from
        the seeds' threads, one row at a time per seed), `observers` every seed's run;
        `progress` and `tracker` are not available. A population stopped part way (an
        error, a kill) goes on with `resume(out)`, every seed from its own checkpoint.

    Returns a `RunResult`: `.metrics` (DataFrame of metrics.csv's rows and columns,
    with the cumulative cost columns samples, values_up, values_down, bytes_up,
    bytes_down and exchanges), `.costs` (the per-key breakdown, the run folder's
    costs.csv), `.clients` (every evaluated client's metrics, clients.csv's tidy rows),
    `.events` (with `log_events`: one row per dispatch, events.csv),
    `.status` ('completed' or 'diverged'), `.config` (what config.json
    holds), `.final` (the last row), `.out`. Raises ConfigError / DataUnavailableError on bad input;
    `raycompo.engine.signals.Interrupted` (a KeyboardInterrupt) on Ctrl-C or SIGTERM.
    """
    a = check("raycompo.run", locals(), run_arguments())  # numpy numbers come back as int / float
    if a["threads"] is not None:
        import torch

        torch.set_num_threads(a["threads"])
    cfg = _run_config(a)
    if seeds is not None:
        if a["seed"] != 0:
            raise ConfigError(f"raycompo.run: seed={a['seed']} and seeds= both given; seeds= names every seed "
                              f"(e.g. seeds=[{a['seed']}, ...]), so leave seed out")
        return _run_seeds(cfg, [int(s) for s in a["seeds"]], out=out, overwrite=overwrite, checkpoint_every=a["checkpoint_every"],
                          max_failures=a["max_failures"], on_row=on_row, progress=progress, tracker=tracker,
                          observers=observers)
    return _run(cfg, out=out, overwrite=overwrite, resume=False, address=address, dashboard=dashboard,
                checkpoint_every=a["checkpoint_every"], max_failures=a["max_failures"], on_row=on_row,
                progress=progress, tracker=tracker, observers=observers)


def _run_config(a: dict[str, Any]) -> Any:
    """The RunConfig of `run`'s arguments `a` (checked)."""
    from raycompo.configuration.config import RunConfig

    return RunConfig(
        task=a["task"], algo=a["algo"], rounds=a["rounds"], seed=a["seed"], settings=dict(a["settings"] or {}),
        backend=a["backend"], clients_per_actor=a["clients_per_actor"], cpus_per_actor=a["cpus_per_actor"],
        gpus_per_actor=a["gpus_per_actor"], eval_every=a["eval_every"],
        data_dir=None if a["data_dir"] is None else str(a["data_dir"]), eval_clients=a["eval_clients"],
        state_memory_gb=a["state_memory"], host_timeout_s=a["host_timeout"], vectorize=a["vectorize"],
        vectorize_memory_mb=a["vectorize_memory"], sampler=a["sampler"],
        system=None if a["system"] is None else str(a["system"]), aggregation=a["aggregation"],
        concurrency=a["concurrency"], buffer=a["buffer"],
        budget=dict(a["budget"]) if isinstance(a["budget"], Mapping) else a["budget"],  # type: ignore[arg-type]  (checked by resolve)
        compress=_mapping(a["compress"]), compress_down=_mapping(a["compress_down"]),
        dp_clip=a["dp_clip"], dp_noise=a["dp_noise"], dp_delta=a["dp_delta"],
        threads=a["threads"], log_events=a["log_events"], uplink=list(a["uplink"] or []),
    )


def _mapping(value: Any) -> Any:
    """A Mapping as a dict, None as {}; anything else as it is (resolve names its type)."""
    return {} if value is None else dict(value) if isinstance(value, Mapping) else value


def resume(
    out: str | Path,
    *,
    rounds: int | None = None,
    task: TaskSpec | None = None,
    algo: AlgoSpec | None = None,
    address: str | None = None,
    dashboard: bool | None = None,
    checkpoint_every: int | None = None,
    max_failures: int = 3,
    on_row: Callable[[Row], None] | None = None,
    progress: bool | str = False,
    tracker: str | Sequence[str] | None = None,
):
    """Continue the run in folder `out` from its last checkpoint (as `python -m
    raycompo.run --resume OUT`); `rounds` may change its total, not below the checkpoint's
    round. Everything else comes from out/config.json. `task` / `algo`: the classes again,
    for a run whose classes were defined in a notebook or a script's `__main__`
    (config.json can name them but not find them in a new process); they must be the
    classes the run used. The checks are the command line's (results.resumed_config,
    checkpoint.resume_point): a ConfigError when the run cannot go on as asked. A completed
    run with no more rounds asked for (`rounds` None or its rounds) is not run again: its
    result (metrics and config.json as written) is returned.

    The folder of a population of seeds (`run(..., seeds=..., out=out)`: its folders
    seed-<s>) resumes as a whole: every seed's run goes on from its own checkpoint (each
    checked to be that seed's run before any runs), the unfinished ones as one population
    again, and a list of `RunResult`s comes back in seed order; `progress` and `tracker` are
    then not available, and `on_row` hears each row with its `seed`, as in `run`."""
    from raycompo.runfolder.results import finished, population_folders, read_rows

    args = run_arguments()
    a = check("raycompo.resume", locals(), {**{k: args[k] for k in _RESUME_ARGS}, "out": Arg(("path",)),
                                           "rounds": positive_int(none=True)})
    if not Path(out).is_dir():
        raise ConfigError(f"raycompo.resume: out must be the folder of a run, and there is no folder {str(out)!r}")
    rounds, checkpoint_every, max_failures = a["rounds"], a["checkpoint_every"], a["max_failures"]
    seeds = population_folders(out)
    if seeds:
        return _resume_seeds(seeds, rounds=rounds, task=task, algo=algo, checkpoint_every=checkpoint_every,
                             max_failures=max_failures, on_row=on_row, progress=progress, tracker=tracker)
    cfg = _resumed_config(out, rounds, task, algo)
    done = finished(out, cfg.rounds, cfg.budget)
    if done is not None:  # completed, no more rounds asked for: its result, nothing to run
        from raycompo.engine.runner import RunResult

        return RunResult("completed", read_rows(out, cfg.rounds), done, str(out))
    return _run(cfg, out=out, overwrite=False, resume=True, address=address, dashboard=dashboard,
                checkpoint_every=checkpoint_every, max_failures=max_failures, on_row=on_row, progress=progress,
                tracker=tracker)


def _resumed_config(out: str | Path, rounds: int | None, task: TaskSpec | None, algo: AlgoSpec | None) -> Any:
    """The RunConfig that continues the run in `out`, with `task` / `algo` (when given)
    checked to be the classes it used and remembered for it."""
    from raycompo.configuration.plugins import load, remember
    from raycompo.runfolder.results import resumed_config

    cfg = resumed_config(out, rounds=rounds)
    for kind, given, recorded in (("task", task, cfg.task), ("algorithm", algo, cfg.algo)):
        if given is not None:
            cls = load(kind, given)
            if recorded.rpartition(":")[2].rpartition(".")[2] not in (cls.__name__, cls.name):
                raise ConfigError(f"raycompo.resume: the run in {out} used the {kind} {recorded}, not "
                                  f"{cls.__qualname__}; pass the class the run used")
            remember({(kind, recorded): cls})
    return cfg


def _run(cfg, *, out, overwrite, resume, address, dashboard, checkpoint_every, max_failures, on_row, progress,
         tracker=None, observers=()):
    from raycompo.configuration.config import resolve
    from raycompo.engine.runner import run as engine_run
    from raycompo.watch.observers import Callback
    from raycompo.watch.trackers import check_trackers, run_trackers

    out = None if out is None else str(out)
    watch: list[Observer] = [Callback(on_row)] if on_row is not None else []
    if progress:
        from raycompo.watch.progress import RunProgress

        metric = resolve(cfg, check_clients=False).task_cls.default_metric[0].removesuffix("_worst")
        watch.append(RunProgress(cfg.rounds, metric, mode="auto" if progress is True else str(progress)))
    watch += run_trackers(check_trackers(tracker), out)
    return engine_run(cfg, out=out, overwrite=overwrite, address=address, include_dashboard=dashboard,
                      checkpoint_every=checkpoint_every, max_failures=max_failures, resume=resume,
                      observers=[*watch, *observers])


def _run_seeds(cfg, seeds, *, out, overwrite, checkpoint_every, max_failures, on_row, progress, tracker, observers):
    """`run(..., seeds=...)`: the seeds' runs as one population (engine/population.py)."""
    from raycompo.runfolder.results import population_folders

    if cfg.backend != "inline":
        raise ConfigError(f"seeds= runs the seeds as one population in this process: it needs backend='inline', "
                          f"not {cfg.backend!r} (each seed's rows are those of backend 'ray' to 1e-6)")
    _check_population_watch(progress, tracker)
    if out is not None and (Path(out) / "config.json").exists():
        raise ConfigError(f"{out} holds a single run (its config.json): a population of seeds writes its runs to "
                          f"seed-<s> folders of a folder of its own; choose another out")
    held = population_folders(out) if out is not None else {}
    if held and not overwrite:
        raise ConfigError(f"{out} already holds a population of seeds ({', '.join(p.name for p in held.values())}); "
                          f"continue it with raycompo.resume({str(out)!r}), pass overwrite=True, or choose another out")
    for s in sorted(set(held) - set(seeds)):  # overwrite: the population replaced whole, no seed of the old one left
        shutil.rmtree(held[s])
    members = {s: (dataclasses.replace(cfg, seed=s), None if out is None else str(Path(out) / f"seed-{s}")) for s in seeds}
    results = _as_population(members, on_row, overwrite=overwrite, checkpoint_every=checkpoint_every,
                             max_failures=max_failures, observers=observers)
    return [results[s] for s in seeds]


def _check_population_watch(progress: Any, tracker: Any) -> None:
    if progress or tracker:
        raise ConfigError("seeds= shows no progress bar and logs to no tracker (several runs at once): "
                          "leave progress and tracker unset, or run the seeds one by one")


def _as_population(members: dict[int, tuple[Any, str | None]], on_row, observers=(), **kwargs) -> dict[int, Any]:
    """{seed: its RunResult} of `members` ({seed: (its RunConfig, its folder)}) run as one
    population, each `engine.runner.run(cfg, out=folder, hosts=seat, **kwargs)`; the first
    seed's error, if any, raised once every seed has ended."""
    import functools

    from raycompo.engine.population import run_population
    from raycompo.engine.runner import run as engine_run
    from raycompo.watch.observers import Callback

    def seed_rows(s: int) -> list[Observer]:  # on_row hears each row with its seed
        return [] if on_row is None else [Callback(lambda row: on_row({**row, "seed": s}))]

    runs: list[Callable[[Any], Any]] = [
        functools.partial(_seed_run, engine_run, cfg, out=out, observers=[*seed_rows(s), *observers], **kwargs)
        for s, (cfg, out) in members.items()]
    results, _ = run_population(runs)
    failed = next((r for r in results if isinstance(r, BaseException)), None)
    if failed is not None:
        raise failed
    return dict(zip(members, results))


def _resume_seeds(folders: dict[int, Path], *, rounds, task, algo, checkpoint_every, max_failures, on_row, progress,
                  tracker) -> list[Any]:
    """`resume(out)` of a population of seeds (`folders`: {seed: its run folder}): each seed's
    run checked against its own checkpoint first, the unfinished ones as one population."""
    from raycompo.configuration.config import resolve
    from raycompo.engine import checkpoint
    from raycompo.engine.runner import RunResult
    from raycompo.runfolder.results import finished, read_rows

    _check_population_watch(progress, tracker)
    results: dict[int, Any] = {}
    members: dict[int, tuple[Any, str | None]] = {}
    configs = {s: _resumed_config(folder, rounds, task, algo) for s, folder in folders.items()}
    first = min(configs)
    for s, folder in folders.items():
        cfg = configs[s]
        if cfg.seed != s:  # a finished run too: its result is returned as seed s's
            raise ConfigError(f"raycompo.resume: {folder} holds the run of seed {cfg.seed}, not of seed {s}; "
                              "nothing was resumed. Put each seed's run back in its folder seed-<s>")
        if dataclasses.replace(cfg, seed=0) != dataclasses.replace(configs[first], seed=0):
            raise ConfigError(f"raycompo.resume: {folder} is not a seed of the configuration of {folders[first]} "
                              f"(they differ in more than the seed); nothing was resumed. A population of seeds is "
                              f"one configuration: move that run to a folder of its own")
        done = finished(folder, cfg.rounds, cfg.budget)
        if done is not None:  # completed, no more rounds asked for: its result
            results[s] = RunResult("completed", read_rows(folder, cfg.rounds), done, str(folder))
            continue
        # this seed's own checkpoint (a ConfigError names what differs), before any seed runs
        checkpoint.resume_point(folder, checkpoint.fingerprint(resolve(cfg.canonical())), cfg.rounds)
        members[s] = (cfg, str(folder))
    results.update(_as_population(members, on_row, resume=True, checkpoint_every=checkpoint_every,
                                  max_failures=max_failures) if members else {})
    return [results[s] for s in folders]


def _seed_run(engine_run, cfg, seat, **kwargs):
    return engine_run(cfg, hosts=seat, **kwargs)


class CallableModule(types.ModuleType):
    # A module that can also be called: `raycompo.run` is both the module behind
    # ``python -m raycompo.run`` and the function `api.run` (the import system sets a
    # submodule as an attribute of its package, so a function of the same name would be
    # replaced by the module as soon as anything imports it). Seen from outside, the module
    # carries the function's signature and docstring (`inspect.signature`, `help()`, IDEs,
    # notebooks); the code inside it still reads its own docstring (`--help`).

    __raycompo_call__: Callable[..., Any]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__raycompo_call__(*args, **kwargs)

    @property
    def __wrapped__(self) -> Callable[..., Any]:  # type: ignore[override]
        return self.__raycompo_call__

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.__raycompo_call__)

    @property  # type: ignore[misc]
    def __doc__(self) -> str:  # type: ignore[override]
        fn = self.__raycompo_call__
        module_doc = self.__dict__.get("__doc__") or ""
        return (f"{self.__name__}{inspect.signature(fn)}\n\n{inspect.getdoc(fn) or ''}\n\n"
                f"The module {self.__name__} (python -m {self.__name__} --help):\n\n{inspect.cleandoc(module_doc)}")


def callable_module(name: str, function: Callable[..., Any]) -> None:
    """Make the module `name` callable as `function`, with that function's signature and
    docstring as seen by `inspect.signature`, `help()` and `pydoc`, followed by the module's
    own docstring."""
    module = sys.modules[name]
    if name == "__main__":
        return  # run as a script: nothing calls it
    module.__class__ = CallableModule
    module.__raycompo_call__ = function  # type: ignore[attr-defined]
