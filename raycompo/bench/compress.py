"""Seconds per round with compression and DP beside the uncompressed round (issue 34):
FedAvg's batched round (--vectorize on, inline) on the `logistic-784` workload of
bench/cohort.py (a 784 x 10 logistic regression, tau 5, batch 32, m clients, all of them
each round), as it is and with each payload transform:

  none           the round as it is (the reference)
  topk:0.01      --compress *=topk:0.01 (error feedback: each client's residual kept)
  qsgd:4         --compress *=qsgd:4 (one keyed uniform draw per entry)
  sign           --compress *=sign (error feedback)
  randk:0.01     --compress *=randk:0.01
  dp             --dp-clip 1 --dp-noise 1 (clip, noise, accountant)

    python -m raycompo.bench compress --threads 1 [--m 100] [--rounds 5] [--repeats 3] [--cpu-time]

The transforms run on each chunk's stacked (k, d) updates (raycompo/compression/). Rounds
of the variants are interleaved (`--repeats` passes, best kept) so that a busy machine
affects them alike. Figures are printed, never asserted; the target: top-k and QSGD
within 1.3x of `none` at m = 100.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import torch

from raycompo.bench.cohort import config
from raycompo.bench.timing import engine_seconds_per_round
from raycompo.engine.federation import Federation

VARIANTS: dict[str, dict] = {
    "none": {},
    "topk:0.01": {"compress": {"*": "topk:0.01"}},
    "qsgd:4": {"compress": {"*": "qsgd:4"}},
    "sign": {"compress": {"*": "sign"}},
    "randk:0.01": {"compress": {"*": "randk:0.01"}},
    "dp": {"dp_clip": 1.0, "dp_noise": 1.0},
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m raycompo.bench compress", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--m", type=int, default=100, help="clients (all of them each round)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per pass")
    p.add_argument("--repeats", type=int, default=3, help="interleaved passes; the best is kept")
    p.add_argument("--threads", type=int, default=None, help="torch threads")
    p.add_argument("--cpu-time", action="store_true", help="this process's CPU seconds instead of wall clock")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    base = config("logistic-784", "fedavg", args.m, "inline", "on")
    feds = {name: Federation(dataclasses.replace(base, **VARIANTS[name])) for name in args.variants}
    for fed in feds.values():
        fed.run_rounds(1)  # warm-up: data materialized, buffers allocated, residuals created
    best = dict.fromkeys(feds, float("inf"))
    for _ in range(args.repeats):
        for name, fed in feds.items():
            t = engine_seconds_per_round(fed, args.rounds, warmup=0)
            best[name] = min(best[name], t.cpu if args.cpu_time else t.wall)
    clock = "CPU" if args.cpu_time else "wall"
    print(f"FedAvg, logistic-784, m = {args.m}, inline vec, {clock} seconds per round (best of {args.repeats} x {args.rounds}):")
    ref = best.get("none")
    for name, seconds in best.items():
        ratio = f"{seconds / ref:5.2f}x" if ref else ""
        ledger = feds[name].ledger.columns()
        per_round = ledger["bytes_up"] / max(1, feds[name].round)
        print(f"  {name:<12} {seconds:8.4f} s  {ratio}   bytes_up/round {per_round:12.0f}")
    for fed in feds.values():
        fed.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
