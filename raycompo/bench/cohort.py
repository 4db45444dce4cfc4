"""Seconds per round of a cohort of m clients, side by side (issues 18, 28):

  floor          the round's batched products alone, at the workload's own shapes: per local
                 step, the forward W x^T, (m, C, d) x (m, d, b), and the weight gradient
                 g x, (m, C, b) x (m, b, d), timed here on random tensors (the best of
                 `--floor-repeats`): what no batched round can go below on this machine
  flop floor     the same round's FLOPs / this process's float32 rate of a 1024^3 matrix
                 product (the former floor: products of these shapes never reach that rate,
                 so it is several times too low; kept for comparison)
  hand loop      a plain torch loop over the clients (autograd, the same data and draws)
  hand batched   FedAvg's batched round written by hand (bench/hand_batched.py): the same
                 seeded draws and maths as 'inline vec', ending at its model, with nothing
                 around the products: the attainable figure (nan for ComFedL, and where a
                 client holds fewer samples than the batch)
  inline         raycompo's in-process backend, client by client (--vectorize off)
  inline vec     the same, the cohort as one batched computation (--vectorize on)
  ray            the Ray backend (driver actor, client-host actors), client by client
  ray vec        the Ray backend, each host's clients batched

for FedAvg and ComFedL on two workloads: `logistic-784` (a dro-mnist5k-sized multinomial
logistic regression, 784 x 10, tau 5, batch 32, on synthetic clients of 50-1000 samples)
and `synthetic` (FedProx's Synthetic(1, 1): 60 features, tau 20, batch 10). The cohort is the
whole population of m clients. Evaluation is excluded (rounds only). ComFedL runs at
gamma = 10: at gamma = 1 exp(f / gamma) overflows in round 1 on these clients' features and
every later round would time arithmetic on NaNs.

    python -m raycompo.bench cohort --threads 1 [--m 10 100 1000] [--rounds 5] [--no-ray] [--cpu-time]

`--cpu-time` measures the floor, the two hand columns and the inline columns in this process's CPU
seconds instead of wall-clock ones: with one torch thread, the work itself, far less
sensitive to other processes on a shared machine (the Ray columns stay wall clock).

Figures are printed, never asserted; compare the ratios of one run. The targets (issue 28):
inline vec >= 5x faster than inline at m = 100 on logistic-784, and within 3x of the floor.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from raycompo.bench.hand_batched import hand_batched_seconds_per_round
from raycompo.bench.timing import engine_seconds_per_round, hand_loop_seconds_per_round
from raycompo.configuration.config import RunConfig, resolve
from raycompo.engine.federation import Federation
from raycompo.errors import ConfigError
from raycompo.tasks.sampler import DEFAULT_SAMPLER

WORKLOADS: dict[str, dict[str, Any]] = {
    "logistic-784": {"n_features": 784, "n_classes": 10, "tau": 5, "batch_size": 32, "lr": 0.01},
    "synthetic": {"tau": 20, "batch_size": 10, "lr": 0.01},
}
ALGOS = {"fedavg": {}, "comfedl": {"gamma": 10.0}}


def config(workload: str, algo: str, m: int, backend: str, vectorize: str, hosts: int = 2,
           sampler: str = DEFAULT_SAMPLER) -> RunConfig:
    settings = {**WORKLOADS[workload], **ALGOS[algo], "n_clients": m, "clients_per_round": m}
    # Ray: a host that cannot start (no free CPU) or answer fails within 5 minutes, naming itself.
    extra = {"clients_per_actor": -(-m // hosts), "cpus_per_actor": 0.5, "host_timeout_s": 300.0} if backend == "ray" else {}
    return RunConfig(task="synthetic", algo=algo, rounds=10**6, eval_every=10**6, settings=settings, backend=backend,
                     vectorize=vectorize, sampler=sampler, **extra)


def matmul_rate(threads: int) -> float:
    """FLOP/s of a float32 1024 x 1024 matrix product in this process (best of 5)."""
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * 1024**3 / best


def round_flops(cfg: RunConfig) -> float:
    """FLOPs of one round's matrix products: per local step and client, the forward x W^T
    and the weight gradient dlogits^T x, 2 * b_i * d * C each (b_i = min(batch, n_i))."""
    r = resolve(cfg)
    s, t = r.algo_settings, r.task_settings
    task = r.make_task()
    sizes = [c.num_samples for c in task.clients(list(range(r.n_clients)))]
    rows = sum(min(s.batch_size, n) for n in sizes)
    return s.tau * rows * 2 * (2 * t.n_features * t.n_classes)


def round_shapes(cfg: RunConfig) -> tuple[int, int, int, int, int]:
    """(tau, m, C, d, b) of a round's batched products: b the padded batch width, the largest
    client's min(batch, n_i) (what the batched step multiplies, padding included)."""
    r = resolve(cfg)
    s, t = r.algo_settings, r.task_settings
    task = r.make_task()
    sizes = [c.num_samples for c in task.clients(list(range(r.n_clients)))]
    width = max(min(s.batch_size, n) for n in sizes)
    return s.tau, len(sizes), t.n_classes, t.n_features, width


