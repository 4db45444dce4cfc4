"""Sweep a space of `sweeps/` with Ray Tune (+ Optuna).

    python -m raycompo.tune --space dro                   # Optuna TPE, a few trials per algorithm
    python -m raycompo.tune --space dro --search grid     # the paper's whole grid
    python -m raycompo.tune --space dro --full            # the full-MNIST task (download)
    python -m raycompo.tune --space dro --rank-at values  # algorithms compared at equal values sent
    python -m raycompo.tune --space system --rank-at sim_time   # on a simulated system, at equal simulated time
    python -m raycompo.tune --resume sweep_results/dro-20250101-120000

Writes trials.csv (one row per trial, with the command that re-runs it),
metrics.parquet (every round of every trial) and best.json (best settings per
algorithm) under --out (default sweep_results/<space>-<timestamp>).
Exit codes: 0 done, 1 ran to its end with trials failed (their errors in trials.csv; --resume
runs them again), 2 bad input or missing data, 130 interrupted by Ctrl-C, 143 by SIGTERM
(continue with --resume).
"""

from __future__ import annotations

import argparse
import signal
import sys

from raycompo.configuration.backends import backend_names
from raycompo.costs.axes import COST_AXES
from raycompo.costs.budget import BUDGET_KEYS, parse_budget
from raycompo.engine.signals import exit_code, sigterm_as_sigint
from raycompo.errors import RaycompoError
from raycompo.settings import parse_sets
from raycompo.tune.space import available_spaces, load_space
from raycompo.tune.sweep import (
    SCHEDULERS,
    SEARCHES,
    SweepOptions,
    check_resources,
    ensure_ray,
    prepare,
    run_sweep,
)
from raycompo.watch.trackers import TRACKERS, check_trackers

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_TRIALS_FAILED = 1


def add_population(p: argparse.ArgumentParser) -> None:
    """--population P (tune/population_search.py)."""
    p.add_argument("--population", default=None, metavar="P",
                   help="trials per population (equal but for float settings such as lr, gamma): an integer >= 1 "
                        "or 'auto'; each Tune trial runs up to P of them as one population (one batched "
                        "computation, each trial's rows as alone; --backend inline; --scheduler asha stops members one "
                        "by one), Optuna is asked "
                        "P configurations at a time. Default: auto (as many as the grid or --samples, bounded by memory); "
                        "1 where populations cannot run (--backend ray, --tracker), as the sweep says. 1: one trial "
                        "at a time, as before populations")


def add_stop_and_resume(p: argparse.ArgumentParser) -> None:
    """--resume DIR, --checkpoint-every N (tune/trial_checkpoints.py), --stop-after N."""
    p.add_argument("--resume", default=None, metavar="DIR", help="continue the interrupted sweep in DIR")
    p.add_argument("--checkpoint-every", type=int, default=None, metavar="N",
                   help="each trial writes a checkpoint every N rounds into DIR/checkpoints, so that --resume "
                        "continues a killed sweep's running trials from there (default: none; they start again)")
    p.add_argument("--stop-after", type=int, default=None, metavar="N",
                   help="stop the sweep once N trials have finished this session, as Ctrl-C does (continue with --resume)")


