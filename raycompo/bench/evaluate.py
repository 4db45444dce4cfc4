"""Milliseconds per evaluation of the global model, client by client against batched
(`Task.batched_evaluate`: one forward pass per chunk of clients), side by side:

    python -m raycompo.bench evaluate [--repeats 5] [--threads 1]

Workloads: `dro-mnist5k` (10 clients, 784 x 10 logistic regression), the `synthetic`
task (FedProx's Synthetic(1, 1), 1,000 clients) and the cohort benchmark's `logistic-784`
at m = 100. Each row also prints the largest difference between the two paths' metrics
(the row's means and worst clients). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import time

import torch

from raycompo.config import RunConfig, resolve
from raycompo.engine.federation import Federation


def workloads() -> dict[str, RunConfig]:
    from raycompo.bench.cohort import config

    return {
        "dro-mnist5k": RunConfig(task="dro-mnist5k", algo="fedavg", backend="inline"),
        "synthetic": RunConfig(task="synthetic", algo="fedavg", backend="inline"),
        "logistic-784 m=100": config("logistic-784", "fedavg", 100, "inline", "auto"),
    }


def time_evaluation(cfg: RunConfig, mode: str, w: torch.Tensor | None, repeats: int) -> tuple[float, dict, torch.Tensor]:
    """(seconds per evaluation, the row, the model evaluated) with `--vectorize mode`."""
    from dataclasses import replace

    fed = Federation(replace(cfg, vectorize=mode))
    try:
        if w is None:
            fed.run_round()  # a trained model, not w_0
        else:
            fed.w = w
        row = fed.evaluate()  # warm-up: data built, buffers allocated
        t0 = time.perf_counter()
        for _ in range(repeats):
            row = fed.evaluate()
        return (time.perf_counter() - t0) / repeats, row, fed.w
    finally:
        fed.close()


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser."""
    p = argparse.ArgumentParser(prog="python -m raycompo.bench evaluate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: as each Ray host)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"{'workload':22} {'clients':>8} {'per client ms':>14} {'batched ms':>11} {'speed-up':>9} {'max |diff|':>11}")
    for name, cfg in workloads().items():
        per_client, ref, w = time_evaluation(cfg, "off", None, args.repeats)
        batched, row, _ = time_evaluation(cfg, "auto", w, args.repeats)
        diff = max(abs(row[k] - v) for k, v in ref.items() if isinstance(v, float) and k in row)
        n = resolve(cfg).n_clients
        print(f"{name:22} {n:8d} {1e3 * per_client:14.2f} {1e3 * batched:11.2f} {per_client / batched:8.2f}x {diff:11.1e}")
    import os

    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
