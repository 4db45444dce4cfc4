"""Scale: seconds per round, memory and start-up with up to a million clients (issue 12).

    python -m raycompo.bench scale [--n 1000 1000000] [--m 100] [--rounds 4]
        [--backends inline ray] [--algos fedavg ditto] [--state-memory-gb 0.01]

For every (backend, algorithm, n, m) it builds a Federation on the synthetic task (the
engine that `raycompo.engine.run` drives; built directly so that the hosts' statistics can
be read), runs `--rounds` rounds and prints one row:

- s/round: median round time over the rounds after the first (`row["round_time"]`, the
  server round: cohort sampling, client phases on the hosts, the server rule);
- round1: start-up, seconds from the start of the configuration (building the task, the
  hosts, for Ray the actors; the first Ray row also pays `ray.init`, the first row lazy
  imports) to the end of round 1; a last line gives the command's start (interpreter and
  imports included) to the end of the first row's round 1;
- peak MB: peak resident memory of this process and all its descendants (for a Ray
  instance started here: GCS, raylet, its workers and agents): the sum of each process's
  kernel peak RSS (VmHWM), restarted at each configuration's start and read before its
  hosts end (`PeakRSS`; shared pages are counted once per process, and peaks of
  different processes are added as if they coincided);
- state MB / spilled MB: idle client state held in memory / spilled to disk, summed over
  the hosts (`Host.stats()`);
- busy: the busiest host's seconds in client phases, over the run (`pool_stats()`).

Evaluation is off until the last round (`eval_every=rounds`) and then runs on a seeded
sample of `--eval-clients` clients. With `--subprocess` every configuration runs in a fresh
Python process: its start is then the command's (interpreter, imports, the configuration's
start-up, round 1) and its peak memory its own, free of the configurations before it.

A last block compares, for every (backend, algorithm, m, budget) run at several n, the
largest n with the smallest: peak memory and start, as ratios. Numbers are printed, never
asserted; the targets (issue 12: n = 10^6 with per-client state runs, s/round at 10^6 within
1.5x of 10^3, memory below 8 GB; issue 28: a 10^7-client FedAvg run's peak within 1.25x and
its start within 1.5x of a 10^3-client run's) are for the reader to compare against:

    python -m raycompo.bench scale --subprocess --n 1000 10000000 --m 100 --backends inline --algos fedavg
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

try:
    import psutil
except ImportError:  # ray[default] ships its own copy, put on sys.path by `import ray`
    import ray  # noqa: F401, I001
    import psutil

from raycompo.configuration.config import RunConfig


def _status_kb(pid: int | str, field: str) -> int | None:
    """A `kB` field of /proc/<pid>/status (VmHWM: the kernel's peak RSS), None if unreadable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _reset_peak(pid: int | str) -> bool:
    """Restart the kernel's peak RSS (VmHWM) of a process at its current RSS (Linux >= 4.0:
    `5` written to /proc/<pid>/clear_refs); False where not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class PeakRSS:
    """Peak memory of this process and its descendants (for a Ray instance started here:
    GCS, raylet, its workers and agents) during a `with` block: the sum over those
    processes of each one's kernel peak RSS (VmHWM of /proc/<pid>/status, which misses no
    short peak), reset at the start of the block. A thread re-reads every process's peak
    every `interval` seconds, so a process that ends in the block still counts (with its
    peak up to its last reading). Per-process peaks need not coincide: the sum is an upper
    bound of the summed RSS at any one moment. Where a peak cannot be restarted it covers
    the process's life (`reset_ok` False). Without /proc (not Linux), RSS sampled by the
    thread instead, which misses peaks shorter than the interval."""

    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.peaks: dict[int, int] = {}
        """pid -> peak bytes seen for it in the block."""
        self.exact = _status_kb("self", "VmHWM") is not None
        self.reset_ok = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @property
    def peak(self) -> int:
        return sum(self.peaks.values())

    @staticmethod
    def _tree() -> list[Any]:
        me = psutil.Process()
        try:
            return [me, *me.children(recursive=True)]
        except psutil.Error:
            return [me]

    def read(self) -> None:
        for p in self._tree():
            kb = _status_kb(p.pid, "VmHWM") if self.exact else None
            if kb is not None:
                b = kb * 1024
            else:
                try:
                    b = p.memory_info().rss
                except psutil.Error:
                    continue
            self.peaks[p.pid] = max(self.peaks.get(p.pid, 0), b)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.read()
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRSS:
        # Restart every live process's peak now: one from an earlier block (this process,
        # a Ray instance started before) must not carry that block's peak into this one.
        self.reset_ok = all([_reset_peak(p.pid) for p in self._tree()]) if self.exact else False
        self.read()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.read()

@dataclass
class Result:
    backend: str
    algo: str
    n: int
    m: int
    rounds: int
    state_memory_gb: float | None
    sec_per_round: float
    startup_s: float
    peak_rss_bytes: int
    state_memory_bytes: float
    state_spilled_bytes: float
    host_busy_max_s: float
    round_times: list[float]
    since_command_s: float = 0.0
    """Seconds from this process's start (the command) to the end of round 1."""