def products_seconds(tau: int, m: int, classes: int, d: int, b: int, repeats: int = 5,
                     clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds of a round's batched products alone (the best of `repeats`): for each of
    tau steps, the forward (m, C, d) x (m, d, b) (`baddbmm` with the bias, as the model runs
    it) and the weight gradient (m, C, b) x (m, b, d) (`bmm`), on contiguous random float32
    tensors, each step's batch a tensor of its own (as each step's gathered rows are: read
    from memory, not from a cache that one reused batch would stay in). `clock`: wall
    (perf_counter) or this process's CPU time (process_time)."""
    w, bias = torch.randn(m, classes, d), torch.randn(m, classes, 1)
    xs, g = torch.randn(tau, m, b, d), torch.randn(m, classes, b)
    grad = torch.empty(m, classes, d)
    best = float("inf")
    for _ in range(repeats + 1):  # the first: warm-up
        t0 = clock()
        for x in xs:
            torch.baddbmm(bias, w, x.transpose(1, 2))
            torch.bmm(g, x, out=grad)
        best = min(best, clock() - t0)
    return best


def engine_seconds(fed: Any, rounds: int, cpu: bool = False) -> float:
    """Seconds per round of `fed`: wall clock, or this process's CPU time (`cpu`: an inline
    engine's work, with one torch thread nearly insensitive to other processes' load)."""
    t = engine_seconds_per_round(fed, rounds, warmup=1)
    return t.cpu if cpu else t.wall


