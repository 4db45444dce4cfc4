"""Sweeps on Ray: trials per minute with reused and with fresh host actors, against the
inline backend, and what a host actor costs to start and to keep (issue 10 item 4).

    python -m raycompo.bench sweep [--samples 2] [--rounds 3] [--hosts-per-trial 2]
        [--modes inline ray-reused ray-fresh] [--num-cpus N]

Everything runs in this process on one local Ray instance, side by side:

1. start-up: one run of `--rounds` rounds on the dro space's task with the Ray backend
   (driver here, `--hosts-per-trial` host actors, as in a trial): seconds from this
   command (the interpreter's start) to the end of round 1, and from the run's start to
   the end of round 1 with fresh hosts and with hosts reset by a `ReusedHosts` (a
   sweep's later trials); each host actor's resident and unique memory (RSS, USS; MB)
   and the large optional libraries it imported (`Host.footprint`).
2. throughput: the same `dro` sweep (`--search optuna` with a fixed seed: the same
   trials; `--samples` per algorithm, `--rounds` rounds) once per mode with
   `raycompo.tune.sweep.run_sweep`, i.e. `python -m raycompo.tune --space dro --backend
   inline`, `--backend ray` and `--backend ray --no-reuse-hosts`: trials per minute over
   the sweep's wall time (Tune's start and the trial actors' included), the mean trial
   time, and how many host actors were started.

Figures are printed, never asserted; the ratio ray-reused / inline is printed last.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODES = ("inline", "ray-reused", "ray-fresh")


def since_command() -> float:
    """Seconds since this process started."""
    import psutil

    return time.time() - psutil.Process().create_time()


def host_actor_ids() -> set[str]:
    """Every host actor the cluster has seen (alive or dead), from Ray's actor table."""
    from ray._private.state import actors  # Ray's debug view: works without the dashboard

    return {a["ActorID"] for a in actors().values() if a["Name"].startswith("clients-")}


def startup(rounds: int, hosts: int) -> dict[str, Any]:
    """Section 1 (see the module doc)."""
    import ray

    from raycompo.configuration.config import RunConfig
    from raycompo.engine import run
    from raycompo.engine.host_actors import ReusedHosts
    from raycompo.tune.space import load_space
    from raycompo.tune.trainable import host_plan

    space = load_space("dro")
    n = 10  # dro-mnist5k's clients
    per, _ = host_plan(n, hosts)
    cfg = RunConfig(task=space.task, algo="fedavg", rounds=rounds, backend="ray", clients_per_actor=per,
                    cpus_per_actor=0.25, settings=dict(space.settings))
    out: dict[str, Any] = {}
    namespace = "bench-sweep-fresh"
    marks: dict[str, float] = {}
    footprints: list[dict[str, Any]] = []

    def at_round_1(key: str, look: bool = False):
        def progress(row):
            if row["round"] == 1 and key not in marks:
                marks[key] = time.perf_counter()
                marks[key + "_cmd"] = since_command()
                if look:
                    found = [ray.get_actor(f"clients-{j}", namespace=namespace) for j in range(hosts)]
                    footprints.extend(ray.get([a.footprint.remote() for a in found], timeout=60))
        return progress

    t0 = time.perf_counter()
    run(cfg, driver="local", namespace=namespace, progress=at_round_1("fresh", look=True))
    out["command_to_round1_s"] = marks["fresh_cmd"]
    out["fresh_to_round1_s"] = marks["fresh"] - t0
    out["fresh_footprint"] = footprints
    cache = ReusedHosts()
    try:
        run(cfg, driver="local", hosts=cache)  # starts the hosts the next run reuses
        t0 = time.perf_counter()
        run(cfg, driver="local", hosts=cache, progress=at_round_1("reused"))
        out["reused_to_round1_s"] = marks["reused"] - t0
        out["reused_footprint"] = ray.get([a.footprint.remote() for a in cache.idle], timeout=60)
    finally:
        cache.close()
    return out


def sweep(mode: str, samples: int, rounds: int, hosts: int, max_concurrent: int | None, root: Path) -> dict[str, Any]:
    """Section 2 for one mode (see the module doc)."""
    import pandas as pd

    from raycompo.tune.sweep import SweepOptions, check_resources, prepare, run_sweep

    opts = SweepOptions(space="dro", search="optuna", samples=samples, rounds=rounds,
                        backend="inline" if mode == "inline" else "ray", hosts_per_trial=hosts,
                        max_concurrent=max_concurrent, reuse_hosts=mode != "ray-fresh", out=str(root / mode))
    space, meta, store = prepare(opts)
    check_resources(space, meta)
    before = host_actor_ids()
    t0 = time.perf_counter()
    outcome = run_sweep(space, meta, store, quiet=True)
    wall = time.perf_counter() - t0
    trials = pd.read_csv(store.trials_path)
    return {
        "mode": mode, "trials": int(outcome.ran), "wall_s": wall, "per_min": 60.0 * outcome.ran / wall,
        "trial_s": float(trials["time_s"].mean()), "hosts_started": len(host_actor_ids() - before),
        "statuses": trials["status"].value_counts().to_dict(),
        "final": dict(zip(trials["trial_id"], trials["final_val_acc_worst"])),
    }


