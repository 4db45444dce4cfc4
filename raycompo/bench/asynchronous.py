"""FedBuff's cost against a synchronous round (issue 31), printed side by side:

1. `updates`: seconds per 100 client updates of FedBuff (C = 100 in flight, K = 10) on the
   cohort bench's logistic-784 workload (bench/cohort.py: synthetic clients, 784 x 10
   logistic regression, tau 5, batch 32), against one synchronous batched round of m = 100
   (the same clients' work), and their ratio (target: <= 1.5). The clients dispatched with
   one model version run as one batched computation; how many that is depends on the
   devices: `uniform` (equal devices: whole waves) and `mobile-sync` (heterogeneous
   devices: the groups are small, so this is the worst case).
2. `overhead`: the event loop's seconds per server step at 10^6 and 10^7 clients (C = 100,
   K = 10, one cheap local step on 10 features), apart from the clients' own computation
   (the pool's time), next to a synchronous round's own overhead (m = 100).

    python -m raycompo.bench async [--threads 1] [--steps 30] [--sizes 1000000 10000000] [--skip-overhead]

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from raycompo.bench.cohort import WORKLOADS
from raycompo.configuration.config import RunConfig
from raycompo.engine.federation import Federation


class TimedPool:
    """A pool wrapper that adds up the seconds spent in `map` (the clients' computation)."""

    def __init__(self, pool: Any):
        self.pool = pool
        self.seconds = 0.0
        self.calls = 0
        self.clients = 0

    def map(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.pool.map(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1
            self.clients += len(args[2])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pool, name)


def _fed(settings: dict[str, Any], **kw: Any) -> tuple[Federation, TimedPool]:
    cfg = RunConfig(task="synthetic", algo="fedavg", rounds=10**6, eval_every=10**6, backend="inline",
                    vectorize="on", settings=settings, **kw)
    fed = Federation(cfg)
    timed = TimedPool(fed.pool)
    fed.pool = timed  # type: ignore[assignment]
    return fed, timed


def updates(steps: int, n: int = 1000) -> list[str]:
    """Seconds per 100 client updates, FedBuff C = 100 K = 10 vs a synchronous round of 100."""
    base = {**WORKLOADS["logistic-784"], "n_clients": n, "clients_per_round": 100}
    lines = []
    sync, _ = _fed(base)
    try:
        sync.run_rounds(2)
        t0 = time.perf_counter()
        rounds = max(3, steps // 10)
        sync.run_rounds(rounds)
        per_round = (time.perf_counter() - t0) / rounds
    finally:
        sync.close()
    lines.append(f"synchronous batched round of 100 (logistic-784): {per_round * 1e3:8.1f} ms")
    for profile in ("uniform", "mobile-sync"):
        fed, timed = _fed(base, system=profile, aggregation="buffered", concurrency=100, buffer=10)
        try:
            fed.run_rounds(10)  # the first 100 dispatches computed, caches warm
            c0, k0 = timed.calls, timed.clients
            t0 = time.perf_counter()
            fed.run_rounds(steps)
            per_100 = (time.perf_counter() - t0) / (steps * 10 / 100)
            group = (timed.clients - k0) / max(1, timed.calls - c0)
        finally:
            fed.close()
        lines.append(f"FedBuff C=100 K=10 on {profile:11s}: {per_100 * 1e3:8.1f} ms per 100 updates, "
                     f"ratio {per_100 / per_round:5.2f} (target <= 1.5); mean batched group {group:5.1f} clients")
    return lines


def overhead(sizes: list[int], steps: int) -> list[str]:
    """Seconds per server step outside the clients' computation, at each population size."""
    tiny = {"n_features": 10, "n_classes": 2, "tau": 1, "batch_size": 4, "max_samples": 60, "clients_per_round": 100}
    lines = []
    for n in sizes:
        out = []
        for label, kw in (("sync round", {}),
                          ("FedBuff step", dict(system="uniform", aggregation="buffered", concurrency=100, buffer=10)),
                          ("FedBuff step mobile", dict(system="mobile", aggregation="buffered", concurrency=100,
                                                       buffer=10))):
            fed, timed = _fed({**tiny, "n_clients": n}, **kw)
            try:
                fed.run_rounds(3)
                s0 = timed.seconds
                t0 = time.perf_counter()
                fed.run_rounds(steps)
                total = (time.perf_counter() - t0) / steps
                other = total - (timed.seconds - s0) / steps
            finally:
                fed.close()
            out.append(f"{label} {total * 1e3:7.2f} ms ({other * 1e3:6.2f} ms outside the pool)")
        lines.append(f"n = {n:>9,}: " + "; ".join(out))
    return lines


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m raycompo.bench async", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--steps", type=int, default=30, help="server steps timed (default 30: 300 updates)")
    p.add_argument("--sizes", type=int, nargs="+", default=[10**6, 10**7])
    p.add_argument("--skip-overhead", action="store_true", help="only the 100-updates comparison")
    p.add_argument("--skip-updates", action="store_true", help="only the event loop's overhead")
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    if not a.skip_updates:
        for line in updates(a.steps):
            print(line, flush=True)
    if not a.skip_overhead:
        for line in overhead(a.sizes, a.steps):
            print(line, flush=True)
    return 0
