"""Vectorized cohorts against client by client, for every family that batches: milliseconds
per round (training only) and per evaluation of the global model, side by side in one
process, and how far apart the two paths' models are after the timed rounds.

    python -m raycompo.bench vectorize [--rounds 5] [--threads 1]

Each workload runs twice, `--vectorize off` (the reference, client by client) and `auto`
(the batched phases its plan allows; the plan is printed). Figures are printed, never
asserted; compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace

import torch

from raycompo.configuration.config import RunConfig
from raycompo.engine.allocator import keep_large_allocations
from raycompo.engine.federation import Federation

WORKLOADS: dict[str, tuple[str, str, dict]] = {
    "fedavg, dro-mnist5k": ("dro-mnist5k", "fedavg", {}),
    "comfedl lse, synthetic": ("synthetic", "comfedl", {"normalizer": "lse", "clients_per_round": 100}),
    "ditto, synthetic": ("synthetic", "ditto", {"clients_per_round": 100}),
    "feddro, feddro-digits-st": ("feddro-digits-st", "feddro", {"sync_every": 8}),
    "pdsgd, feddro-digits-st": ("feddro-digits-st", "pdsgd", {"sync_every": 8}),
    "local-scgdm, maml-sinusoid": ("maml-sinusoid", "local-scgdm", {"n_clients": 25}),
}


def measure(cfg: RunConfig, rounds: int) -> dict:
    """Seconds per round and per evaluation after one warm-up of each, and the final model."""
    fed = Federation(cfg)
    try:
        fed.run_round()
        fed.evaluate()  # data built, buffers allocated, torch.func imported
        t0 = time.perf_counter()
        for _ in range(rounds):
            fed.w, fed.state = fed.algorithm.server_round(_ctx(fed), fed.w, fed.state)
            fed.round += 1
        per_round = (time.perf_counter() - t0) / rounds
        t1 = time.perf_counter()
        for _ in range(rounds):
            fed.evaluate()
        return {"round": per_round, "evaluate": (time.perf_counter() - t1) / rounds, "w": fed.w,
                "phases": sorted(fed.pool.host.batched) if hasattr(fed.pool, "host") else []}
    finally:
        fed.close()


def _ctx(fed: Federation):
    from raycompo.engine.federation import RoundCtx

    return RoundCtx(fed, fed.round)


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser."""
    p = argparse.ArgumentParser(prog="python -m raycompo.bench vectorize", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5, help="timed rounds and evaluations per workload")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: as each Ray host)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    # Vectorized hosts keep freed heap blocks (engine/allocator.py), a process-wide setting:
    # set once here, so both paths are timed under the same allocator.
    keep_large_allocations()
    print(f"{'workload':28} {'round ms: off':>13} {'auto':>8} {'speed-up':>8} {'eval ms: off':>13} {'auto':>8} "
          f"{'speed-up':>8} {'model rel. diff':>15}  batched phases")
    for name, (task, algo, settings) in WORKLOADS.items():
        cfg = RunConfig(task=task, algo=algo, settings=settings, backend="inline", rounds=10**6, eval_every=10**6)
        off = measure(replace(cfg, vectorize="off"), args.rounds)
        auto = measure(replace(cfg, vectorize="auto"), args.rounds)
        rel = float((auto["w"] - off["w"]).norm() / off["w"].norm().clamp(min=1e-30))
        print(f"{name:28} {1e3 * off['round']:13.2f} {1e3 * auto['round']:8.2f} {off['round'] / auto['round']:7.2f}x "
              f"{1e3 * off['evaluate']:13.2f} {1e3 * auto['evaluate']:8.2f} {off['evaluate'] / auto['evaluate']:7.2f}x "
              f"{rel:15.1e}  {', '.join(auto['phases']) or '-'}")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