def sweep_options(args: argparse.Namespace) -> SweepOptions:
    """The SweepOptions of the parsed command line (--set, --system and --budget are parsed
    apart: they can fail)."""
    return SweepOptions(
        space=args.space, search=args.search, samples=args.samples, rounds=args.rounds, metric=args.metric,
        mode=args.mode, scheduler=args.scheduler, max_concurrent=args.max_concurrent, backend=args.backend,
        hosts_per_trial=args.hosts_per_trial, driver_cpus=args.driver_cpus, cpus_per_actor=args.cpus_per_actor,
        gpus_per_actor=args.gpus_per_actor, full=args.full, data_dir=args.data_dir, seed=args.seed,
        algorithms=args.algos, out=args.out, reuse_actors=not args.no_reuse_actors,
        reuse_hosts=not args.no_reuse_hosts, rank_at=args.rank_at, population=args.population,
        checkpoint_every=args.checkpoint_every,
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m raycompo.tune", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--space", default=None, help="a space in sweeps/ (e.g. dro) or a path to a .yaml file")
    p.add_argument("--list", action="store_true", help="list the spaces and their grid sizes")
    p.add_argument("--search", choices=SEARCHES, default="optuna",
                   help="optuna: Ray Tune's OptunaSearch (TPE) over the space's values; grid: the whole grid")
    p.add_argument("--samples", type=int, default=None,
                   help="Optuna trials per algorithm (default: the space's `samples`)")
    p.add_argument("--rounds", type=int, default=None, help="rounds per trial (default: the space's `rounds`)")
    p.add_argument("--metric", default=None, help="column to optimize (default: the space's, e.g. val_acc_worst)")
    p.add_argument("--mode", choices=("max", "min"), default=None, help="default: the space's")
    p.add_argument("--rank-at", choices=tuple(COST_AXES), default=None, metavar="COST",
                   help="rank the trials at equal cost instead of after the last round: each trial's metric at its "
                        "last evaluated row whose cost is <= the smallest final cost of the completed trials; COST: "
                        "samples, values (values_up + values_down), bytes (bytes_up + bytes_down) or sim_time "
                        "(trials with a simulated system)")
    p.add_argument("--scheduler", choices=SCHEDULERS, default="none",
                   help="asha: stop poor trials early (ASHA on the rounds; with --population, each member on its "
                        "own: docs/sweeps.md)")
    add_population(p)
    p.add_argument("--max-concurrent", type=int, default=None,
                   help="trials run at once (default: as many as the CPUs/GPUs fit)")
    p.add_argument("--set", dest="sets", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                   help="fixed task/algorithm settings of every trial, over the space's `settings` (e.g. n_way=20)")
    p.add_argument("--system", default=None, metavar="PROFILE",
                   help="a simulated system for every trial, over the space's `system` key: a built-in profile "
                        "(uniform, mobile, ...) or a YAML file (docs/system.md); adds sim_time for --rank-at sim_time")
    p.add_argument("--budget", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                   help="end every trial at the first round whose cumulative cost reaches VALUE, over the space's "
                        "`budget` key; keys: " + ", ".join(BUDGET_KEYS) + " (sim_time with a system)")
    p.add_argument("--algos", nargs="+", default=None, metavar="ALGO", help="sweep only these algorithms of the space")
    p.add_argument("--backend", choices=backend_names(), default="inline",
                   help="engine inside each trial: inline (one process; fastest for small tasks) or ray "
                        "(client-host actors in the trial's placement group)")
    p.add_argument("--hosts-per-trial", type=int, default=2, help="--backend ray: client-host actors per trial")
    p.add_argument("--driver-cpus", type=float, default=None,
                   help="CPUs of a trial's driver bundle (default: 1 inline, 0.5 ray)")
    p.add_argument("--cpus-per-actor", type=float, default=0.25, help="--backend ray: CPUs per client-host actor")
    p.add_argument("--gpus-per-actor", type=float, default=0.0, help="--backend ray: GPU fraction per host, e.g. 0.25")
    p.add_argument("--full", action="store_true", help="sweep the space's full_task (e.g. full MNIST; downloads)")
    p.add_argument("--data-dir", default=None, help="folder holding (or receiving) data sets")
    p.add_argument("--seed", type=int, default=None, help="seed of every trial (default: the space's)")
    p.add_argument("--out", default=None, help="result folder (default: sweep_results/<space>-<timestamp>)")
    add_stop_and_resume(p)
    p.add_argument("--no-reuse-actors", action="store_true", help="a fresh Tune actor per trial")
    p.add_argument("--no-reuse-hosts", action="store_true",
                   help="--backend ray: fresh client-host actors per trial (default: a trial actor resets and reuses "
                        "the hosts of its previous trial; same results, less start-up)")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray instance (default: all)")
    p.add_argument("--address", default=None, help="Ray cluster address (e.g. 'auto')")
    p.add_argument("--quiet", action="store_true", help="no progress bar or lines")
    p.add_argument("--tracker", action="append", choices=TRACKERS, default=[],
                   help="also log every trial to mlflow (MLFLOW_TRACKING_URI, else <out>/mlruns) or wandb, "
                        "through Ray Tune's callbacks; repeatable")
    return p


def list_spaces() -> str:
    lines = []
    for name in available_spaces():
        try:
            s = load_space(name)
        except RaycompoError as exc:
            lines.append(f"  {name:<10} INVALID: {exc}")
            continue
        grid = ", ".join(f"{a} {s.grid_size(a)}" for a in s.algorithms)
        run = "".join(f", {k} {' '.join(f'{c}={x}' for c, x in v.items()) if isinstance(v, dict) else v}"
                      for k, v in s.run.items())  # system mobile-sync, budget sim_time=8
        lines.append(f"  {name:<10} task {s.task}{' (offline)' if s.offline else ''}, metric {s.metric} ({s.mode}), "
                     f"{s.rounds} rounds{run}; grid {s.grid_size()} trials ({grid})")
    return "spaces:\n" + "\n".join(lines)