def ray_seconds(cfg: RunConfig, rounds: int) -> tuple[float, float]:
    """(seconds per round, the largest host actor's resident memory in MB after the rounds)."""
    import ray

    from raycompo.configuration.backends import get_backend
    from raycompo.engine.driver import start_driver

    namespace = "raycompo-bench-cohort"
    driver = start_driver(resolve(cfg), get_backend("ray"), "actor", namespace)
    try:
        seconds = engine_seconds(driver, rounds)
        hosts = len(driver.pool_stats()["host_busy_s"])
        actors = [ray.get_actor(f"clients-{j}", namespace=namespace) for j in range(hosts)]
        rss = max(f["rss_mb"] for f in ray.get([a.footprint.remote() for a in actors], timeout=60))
        return seconds, rss
    finally:
        driver.close()


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser (main parses with it; tests check documented commands)."""
    p = argparse.ArgumentParser(prog="python -m raycompo.bench cohort", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--m", type=int, nargs="+", default=[10, 100, 1000], help="cohort sizes (the whole population)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per engine (after one warm-up round)")
    p.add_argument("--repeats", type=int, default=1, help="measure this many times, interleaved; report the median")
    p.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    p.add_argument("--algos", nargs="+", choices=list(ALGOS), default=list(ALGOS))
    p.add_argument("--no-ray", action="store_true", help="leave out the two Ray columns")
    p.add_argument("--hosts", type=int, default=2, help="Ray host actors (the cohort split evenly)")
    p.add_argument("--threads", type=int, default=None, help="torch threads in this process (default: torch's choice)")
    p.add_argument("--cpu-time", action="store_true",
                   help="floor, hand and inline columns in this process's CPU seconds (ray columns stay wall clock)")
    p.add_argument("--sampler", choices=("randperm", "keyed"), default=DEFAULT_SAMPLER,
                   help="how the engine's runs draw clients' mini-batches (python -m raycompo.run --sampler); "
                        "the hand-written loops draw with randperm")
    p.add_argument("--floor-repeats", type=int, default=20, help="timings of the round's products; the floor is the best")
    return p


COLUMNS = ("hand loop", "hand batched", "inline", "inline vec", "ray", "ray vec")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    # Vectorized hosts keep freed heap blocks (engine/allocator.py), a process-wide setting:
    # set once here, so every inline column is timed under the same allocator.
    from raycompo.engine.allocator import keep_large_allocations

    keep_large_allocations()
    rate = matmul_rate(torch.get_num_threads())
    use_ray = not args.no_ray
    if use_ray:
        import ray

        ray.init(include_dashboard=False, log_to_driver=False, num_cpus=max(2, args.hosts))
    print(f"float32 matmul rate here (1024^3 product): {rate / 1e9:.1f} GFLOP/s with {torch.get_num_threads()} torch "
          f"thread(s); ray hosts: {args.hosts if use_ray else '-'}")
    header = f"{'workload':<13} {'algo':<8} {'m':>5} {'floor':>8} {'flop floor':>10} " + " ".join(f"{c:>{max(10, len(c))}}" for c in COLUMNS)
    print(header + "   vec/floor  inline/vec  hand/vec  inline/hand-b  vec/hand-b" + ("   (largest host: ray / ray vec)" if use_ray else ""))
    clock = time.process_time if args.cpu_time else time.perf_counter
    unit = "CPU ms of this process" if args.cpu_time else "wall ms"
    print(" " * 37 + f"{unit}/round (floor: the round's batched products alone; flop floor: its FLOPs at the 1024^3 rate)")
    for workload in args.workloads:
        for algo in args.algos:
            for m in args.m:
                cfg = config(workload, algo, m, "inline", "off", sampler=args.sampler)  # the hand columns' draws too
                flop_floor = round_flops(cfg) / rate
                shapes = round_shapes(cfg)
                times: dict[str, list[float]] = {c: [] for c in COLUMNS}
                floors: list[float] = []
                rss: dict[str, float] = {}
                for _ in range(args.repeats):
                    floors.append(products_seconds(*shapes, repeats=args.floor_repeats, clock=clock))
                    hand = hand_loop_seconds_per_round(cfg, args.rounds, 1)
                    times["hand loop"].append(hand.cpu if args.cpu_time else hand.wall)
                    try:
                        batched = hand_batched_seconds_per_round(cfg, args.rounds, 1)
                        times["hand batched"].append(batched.cpu if args.cpu_time else batched.wall)
                    except ConfigError:  # not FedAvg on clients of at least a batch: no hand-written form
                        pass
                    for col, v in (("inline", "off"), ("inline vec", "on")):
                        fed = Federation(config(workload, algo, m, "inline", v, sampler=args.sampler))
                        times[col].append(engine_seconds(fed, args.rounds, args.cpu_time))
                    if use_ray:
                        for col, v in (("ray", "off"), ("ray vec", "on")):
                            sec, rss[col] = ray_seconds(config(workload, algo, m, "ray", v, args.hosts, args.sampler),
                                                       args.rounds)
                            times[col].append(sec)
                floor = min(floors)
                med = {c: statistics.median(v) if v else float("nan") for c, v in times.items()}
                cells = " ".join(f"{med[c] * 1e3:{max(10, len(c))}.2f}" for c in COLUMNS)
                print(f"{workload:<13} {algo:<8} {m:>5} {floor * 1e3:8.2f} {flop_floor * 1e3:10.2f} {cells}   "
                      f"{med['inline vec'] / floor:9.1f}x {med['inline'] / med['inline vec']:10.1f}x "
                      f"{med['hand loop'] / med['inline vec']:8.1f}x {med['inline'] / med['hand batched']:13.1f}x "
                      f"{med['inline vec'] / med['hand batched']:10.2f}x"
                      + (f"   host RSS {rss['ray']:.0f} / {rss['ray vec']:.0f} MB" if rss else ""), flush=True)
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if use_ray:
        import ray

        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
