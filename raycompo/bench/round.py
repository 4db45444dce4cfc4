"""Seconds per round of the same ComFedL experiment on three engines, side by side:

  hand-written   a plain torch loop over the clients (nn.Linear, autograd), no engine
  inline         raycompo's in-process backend, client by client (--vectorize off: the reference)
  inline vec     the same with the 10 clients as one batched computation (--vectorize on)
  ray            raycompo's Ray backend (driver actor + client-host actors), client by client
  ray vec        the same with each host's clients batched (one driver call per round, and
                 all the rounds in one call: what a run does, engine/loop.py)

and the cost of one `pool_stats()` call on the Ray driver (a round trip to every host: what
the dashboard's pool gauges fetch, at most once per metrics report interval).

    python -m raycompo.bench round [--rounds 30] [--clients-per-actor N]

Evaluation is excluded (rounds only). Figures are printed, never asserted: on a shared
machine timings vary; compare the ratios of one run. Besides wall-clock time, the hand-written
loop and inline also get this process's CPU seconds per round (`time.process_time`; with
`--threads 1` the work itself, less sensitive to other load than wall time; the Ray engine's
work is in other processes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

from raycompo.bench.timing import engine_seconds_per_round, hand_loop_seconds_per_round
from raycompo.configuration.config import RunConfig
from raycompo.engine.federation import Federation


def batched_seconds_per_round(fed, rounds: int, warmup: int) -> float:
    """Seconds per round when one call runs all `rounds` (what a run's loop does with a driver
    actor: several rounds per call, engine/loop.py)."""
    fed.run_rounds(warmup)
    t0 = time.perf_counter()
    fed.run_rounds(rounds)
    return (time.perf_counter() - t0) / rounds


def call_seconds(fn, calls: int) -> float:
    """Seconds per call of `fn()` (e.g. the driver's pool_stats: a round trip to every host)."""
    fn()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser (main parses with it; tests check documented commands)."""
    p = argparse.ArgumentParser(prog="python -m raycompo.bench round", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3, help="measure each engine this many times, interleaved; report the median")
    p.add_argument("--clients-per-actor", type=int, default=None)
    p.add_argument("--cpus-per-actor", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=None, help="torch threads in this process (default: torch's choice)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    import ray

    from raycompo.configuration.backends import get_backend
    from raycompo.configuration.config import resolve
    from raycompo.engine.driver import start_driver

    settings = {"lr": 0.01, "gamma": 1.0, "tau": 5, "batch_size": 32}
    cfg = RunConfig(task="dro-mnist5k", algo="comfedl", rounds=10**6, eval_every=10**6, settings=settings, backend="inline",
                    vectorize="off")
    ray_cfg = RunConfig(**{**cfg.to_dict(), "backend": "ray", "clients_per_actor": args.clients_per_actor, "cpus_per_actor": args.cpus_per_actor,
                           "host_timeout_s": 300.0})  # a host that cannot start fails within 5 min, named
    ray.init(include_dashboard=False, log_to_driver=False)
    inline = Federation(cfg)
    inline_vec = Federation(RunConfig(**{**cfg.to_dict(), "vectorize": "on"}))
    # One Ray engine at a time: both would need twice the CPUs their hosts reserve.
    ray_cfgs = {"ray": ray_cfg, "ray vec": RunConfig(**{**ray_cfg.to_dict(), "vectorize": "on"})}
    times: dict[str, list[float]] = {"hand-written": [], "inline": [], "inline vec": [], "ray": [], "ray vec": [],
                                     "ray vec, rounds per call": [], "pool_stats": []}
    cpu: dict[str, list[float]] = {"hand-written": [], "inline": []}
    for _ in range(args.repeats):
        for k, t in (("hand-written", hand_loop_seconds_per_round(cfg, args.rounds, args.warmup)),
                     ("inline", engine_seconds_per_round(inline, args.rounds, args.warmup))):
            times[k].append(t.wall)
            cpu[k].append(t.cpu)
        times["inline vec"].append(engine_seconds_per_round(inline_vec, args.rounds, args.warmup).wall)
        for k, c in ray_cfgs.items():
            remote = start_driver(resolve(c), get_backend("ray"), "actor", f"raycompo-bench-{k.replace(' ', '-')}")
            try:
                times[k].append(engine_seconds_per_round(remote, args.rounds, args.warmup).wall)
                if k == "ray":
                    times["pool_stats"].append(call_seconds(remote.pool_stats, args.rounds))
                else:
                    times["ray vec, rounds per call"].append(batched_seconds_per_round(remote, args.rounds, args.warmup))
            finally:
                remote.close()
    ray.shutdown()
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"ComFedL on dro-mnist5k: 10 clients, tau=5, batch 32; {args.rounds} rounds x {args.repeats} repeats (median)")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"torch threads here: {torch.get_num_threads()}; ray hosts: clients_per_actor={args.clients_per_actor or 'auto'}, cpus_per_actor={args.cpus_per_actor}")
    for k in ("hand-written", "inline", "inline vec", "ray", "ray vec", "ray vec, rounds per call"):
        v = med[k]
        print(f"  {k:<24} {v * 1000:8.2f} ms/round   (all: {', '.join(f'{x * 1000:.2f}' for x in times[k])})")
    print(f"  ratio inline / hand-written: {med['inline'] / med['hand-written']:.2f}")
    print(f"  ratio inline vec / hand-written: {med['inline vec'] / med['hand-written']:.2f}")
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"  CPU ms/round here: hand-written {mcpu['hand-written'] * 1000:.2f}, inline {mcpu['inline'] * 1000:.2f}; "
          f"ratio {mcpu['inline'] / mcpu['hand-written']:.2f}")
    print(f"  ratio ray / inline:          {med['ray'] / med['inline']:.2f}   (target <= 3)")
    print(f"  ratio ray / hand-written: {med['ray'] / med['hand-written']:.2f}; ray vec / hand-written: "
          f"{med['ray vec'] / med['hand-written']:.2f} (one driver call per round), "
          f"{med['ray vec, rounds per call'] / med['hand-written']:.2f} ({args.rounds} rounds per call, as a run does); target <= 1.5")
    print(f"  pool_stats() of the ray driver (what the dashboard gauges fetch): {med['pool_stats'] * 1000:.2f} ms a call, "
          f"{med['pool_stats'] / med['ray']:.0%} of a ray round")
    return 0


if __name__ == "__main__":
    sys.exit(main())