RECORDED = ("space", "search", "samples", "rounds", "metric", "mode", "rank_at", "scheduler", "population", "sets",
            "system", "budget", "algos", "backend", "hosts_per_trial", "driver_cpus", "cpus_per_actor",
            "gpus_per_actor", "full", "data_dir", "seed", "out")
"""The options a sweep records in its sweep.json when it starts: `--resume` goes on with those
(the others, e.g. --max-concurrent, --stop-after, --address, are this session's)."""


def resume_conflicts(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The recorded options given beside --resume (which would otherwise be ignored)."""
    given = [name for name in RECORDED if getattr(args, name) != parser.get_default(name)]
    return [f"--{name.replace('_', '-')}".replace("--sets", "--set") for name in given]


def _refuse_conflicts(folder: str, given: list[str]) -> int:
    print(f"error: --resume {folder} goes on with the options its sweep.json records; {', '.join(given)} cannot "
          "change there: leave them out, or start a new sweep with them", file=sys.stderr)
    return EXIT_BAD_INPUT


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.resume and resume_conflicts(parser, args):
        return _refuse_conflicts(args.resume, resume_conflicts(parser, args))
    if args.list:
        print(list_spaces())
        return 0
    if not args.space and not args.resume:
        print("error: give --space NAME (see --list) or --resume DIR", file=sys.stderr)
        return EXIT_BAD_INPUT
    opts = sweep_options(args)
    try:
        opts.settings = parse_sets(args.sets)
        opts.system, opts.budget = args.system, parse_budget(args.budget) or None
        trackers = check_trackers(args.tracker)
        space, meta, store = prepare(opts, resume=args.resume, trackers=trackers)
    except RaycompoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        ensure_ray(args.address, args.num_cpus)  # a dead --address: one message within RAYCOMPO_CONNECT_TIMEOUT
        if args.address is None:
            check_resources(space, meta)
    except RaycompoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM while Ray starts: nothing written yet
        print("interrupted before the sweep started", file=sys.stderr)
        return exit_code(exc)
    terminated: list[int] = []
    try:
        with sigterm_as_sigint(terminated):  # SIGTERM stops the sweep as Ctrl-C does
            outcome = run_sweep(space, meta, store, max_concurrent=args.max_concurrent, quiet=args.quiet,
                                stop_after=args.stop_after, trackers=trackers)
    except RaycompoError as exc:  # e.g. another sweep process holds the folder
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:  # a second signal, or one before Tune's handler was up
        hint = f"; continue it with: python -m raycompo.tune --resume {store.dir}" if store.exists() else ""
        print(f"sweep interrupted{hint}", file=sys.stderr)
        return 128 + signal.SIGTERM if terminated else exit_code(exc)
    counts = ", ".join(f"{v} {k}" for k, v in sorted(outcome.counts.items()))
    print(f"\nbest per algorithm ({meta['metric']}, {meta['mode']}; {meta['task']}, {meta['rounds']} rounds):")
    print(outcome.table)
    print(f"\ntrials: {counts or 'none'}")
    print(f"results: {store.dir}/ (trials.csv, metrics.parquet, best.json)")
    if outcome.tune_path:
        print(f"Ray Tune's view of this run: ray.tune.ExperimentAnalysis({str(outcome.tune_path)!r})")
    if outcome.tensorboard_dir:
        print(f"TensorBoard: tensorboard --logdir {outcome.tensorboard_dir}")
    if outcome.interrupted and not (outcome.stopped or terminated):  # it ran to its end, and trials failed
        print(f"sweep ended with {outcome.left} trial(s) failed (trials.csv's error column says why); run them "
              f"again with: python -m raycompo.tune --resume {store.dir}", file=sys.stderr)
        return EXIT_TRIALS_FAILED
    if outcome.interrupted:
        print(f"sweep stopped with {outcome.left} trial(s) left; continue it with: "
              f"python -m raycompo.tune --resume {store.dir}", file=sys.stderr)
        return 128 + signal.SIGTERM if terminated else EXIT_INTERRUPTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