def fmt_footprint(fps: list[dict[str, Any]]) -> str:
    return "; ".join(f"RSS {f['rss_mb']:.0f} MB, USS {f['uss_mb']:.0f} MB" for f in fps) + (
        f"  (imported: {', '.join(fps[0]['imported']) or 'none of them'})" if fps else "")


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser (main parses with it; tests check documented commands)."""
    p = argparse.ArgumentParser(prog="python -m raycompo.bench sweep", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples", type=int, default=2, help="Optuna trials per algorithm (4 algorithms)")
    p.add_argument("--rounds", type=int, default=3, help="rounds per trial")
    p.add_argument("--hosts-per-trial", type=int, default=2)
    p.add_argument("--max-concurrent", type=int, default=None, help="trials at once (default: as many as fit)")
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray instance (default: all)")
    p.add_argument("--no-startup", action="store_true", help="skip the start-up measurement")
    return p


def main(argv: list[str] | None = None) -> dict[str, Any]:
    a = build_parser().parse_args(argv)
    if a.samples < 1 or a.rounds < 1 or a.hosts_per_trial < 1:
        print("error: --samples, --rounds and --hosts-per-trial must be >= 1", file=sys.stderr)
        raise SystemExit(2)

    from raycompo.tune.sweep import ensure_ray

    t0 = time.perf_counter()
    ensure_ray(None, a.num_cpus)
    import ray

    cpus = ray.cluster_resources().get("CPU", 0)
    print(f"Ray: {cpus:g} CPUs, started in {time.perf_counter() - t0:.1f} s; dro sweep: {a.samples} Optuna sample(s) "
          f"x 4 algorithms, {a.rounds} rounds, {a.hosts_per_trial} host(s) per Ray trial", flush=True)
    result: dict[str, Any] = {}
    if not a.no_startup:
        s = startup(a.rounds, a.hosts_per_trial)
        result["startup"] = s
        print("\nstart-up (one run, fedavg, Ray backend, driver in this process):", flush=True)
        print(f"  command to round 1 (interpreter, imports, ray.init, fresh hosts): {s['command_to_round1_s']:.1f} s")
        print(f"  run start to round 1, fresh hosts:  {s['fresh_to_round1_s']:.2f} s")
        print(f"  run start to round 1, reused hosts: {s['reused_to_round1_s']:.2f} s")
        print(f"  host actor memory at round 1 (fresh): {fmt_footprint(s['fresh_footprint'])}")
        print(f"  host actor memory after 2 runs (reused): {fmt_footprint(s['reused_footprint'])}", flush=True)

    print(f"\n{'mode':11} {'trials':>6} {'wall s':>7} {'trials/min':>10} {'mean trial s':>12} {'hosts started':>13}",
          flush=True)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        for mode in a.modes:
            r = sweep(mode, a.samples, a.rounds, a.hosts_per_trial, a.max_concurrent, Path(tmp))
            rows[mode] = r
            hosts = "-" if mode == "inline" else str(r["hosts_started"])
            print(f"{mode:11} {r['trials']:>6} {r['wall_s']:7.1f} {r['per_min']:10.2f} {r['trial_s']:12.2f} {hosts:>13}",
                  flush=True)
    result["sweeps"] = rows
    if "inline" in rows:
        for mode in ("ray-reused", "ray-fresh"):
            if mode in rows:
                print(f"ratio {mode} / inline (trials per minute): {rows[mode]['per_min'] / rows['inline']['per_min']:.2f}")
    finals = [r["final"] for r in rows.values()]
    if len(finals) > 1:
        same = all(f.keys() == finals[0].keys() for f in finals)
        if same:
            same = all(abs(f[k] - finals[0][k]) <= 1e-6 * max(1.0, abs(finals[0][k])) or f[k] == finals[0][k]
                       for f in finals for k in f)
        print(f"same trials and final {'val_acc_worst'} in every mode: {'yes' if same else 'NO'}")
    return result


if __name__ == "__main__":
    main()
