"""Reproduce one paper claim: run its variants over seeds, then write

    <out>/runs/<label>-s<seed>/   each run (config.json, metrics.csv), as `raycompo.run --out`
    <out>/table.csv, table.md      final metrics per variant: mean and 95% CI (t) over seeds
    <out>/figure.png               the paper's panels: mean curve with a 95% band
    <out>/commands.sh              the `python -m raycompo.run` command of every run
    <out>/verdict.txt              the paper's claim and what was measured

    python -m raycompo.reproduce --list
    python -m raycompo.reproduce comfedl-fig2 [--seeds 5] [--rounds R] [--workers N] [--full --data-dir D]
    python -m raycompo.reproduce comfedl-fig2 --with examples/my_algorithm.py:ScgdMomentum=mine --with-set gamma=1

<out> is a new folder, reproduce_results/NAME-<date>-<time>, unless --out names one. A folder
that already holds a report or runs is never overwritten: --overwrite deletes them first,
--resume continues them (runs whose folder holds a completed or diverged run with the same
config are skipped, so an interrupted claim resumes where it stopped; --resume without --out:
the newest reproduce_results/NAME-*).

--with SPEC[=LABEL] (repeatable) adds your algorithm ('path/to/file.py:Class',
'package.module:Class' or a registered name) as an extra curve, "yours": run on the claim's
task with the same seeds and budget, and the claim's settings that it knows (then --set's,
then --with-set's), tabled and drawn, but never part of the verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from raycompo.errors import RaycompoError
from raycompo.reproduce.claims import CLAIMS
from raycompo.reproduce.report import commands, write_all
from raycompo.reproduce.runner import plan, run_jobs, validate, yours

RESULTS = Path("reproduce_results")
"""Where a claim goes without --out: a new RESULTS/NAME-<date>-<time> (from the current folder)."""
ARTIFACTS = ("runs", "claim.json", "commands.sh", "table.csv", "table.md", "figure.png", "verdict.txt")
"""What a report folder holds: --overwrite deletes exactly these (nothing else of --out's)."""


def listing() -> str:
    lines = []
    for c in CLAIMS.values():
        full = f", --full: {c.full.task}" if c.full else ""
        lines.append(f"{c.name:<14} {c.source}\n{'':<15}{c.title}\n{'':<15}task {c.task}, {c.rounds} rounds, "
                     f"{len(c.variants)} variants x {c.seeds} seeds{full}\n{'':<15}variants: "
                     + ", ".join(v.label for v in c.variants))
    return "\n".join(lines)


def held(out: Path) -> list[str]:
    """The report files and runs already in `out`."""
    return [a for a in ARTIFACTS if (out / a).exists()]


def new_folder(name: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out, k = RESULTS / f"{name}-{stamp}", 2
    while out.exists():
        out, k = RESULTS / f"{name}-{stamp}-{k}", k + 1
    return out


def latest(name: str) -> Path:
    """The newest default folder of claim `name` (for --resume without --out)."""
    pattern = re.compile(rf"^{re.escape(name)}-(\d{{8}}-\d{{6}})(?:-(\d+))?$")
    stamps = {p: pattern.match(p.name) for p in RESULTS.glob(f"{name}-*") if p.is_dir()}
    found = sorted((p for p, m in stamps.items() if m), key=lambda p: (stamps[p][1], int(stamps[p][2] or 1)))
    if not found:
        raise RaycompoError(f"--resume: no earlier run of {name} in {RESULTS}/; name its folder with --out")
    return found[-1]


def output_folder(name: str, out: str | Path | None, overwrite: bool, resume: bool) -> Path:
    """Where the claim goes (see the module docstring); refuses a folder that already holds
    a report or runs without --overwrite or --resume (RaycompoError, exit 2)."""
    if overwrite and resume:
        raise RaycompoError("--overwrite deletes the runs that --resume continues: give one of them")
    if out is None:
        return latest(name) if resume else new_folder(name)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise RaycompoError(f"--out {out} is a file, not a folder; choose another --out")
    there = held(out)
    if there and resume:
        was = {}
        try:
            was = json.loads((out / "claim.json").read_text())
        except (OSError, ValueError):
            pass
        if was.get("claim", name) != name:
            raise RaycompoError(f"--resume: {out} holds claim {was['claim']}, not {name}")
    elif there and not overwrite:
        raise RaycompoError(f"{out} already holds a report or runs ({', '.join(there)}); nothing was run. "
                            "Pass --overwrite to delete them and start again, --resume to continue them, "
                            "or leave out --out for a new folder")
    return out


def clear(out: Path) -> None:
    """--overwrite: delete the old report and runs, so nothing stale mixes in."""
    for a in held(out):
        p = out / a
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()


def reproduce(name: str, out: str | Path | None = None, seeds: int | None = None, rounds: int | None = None,
              full: bool = False, data_dir: str | None = None, workers: int = 1, address: str | None = None,
              settings: dict[str, Any] | None = None, log=print, tracker: str | list[str] | None = None,
              progress: bool | None = None, *, with_algorithms: list | None = None,
              with_settings: dict[str, Any] | None = None, overwrite: bool = False, resume: bool = False,
              population: bool = False) -> str:
    """Run claim `name` into `out` and write its report; returns the verdict.

    `out`: None for a new folder reproduce_results/<name>-<date>-<time>; a folder that holds a
    report or runs already is refused (RaycompoError) unless `overwrite` (deleted first) or
    `resume` (finished runs with the same config are kept).
    `with_algorithms`: your algorithms as extra variants, each 'SPEC', 'SPEC=LABEL', a class or
    (spec or class, label); run like the claim's variants (claim's settings that they know,
    then `settings`, then `with_settings`), tabled and drawn as "yours", never in the verdict.
    tracker: 'mlflow' / 'wandb' (raycompo/watch/trackers.py): every run logged there, into the
    experiment named after the claim (MLflow's store: <out>/mlruns by default).
    progress: a bar of runs done (on a terminal; lines elsewhere); default: when `log` is print.
    population: each variant's seeds run as one population (raycompo/engine/population.py;
    one Ray task per variant with workers > 1): each run's rows as alone, to float rounding;
    not with `tracker`."""
    from raycompo.configuration.arguments import check, positive_int
    from raycompo.watch.trackers import check_trackers, mlflow_experiment, mlflow_uri

    check("raycompo.reproduce", {"seeds": seeds, "rounds": rounds, "workers": workers},
          {"seeds": positive_int(none=True), "rounds": positive_int(none=True), "workers": positive_int()})
    trackers = check_trackers(tracker)
    if population and trackers:
        raise RaycompoError("--population runs a variant's seeds in one process: leave out --tracker")
    if name not in CLAIMS:
        raise RaycompoError(f"unknown claim {name!r}; choose one of: {', '.join(CLAIMS)}")
    claim = CLAIMS[name]
    out = output_folder(name, out, overwrite, resume)
    extras = yours(claim, with_algorithms, with_settings)
    jobs = plan(claim, out, seeds=seeds, rounds=rounds, full=full, data_dir=data_dir, extra=settings, extras=extras)
    validate(jobs)
    if overwrite:
        clear(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "commands.sh").write_text(commands(jobs))
    header = {"claim": name, "task": jobs[0].cfg.task, "seeds": seeds if seeds is not None else claim.seeds,
              "rounds": rounds or (claim.full.rounds if full and claim.full and claim.full.rounds else claim.rounds),
              "full": full, "settings": settings or {}, "workers": workers, "sampler": jobs[0].cfg.sampler}
    if extras:
        header["yours"] = [{"label": v.label, "algo": v.algo, "settings": v.settings} for v in extras]
    (out / "claim.json").write_text(json.dumps({**header, "source": claim.source, "title": claim.title}, indent=2, default=str) + "\n")
    start = time.perf_counter()
    mine = f" + {len(extras)} of yours" if extras else ""
    log(f"{name}: {len(jobs)} runs ({len(claim.variants)} variants{mine} x {header['seeds']} seeds) on {header['task']}, "
        f"{workers} worker(s) -> {out}")
    tracking = None
    if trackers:
        tracking = {"trackers": trackers, "experiment": os.environ.get("MLFLOW_EXPERIMENT_NAME") or name}
        if "mlflow" in trackers:  # one store for the claim, made here before runs write in parallel
            tracking["uri"] = mlflow_uri(out)
            mlflow_experiment(tracking["uri"], tracking["experiment"])
    bar = None
    if progress or (progress is None and log is print):
        from raycompo.watch.progress import SweepProgress

        bar = SweepProgress(len(jobs), unit="run", stream=sys.stdout)
    run_jobs(jobs, workers=workers, address=address, log=log, progress=bar, tracking=tracking, population=population)
    line = write_all(claim, jobs, out, header)
    log(f"done in {time.perf_counter() - start:.0f} s: {out}/table.md, figure.png\n{line}")
    return line


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser (main parses with it; tests check documented commands)."""
    p = argparse.ArgumentParser(prog="python -m raycompo.reproduce", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", nargs="?", help="claim name (see --list)")
    p.add_argument("--list", action="store_true", help="list the claims")
    p.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 (default: the claim's, 5)")
    p.add_argument("--rounds", type=int, default=None,
                   help="rounds of the claim's budget; variants with budgets of their own scale with it")
    p.add_argument("--out", default=None,
                   help=f"output folder (default: a new {RESULTS}/NAME-<date>-<time>); one holding a report is refused "
                        "without --overwrite or --resume")
    p.add_argument("--overwrite", action="store_true", help="--out holds a report: delete it and its runs first")
    p.add_argument("--resume", action="store_true",
                   help="continue --out (default: the newest of NAME's folders): finished runs with the same config are kept")
    p.add_argument("--with", dest="with_algorithms", action="append", default=[], metavar="SPEC[=LABEL]",
                   help="your algorithm ('path/to/file.py:Class', 'package.module:Class', a name) as an extra "
                        "curve, marked 'yours', not in the verdict (repeatable)")
    p.add_argument("--with-set", dest="with_sets", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                   help="settings of the --with runs only (e.g. gamma=1), over the claim's and --set's")
    p.add_argument("--full", action="store_true", help="the paper's data set instead of the offline task (needs --data-dir or a download)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--population", action="store_true",
                   help="each variant's seeds as one population: their local steps as rows of one batched "
                        "computation, each run's rows as alone (raycompo/engine/population.py)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="runs in parallel as Ray tasks (default: the CPU count); 1: one by one in this process")
    p.add_argument("--address", default=None, help="Ray cluster to run on (e.g. auto); --out must be on a shared file system")
    p.add_argument("--set", dest="sets", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                   help="settings for every run that knows the key (e.g. a new algorithm option)")
    p.add_argument("--tracker", action="append", choices=("mlflow", "wandb"), default=[],
                   help="also log every run to mlflow (MLFLOW_TRACKING_URI, else <out>/mlruns) or wandb; repeatable")
    return p


def resume_command(argv: list[str]) -> str:
    """The command that continues an interrupted one (`argv`): with --resume (the runs
    already finished are kept; without --out it continues the newest folder of the claim,
    the one just made), without --overwrite (which would delete them)."""
    kept = [a for a in argv if a not in ("--overwrite", "--resume")]
    return shlex.join(["python", "-m", "raycompo.reproduce", *kept, "--resume"])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list or not args.name:
        print(listing())
        return 0
    from raycompo.settings import parse_sets

    try:
        for option, value in (("--seeds", args.seeds), ("--rounds", args.rounds), ("--workers", args.workers)):
            if value is not None and value < 1:
                raise RaycompoError(f"{option} must be an integer >= 1, got {value}; nothing was run")
        reproduce(args.name, out=args.out, seeds=args.seeds, rounds=args.rounds, full=args.full,
                  data_dir=args.data_dir, workers=args.workers, address=args.address, settings=parse_sets(args.sets),
                  with_algorithms=args.with_algorithms, with_settings=parse_sets(args.with_sets),
                  overwrite=args.overwrite, resume=args.resume, tracker=args.tracker,
                  population=args.population)
    except RaycompoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C (130) or SIGTERM (143): finished runs are kept; run again to go on
        from raycompo.engine.signals import exit_code

        print(f"interrupted; continue with: {resume_command(sys.argv[1:] if argv is None else argv)}", file=sys.stderr)
        return exit_code(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
