"""Per-step cost of FedDRO's y exchange: Ray backend against inline, 8 clients.

    python -m raycompo.bench feddro [--clients 8] [--sync-every 8] [--rounds 4] [--task feddro-digits-st]

FedDRO exchanges y (d_g = 1 number per client) at every local step and the model every
I steps; a round of I steps costs I + 1 exchanges (the y exchange is fused with the step).
For each backend, per client (`--vectorize off`) and vectorized (`auto`: each host's
clients as one batched computation where the task allows it; the header says what
batched), the benchmark times `--rounds` rounds of the algorithm (no evaluation,
after one warm-up round) and prints:

* step: wall time per local step (round time / I);
* compute: time inside the client hooks per step (the busiest host; hosts run in parallel);
* exchange: step - compute, the cost of the exchanges (scheduling, serialization, the
  driver's reduction) per step, and its share of the step;
* ping: one bare exchange (a no-op hook returning a y-sized tensor to every host), i.e.
  the latency floor of the y exchange.

Numbers are printed, never asserted; they depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import time
import uuid

from raycompo.configuration.config import RunConfig, resolve
from raycompo.configuration.vectorize import resolved_plan
from raycompo.engine.allocator import keep_large_allocations
from raycompo.engine.federation import Federation, RoundCtx


def _busy(fed: Federation) -> float:
    return fed.pool_stats()["host_busy_max_s"]


def measure(cfg: RunConfig, rounds: int, pings: int, pool_factory=None) -> dict[str, float]:
    fed = Federation(cfg, pool_factory)
    try:
        clients = list(range(fed.n_clients))
        fed.w, fed.state = fed.algorithm.server_round(RoundCtx(fed, 0), fed.w, fed.state)  # warm-up
        busy0, t0 = _busy(fed), time.perf_counter()
        for r in range(1, rounds + 1):
            fed.w, fed.state = fed.algorithm.server_round(RoundCtx(fed, r), fed.w, fed.state)
        wall = time.perf_counter() - t0
        busy = _busy(fed) - busy0
        ctx = RoundCtx(fed, rounds + 1)
        t1 = time.perf_counter()
        for _ in range(pings):
            ctx.map("ping", clients, {})
        ping = (time.perf_counter() - t1) / pings
    finally:
        fed.close()
    steps = rounds * fed.algorithm.s.sync_every
    return {"step": wall / steps, "compute": busy / steps, "ping": ping}


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser (main parses with it; tests check documented commands)."""
    p = argparse.ArgumentParser(prog="python -m raycompo.bench feddro", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="feddro-digits-st")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--sync-every", type=int, default=8, help="I, local steps per model averaging")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--pings", type=int, default=50)
    p.add_argument("--clients-per-actor", type=int, default=None)
    p.add_argument("--address", default=None)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = {"n_clients": args.clients, "sync_every": args.sync_every, "batch_size": args.batch_size}
    base = dict(task=args.task, algo="feddro", rounds=args.rounds, settings=settings, clients_per_actor=args.clients_per_actor)

    import torch

    # One torch thread in the inline process, as in each Ray host (cpus_per_actor = 1):
    # on a loaded machine two OpenMP threads can make tiny ops many times slower.
    torch.set_num_threads(1)
    # Vectorized hosts keep freed heap blocks (engine/allocator.py), a process-wide setting:
    # set here once, so the per-client inline run is timed under the same allocator.
    keep_large_allocations()
    plan = resolved_plan(resolve(RunConfig(**base, backend="inline")))
    results = {"inline": measure(RunConfig(**base, backend="inline", vectorize="off"), args.rounds, args.pings),
               "inline vec": measure(RunConfig(**base, backend="inline", vectorize="auto"), args.rounds, args.pings)}

    from raycompo.engine.pool_factory import make_pool
    from raycompo.engine.ray_start import ensure_ray

    ensure_ray(args.address, include_dashboard=False)
    ns = f"raycompo-bench-{uuid.uuid4().hex[:8]}"
    for name, mode in (("ray", "off"), ("ray vec", "auto")):
        cfg = RunConfig(**base, backend="ray", vectorize=mode)
        results[name] = measure(cfg, args.rounds, args.pings, lambda r: make_pool(r, namespace=ns))

    print(f"FedDRO on {args.task}: K={args.clients} clients, I={args.sync_every}, batch {args.batch_size}, "
          f"{args.rounds} rounds ({args.sync_every + 1} exchanges per round); "
          f"vec rows batch: {', '.join(plan.phases) or 'nothing'}{f' ({plan.why_not})' if plan.why_not else ''}")
    print(f"{'backend':10} {'step ms':>9} {'compute ms':>11} {'exchange ms':>12} {'exch share':>11} {'ping ms':>9}")
    for name, r in results.items():
        exch = max(0.0, r["step"] - r["compute"])
        print(f"{name:10} {1e3 * r['step']:9.2f} {1e3 * r['compute']:11.2f} {1e3 * exch:12.2f} {exch / r['step']:11.1%} {1e3 * r['ping']:9.2f}")
    ratio = results["ray"]["step"] / results["inline"]["step"]
    print(f"ray / inline per-step time: {ratio:.2f}x; one bare y exchange over Ray: {1e3 * results['ray']['ping']:.2f} ms "
          f"({results['ray']['ping'] * (args.sync_every + 1) / args.sync_every / results['ray']['step']:.1%} of a step)")
    print(f"vectorized / per client: inline {results['inline vec']['step'] / results['inline']['step']:.2f}x, "
          f"ray {results['ray vec']['step'] / results['ray']['step']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
