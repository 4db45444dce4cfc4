"""`raycompo.tune(...)` from Python: sweep a search space and get its trials and best
settings as data (`SweepResult`); `python -m raycompo.tune` (tune/cli.py) is the same
sweep from the command line. It lives in this package, above `raycompo.api` (which runs
one federation), so that the sweep machinery below it and the command line beside it
need nothing from above."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from raycompo.configuration.arguments import Arg, check, positive_int
from raycompo.errors import ConfigError


@dataclass
class SweepResult:
    """What `raycompo.tune` returns."""

    trials: pd.DataFrame
    """One row per trial (trials.csv): algorithm, swept settings, final_<metric>, status..."""
    best: dict[str, Any]
    """Per algorithm (the space's key): `settings` and `value` of its best trial, its
    `command`, and counts of trials (best.json's "algorithms")."""
    out: Path
    """The sweep folder (sweep.json, trials.csv, metrics.parquet, best.json)."""
    interrupted: bool
    """True when trials are left (Ctrl-C, stop_after, failed trials): `raycompo.tune(resume=out)`."""

    @property
    def metrics(self) -> pd.DataFrame:
        """Every round of every trial (metrics.parquet)."""
        path = self.out / "metrics.parquet"
        return pd.read_parquet(path) if path.exists() else pd.DataFrame()


def tune_arguments() -> dict[str, Arg]:
    """What `tune` accepts, argument by argument (`raycompo.configuration.arguments`); the arguments it
    shares with `raycompo.run` are checked as `run` checks them."""
    from raycompo.api import run_arguments
    from raycompo.costs.axes import COST_AXES
    from raycompo.tune.sweep import SCHEDULERS, SEARCHES

    shared = run_arguments()
    return {
        "space": Arg(("path", "mapping"), none=True), "search": Arg(("choice",), choices=SEARCHES),
        "samples": positive_int(none=True), "rounds": positive_int(none=True), "metric": Arg(("str",), none=True),
        "mode": Arg(("choice",), choices=("max", "min"), none=True), "algorithms": Arg(("strings",), none=True),
        "hosts_per_trial": positive_int(), "driver_cpus": Arg(("number",), above=0, none=True),
        "scheduler": Arg(("choice",), choices=SCHEDULERS), "max_concurrent": positive_int(none=True),
        "seed": Arg(("int",), at_least=0, none=True), "resume": Arg(("path",), none=True),
        "num_cpus": positive_int(none=True), "stop_after": positive_int(none=True), "quiet": Arg(("bool",)),
        "rank_at": Arg(("choice",), choices=tuple(COST_AXES), none=True),
        **{k: shared[k] for k in ("settings", "backend", "cpus_per_actor", "gpus_per_actor", "out", "address",
                                  "tracker", "system")},
        "budget": Arg(("mapping",), none=True),
        "population": Arg(("int", "choice"), at_least=1, choices=("auto",), none=True),
        "checkpoint_every": positive_int(none=True),
    }


def tune(
    space: str | Path | Mapping[str, Any] | None = None,
    *,
    search: str = "optuna",
    samples: int | None = None,
    rounds: int | None = None,
    metric: str | None = None,
    mode: str | None = None,
    algorithms: Sequence[str] | None = None,
    settings: Mapping[str, Any] | None = None,
    backend: str = "inline",
    hosts_per_trial: int = 2,
    cpus_per_actor: float = 0.25,
    gpus_per_actor: float = 0.0,
    driver_cpus: float | None = None,
    scheduler: str = "none",
    max_concurrent: int | None = None,
    seed: int | None = None,
    out: str | Path | None = None,
    resume: str | Path | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    stop_after: int | None = None,
    quiet: bool = True,
    tracker: str | Sequence[str] | None = None,
    rank_at: str | None = None,
    system: str | Path | None = None,
    budget: Mapping[str, float] | None = None,
    population: int | str | None = None,
    checkpoint_every: int | None = None,
) -> SweepResult:
    """Sweep a search space with Ray Tune (+ Optuna) and return the trials and the best
    settings, as `python -m raycompo.tune` does.

    space: a space name in sweeps/, a path to a YAML file, or a dict with the same keys
        (task, algorithms, rounds, metric, mode, ...; see `raycompo.tune.space`). An
        algorithm key may be a registered name, a 'file.py:Class' / 'module:Class' spec or
        an `Algorithm` subclass; `task` likewise.
    search: 'optuna' (TPE over the space's values, `samples` per algorithm) or 'grid'.
    backend: the engine inside each trial: 'inline' or 'ray' (hosts_per_trial host actors
        of cpus_per_actor CPUs / gpus_per_actor GPUs each).
    out: the sweep folder (default sweep_results/<space>-<time>); resume=FOLDER continues
        an interrupted sweep (space and options are read from FOLDER/sweep.json).
    tracker: 'mlflow' and/or 'wandb': every trial also logged there (Ray Tune's callbacks).
    quiet=False shows the sweep's progress (a bar of trials on a terminal, lines elsewhere).
    rank_at: 'samples', 'values' (values_up + values_down), 'bytes' (bytes_up + bytes_down)
        or 'sim_time': rank the trials at equal cost (each trial's metric at its last
        evaluated row whose cost is <= the smallest final cost of the completed trials;
        `best` then holds `value_round` and `value_cost`); None: after the last round.
        'sim_time' needs a simulated system: the space's `system` key or `system=`.
    system, budget: a simulated system (a profile name or YAML path) and a cost budget
        ({'sim_time': 3600}) for every trial, over the space's `system` and `budget` keys
        (as --system / --budget of `python -m raycompo.run`). A space also sets them, and any
        other RunConfig option of the engine (an aggregation, its `buffer` K and
        `concurrency` C), as top-level keys, and sweeps them under an algorithm like any
        hyperparameter (`raycompo.tune.space`); each trial's `command` repeats them.
    population: trials per population (`raycompo.tune.population`: trials that share every
        structural setting and differ only in float settings such as lr), an integer >= 1 or
        'auto'; Optuna is asked that many configurations at a time (batched ask/tell) and, with
        quiet=False, the sweep prints how its trials group; each Tune trial runs a population
        as one computation (raycompo/engine/population.py: each trial's rows as alone;
        backend 'inline'; scheduler 'asha' stops members one by one, tune/member_asha.py).
        None (default): 'auto', or 1 where populations cannot run (backend 'ray', a tracker;
        `population.default_population`), as sweep.json's `population_off` says. 1: one trial
        at a time, as before populations.
    checkpoint_every: each trial writes a checkpoint every that many rounds into the sweep
        folder's `checkpoints/` (`raycompo.tune.trial_checkpoints`; removed as each trial
        ends), so that resume=FOLDER continues a killed sweep's running trials (and
        populations) from there; trials.csv's `resumed_at` then names the round. None
        (default): none; a trial that was running starts again from round 0.
    Other arguments are those of the command line. Raises ConfigError on bad input."""
    from raycompo.tune.results import SweepStore
    from raycompo.tune.space import space_from_dict
    from raycompo.tune.sweep import SweepOptions, check_resources, ensure_ray, prepare, run_sweep
    from raycompo.watch.trackers import check_trackers

    check("raycompo.tune", locals(), tune_arguments())
    trackers = check_trackers(tracker)
    if space is None and resume is None:
        raise ConfigError("raycompo.tune needs a space (a name, a YAML path or a dict) or resume=FOLDER")
    parsed = space_from_dict(dict(space)) if isinstance(space, Mapping) else None
    opts = SweepOptions(
        space=str(space) if space is not None and parsed is None else (parsed.name if parsed else ""),
        search=search, samples=samples, rounds=rounds, metric=metric, mode=mode, scheduler=scheduler,
        max_concurrent=max_concurrent, backend=backend, hosts_per_trial=hosts_per_trial, driver_cpus=driver_cpus,
        cpus_per_actor=cpus_per_actor, gpus_per_actor=gpus_per_actor, seed=seed,
        algorithms=list(algorithms) if algorithms else None, settings=dict(settings or {}),
        out=None if out is None else str(out), rank_at=rank_at, system=None if system is None else str(system),
        budget=dict(budget) if isinstance(budget, Mapping) else budget,  # type: ignore[arg-type]  # checked by resolve
        population=population, checkpoint_every=checkpoint_every,
    )
    space_obj, meta, store = prepare(opts, resume=None if resume is None else str(resume), space=parsed, trackers=trackers)
    ensure_ray(address, num_cpus)
    if address is None:
        check_resources(space_obj, meta)
    outcome = run_sweep(space_obj, meta, store, max_concurrent=max_concurrent, quiet=quiet, stop_after=stop_after,
                        trackers=trackers)
    trials = SweepStore(store.dir).trials() if store.trials_path.exists() else pd.DataFrame()
    return SweepResult(trials=trials, best=outcome.best.get("algorithms", {}), out=Path(store.dir),
                       interrupted=outcome.interrupted)
