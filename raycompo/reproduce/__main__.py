"""Reproduce one paper claim: run its variants over seeds, then write

    <out>/runs/<label>-s<seed>/   each run (config.json, metrics.csv), as `raycompo.run --out`
    <out>/table.csv, table.md      final metrics per variant: mean and 95% CI (t) over seeds
    <out>/figure.png               the paper's panels: mean curve with a 95% band
    <out>/commands.sh              the `python -m raycompo.run` command of every run
    <out>/verdict.txt              the paper's claim and what was measured

    python -m raycompo.reproduce --list
    python -m raycompo.reproduce comfedl-fig2 [--seeds 5] [--rounds R] [--workers N] [--full --data-dir D]

Runs whose folder already holds a completed (or diverged) run with the same config are
skipped, so an interrupted claim resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from raycompo.errors import RaycompoError
from raycompo.reproduce.claims import CLAIMS
from raycompo.reproduce.report import commands, write_all
from raycompo.reproduce.runner import plan, run_jobs, validate


def listing() -> str:
    lines = []
    for c in CLAIMS.values():
        full = f", --full: {c.full.task}" if c.full else ""
        lines.append(f"{c.name:<14} {c.source}\n{'':<15}{c.title}\n{'':<15}task {c.task}, {c.rounds} rounds, "
                     f"{len(c.variants)} variants x {c.seeds} seeds{full}\n{'':<15}variants: "
                     + ", ".join(v.label for v in c.variants))
    return "\n".join(lines)


def reproduce(name: str, out: str | Path | None = None, seeds: int | None = None, rounds: int | None = None,
              full: bool = False, data_dir: str | None = None, workers: int = 1, address: str | None = None,
              settings: dict[str, Any] | None = None, log=print, tracker: str | list[str] | None = None,
              progress: bool | None = None) -> str:
    """Run claim `name` into `out` (default reproductions/<name>) and write its report; returns the verdict.
    tracker: 'mlflow' / 'wandb' (raycompo/trackers.py): every run logged there, into the
    experiment named after the claim (MLflow's store: <out>/mlruns by default).
    progress: a bar of runs done (on a terminal; lines elsewhere); default: when `log` is print."""
    from raycompo.trackers import check_trackers, mlflow_experiment, mlflow_uri

    trackers = check_trackers(tracker)
    if name not in CLAIMS:
        raise RaycompoError(f"unknown claim {name!r}; choose one of: {', '.join(CLAIMS)}")
    claim = CLAIMS[name]
    out = Path(out or Path("reproductions") / name)
    jobs = plan(claim, out, seeds=seeds, rounds=rounds, full=full, data_dir=data_dir, extra=settings)
    validate(jobs)
    out.mkdir(parents=True, exist_ok=True)
    (out / "commands.sh").write_text(commands(jobs))
    header = {"claim": name, "task": jobs[0].cfg.task, "seeds": seeds if seeds is not None else claim.seeds,
              "rounds": rounds or (claim.full.rounds if full and claim.full and claim.full.rounds else claim.rounds),
              "full": full, "settings": settings or {}, "workers": workers}
    (out / "claim.json").write_text(json.dumps({**header, "source": claim.source, "title": claim.title}, indent=2, default=str) + "\n")
    start = time.perf_counter()
    log(f"{name}: {len(jobs)} runs ({len(claim.variants)} variants x {header['seeds']} seeds) on {header['task']}, "
        f"{workers} worker(s) -> {out}")
    tracking = None
    if trackers:
        tracking = {"trackers": trackers, "experiment": os.environ.get("MLFLOW_EXPERIMENT_NAME") or name}
        if "mlflow" in trackers:  # one store for the claim, made here before runs write in parallel
            tracking["uri"] = mlflow_uri(out)
            mlflow_experiment(tracking["uri"], tracking["experiment"])
    bar = None
    if progress or (progress is None and log is print):
        from raycompo.progress import SweepProgress

        bar = SweepProgress(len(jobs), unit="run", stream=sys.stdout)
    run_jobs(jobs, workers=workers, address=address, log=log, progress=bar, tracking=tracking)
    line = write_all(claim, jobs, out, header)
    log(f"done in {time.perf_counter() - start:.0f} s: {out}/table.md, figure.png\n{line}")
    return line


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m raycompo.reproduce", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", nargs="?", help="claim name (see --list)")
    p.add_argument("--list", action="store_true", help="list the claims")
    p.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 (default: the claim's, 5)")
    p.add_argument("--rounds", type=int, default=None,
                   help="rounds of the claim's budget; variants with budgets of their own scale with it")
    p.add_argument("--out", default=None, help="output folder (default reproductions/NAME)")
    p.add_argument("--full", action="store_true", help="the paper's data set instead of the offline task (needs --data-dir or a download)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="runs in parallel as Ray tasks (default: the CPU count); 1: one by one in this process")
    p.add_argument("--address", default=None, help="Ray cluster to run on (e.g. auto); --out must be on a shared file system")
    p.add_argument("--set", dest="sets", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                   help="settings for every run that knows the key (e.g. a new algorithm option)")
    p.add_argument("--tracker", action="append", choices=("mlflow", "wandb"), default=[],
                   help="also log every run to mlflow (MLFLOW_TRACKING_URI, else <out>/mlruns) or wandb; repeatable")
    args = p.parse_args(argv)
    if args.list or not args.name:
        print(listing())
        return 0
    from raycompo.run import parse_sets

    try:
        reproduce(args.name, out=args.out, seeds=args.seeds, rounds=args.rounds, full=args.full,
                  data_dir=args.data_dir, workers=max(1, args.workers), address=args.address, settings=parse_sets(args.sets),
                   tracker=args.tracker)
    except RaycompoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