def host_stats(fed: Any) -> list[dict[str, float]]:
    pool = fed.pool
    if hasattr(pool, "actors"):
        import ray

        return ray.get([a.stats.remote() for a in pool.actors])
    return [pool.host.stats()]


def bench_one(backend: str, algo: str, n: int, m: int, rounds: int = 4, state_memory_gb: float | None = None,
              eval_clients: int = 50, hosts: int = 2, settings: dict[str, Any] | None = None,
              threads: int | None = 1) -> Result:
    """One configuration; `rounds` >= 2 (the first is start-up, the rest are timed).
    `threads`: torch threads of this process (the inline host runs here; Ray hosts set
    their own). 1 by default: on a loaded 2-core machine torch's default (one per core)
    made the synthetic task's tiny steps about 20x slower."""
    import torch

    from raycompo.engine.federation import Federation

    if threads:
        torch.set_num_threads(threads)

    rounds = max(2, rounds)
    cfg = RunConfig(
        task="synthetic", algo=algo, rounds=rounds, backend=backend, eval_every=rounds, eval_clients=eval_clients,
        state_memory_gb=state_memory_gb, cpus_per_actor=0.5 if backend == "ray" else 1.0,
        settings={"n_clients": n, "clients_per_round": m, **(settings or {})},
    )
    if backend == "ray":
        import math

        from raycompo.engine.ray_start import ensure_ray

        cfg.clients_per_actor = math.ceil(n / hosts)
    gc.collect()
    with PeakRSS() as mem:
        t0 = time.perf_counter()
        if backend == "ray":
            ensure_ray(None, include_dashboard=False)
        fed = Federation(cfg)
        try:
            rows = [fed.run_round()]
            startup = time.perf_counter() - t0
            since_command = time.time() - psutil.Process().create_time()
            rows += fed.run_rounds(rounds - 1)
            hs = host_stats(fed)
            ps = fed.pool_stats()
        finally:
            mem.read()  # the hosts' peaks, before they end
            fed.close()
    times = [float(r["round_time"]) for r in rows]
    return Result(
        backend, algo, n, m, rounds, state_memory_gb, statistics.median(times[1:]), startup, mem.peak,
        sum(h["state_memory_bytes"] for h in hs), sum(h["state_spilled_bytes"] for h in hs),
        float(ps.get("host_busy_max_s", max(h["busy_seconds"] for h in hs))), times, since_command,
    )


HEADER = f"{'backend':7} {'algo':6} {'n':>8} {'m':>5} {'budgetGB':>8} {'s/round':>8} {'round1':>7} {'peak MB':>8} {'state MB':>8} {'spill MB':>8} {'busy s':>7}"


def fmt(r: Result) -> str:
    b = "-" if r.state_memory_gb is None else f"{r.state_memory_gb:g}"
    return (f"{r.backend:7} {r.algo:6} {r.n:>8} {r.m:>5} {b:>8} {r.sec_per_round:8.3f} {r.startup_s:7.2f} "
            f"{r.peak_rss_bytes / 2**20:8.0f} {r.state_memory_bytes / 2**20:8.2f} {r.state_spilled_bytes / 2**20:8.2f} "
            f"{r.host_busy_max_s:7.2f}")


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser (main parses with it; tests check documented commands)."""
    p = argparse.ArgumentParser(prog="python -m raycompo.bench scale", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, nargs="+", default=[10**3, 10**4, 10**5, 10**6])
    p.add_argument("--m", type=int, nargs="+", default=[100, 1000])
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--backends", nargs="+", default=["inline", "ray"], choices=["inline", "ray"])
    p.add_argument("--algos", nargs="+", default=["fedavg", "ditto"])
    p.add_argument("--state-memory-gb", type=lambda v: None if v.lower() == "none" else float(v), nargs="+", default=[None],
                   help="state budgets to run (over all hosts); 'none' for no limit", metavar="GB")
    p.add_argument("--eval-clients", type=int, default=50)
    p.add_argument("--hosts", type=int, default=2, help="Ray client-host actors")
    p.add_argument("--threads", type=int, default=1, help="torch threads of this process (0: torch's default)")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="extra task/algorithm settings")
    p.add_argument("--subprocess", action="store_true",
                   help="each configuration in a fresh Python process (start: the command's; peak memory: its own)")
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one JSON line per Result (what --subprocess reads)
    return p


CHILD_TIMEOUT_S = 3600.0
"""How long `--subprocess` waits for one configuration's process."""


