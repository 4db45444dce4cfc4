"""From the command to round 1, and where the time goes: inline vs Ray (with and without
the dashboard), each in a fresh Python process as a user's command starts.

    python -m raycompo.bench startup [--repeats 3] [--task dro-mnist5k] [--algo comfedl]

Each run is `raycompo.engine.run` (what `python -m raycompo.run` calls) with an observer
that stamps the rows, in a new process; the phases are measured by wrapping the engine's
own steps: imports, Ray start (`ensure_ray`), driver and host actors (`start_driver`,
which returns when every host has loaded its data), the initial evaluation (row 0) and
round 1. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
stamps = {}
def stamp(name):
    stamps[name] = time.perf_counter() - t0
import raycompo.engine.runner as runner
from raycompo.configuration.config import RunConfig
from raycompo.watch.observers import Observer
stamp("imports")
real_ensure, real_start = runner.ensure_ray, runner.start_driver
def ensure(*a, **k):
    out = real_ensure(*a, **k); stamp("ray started"); return out
def start(*a, **k):
    out = real_start(*a, **k); stamp("driver and hosts ready"); return out
runner.ensure_ray, runner.start_driver = ensure, start
class Rows(Observer):
    def on_row(self, row):
        stamp("row 0 (initial evaluation)" if row["round"] == 0 else f"round {row['round']}")
backend, dashboard, task, algo, sets = sys.argv[1], sys.argv[2] == "1", sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
cfg = RunConfig(task=task, algo=algo, rounds=1, settings=sets, backend=backend)
runner.run(cfg, observers=[Rows()], include_dashboard=dashboard)
stamp("end (actors closed)")
print("STAMPS " + json.dumps(stamps))
"""

PHASES = ("imports", "ray started", "driver and hosts ready", "row 0 (initial evaluation)", "round 1", "end (actors closed)")


def one(backend: str, dashboard: bool, task: str, algo: str, sets: dict, timeout: float) -> dict[str, float]:
    env = {**os.environ, "RAY_DEDUP_LOGS": "0"}
    out = subprocess.run([sys.executable, "-c", CHILD, backend, "1" if dashboard else "0", task, algo, json.dumps(sets)],
                         capture_output=True, text=True, timeout=timeout, env=env)
    for line in out.stdout.splitlines():
        if line.startswith("STAMPS "):
            return json.loads(line[len("STAMPS "):])
    raise RuntimeError(f"the {backend} run printed no timings (exit {out.returncode}): {out.stderr.strip()[-800:]}")


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser (main parses with it; tests check documented commands)."""
    p = argparse.ArgumentParser(prog="python -m raycompo.bench startup", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3, help="fresh processes per variant, interleaved; medians")
    p.add_argument("--task", default="dro-mnist5k")
    p.add_argument("--algo", default="comfedl")
    p.add_argument("--set", dest="sets", nargs="*", default=["gamma=1"], metavar="KEY=VALUE")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds one run may take")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from raycompo.settings import parse_sets

    sets = parse_sets(args.sets)
    variants = {"inline": ("inline", False), "ray": ("ray", True), "ray, no dashboard": ("ray", False)}
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for _ in range(args.repeats):
        for name, (backend, dash) in variants.items():
            runs[name].append(one(backend, dash, args.task, args.algo, sets, args.timeout))
    print(f"{args.algo} on {args.task}, 1 round, fresh process each; seconds since the process started "
          f"(median of {args.repeats}); load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"  {'phase done at':<28}" + "".join(f"{v:>20}" for v in variants))
    med = {v: {p: statistics.median(r[p] for r in rs if p in r) if any(p in r for r in rs) else None for p in PHASES}
           for v, rs in runs.items()}
    for p in PHASES:
        cells = "".join(f"{'-' if med[v][p] is None else f'{med[v][p]:.2f}':>20}" for v in variants)
        print(f"  {p:<28}{cells}")
    first = {v: med[v]["round 1"] for v in variants}
    print(f"  command to round 1, ray / inline: {first['ray'] / first['inline']:.1f}x with the dashboard, "
          f"{first['ray, no dashboard'] / first['inline']:.1f}x without (target <= 2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