def run_child(backend: str, algo: str, n: int, m: int, budget: float | None, a: argparse.Namespace) -> Result:
    """One configuration in a fresh Python process (`--subprocess`): its Result, read from
    the JSON line the child prints."""
    cmd = [sys.executable, "-m", "raycompo.bench", "scale", "--json", "--n", str(n), "--m", str(m),
           "--rounds", str(a.rounds), "--backends", backend, "--algos", algo,
           "--state-memory-gb", "none" if budget is None else str(budget), "--eval-clients", str(a.eval_clients),
           "--hosts", str(a.hosts), "--threads", str(a.threads), "--set", *a.set]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"bench scale: {backend} {algo} n={n} m={m} did not finish within {CHILD_TIMEOUT_S:g} s") from e
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"bench scale: {backend} {algo} n={n} m={m} failed (exit {done.returncode}): "
                           f"{done.stderr.strip()[-2000:]}")
    return Result(**json.loads(lines[-1]))


def compare(results: list[Result], fresh: bool) -> list[str]:
    """Lines comparing, per (backend, algo, m, budget), the largest n with the smallest:
    peak memory and start (`since_command_s` of fresh processes, else `startup_s`)."""
    groups: dict[tuple, list[Result]] = {}
    for r in results:
        groups.setdefault((r.backend, r.algo, r.m, r.state_memory_gb), []).append(r)
    out = []
    what = "command to round 1" if fresh else "round1; the first row also pays lazy imports: --subprocess for the command's"
    for (backend, algo, m, _), rs in groups.items():
        small, big = min(rs, key=lambda r: r.n), max(rs, key=lambda r: r.n)
        if small.n == big.n:
            continue
        start = (lambda r: r.since_command_s) if fresh else (lambda r: r.startup_s)
        out.append(f"{backend} {algo} m={m}: n={big.n} / n={small.n}: peak memory {big.peak_rss_bytes / small.peak_rss_bytes:.2f}x "
                   f"({big.peak_rss_bytes / 2**20:.0f} / {small.peak_rss_bytes / 2**20:.0f} MB), start "
                   f"{start(big) / start(small):.2f}x ({start(big):.2f} / {start(small):.2f} s, {what})")
    return out


def main(argv: list[str] | None = None) -> list[Result]:
    a = build_parser().parse_args(argv)
    extra: dict[str, Any] = {}
    for kv in a.set:
        k, _, v = kv.partition("=")
        try:
            extra[k] = int(v)
        except ValueError:
            try:
                extra[k] = float(v)
            except ValueError:
                extra[k] = v
    if not a.json:
        print(HEADER, flush=True)
    results = []
    for backend in a.backends:
        for algo in a.algos:
            for budget in a.state_memory_gb:
                for n in a.n:
                    for m in a.m:
                        if m > n:
                            continue
                        if a.subprocess:
                            r = run_child(backend, algo, n, m, budget, a)
                        else:
                            r = bench_one(backend, algo, n, m, a.rounds, budget, a.eval_clients, a.hosts, extra, a.threads)
                        results.append(r)
                        print(json.dumps(dataclasses.asdict(r)) if a.json else fmt(r), flush=True)
    if results and not a.json:
        if a.subprocess:
            print("each configuration in a fresh process; command start to its round 1: "
                  + ", ".join(f"{r.since_command_s:.1f}" for r in results) + " s", flush=True)
        else:
            print(f"command start to the end of the first configuration's round 1: {results[0].since_command_s:.1f} s "
                  "(interpreter, imports, and that configuration's start-up)", flush=True)
        for line in compare(results, a.subprocess):
            print(line, flush=True)
    return results


if __name__ == "__main__":
    main()
