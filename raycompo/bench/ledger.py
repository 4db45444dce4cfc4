"""Ledger: what counting the costs of every exchange adds to a round (issue 26).

    python -m raycompo.bench ledger [--n 1000000] [--m 100] [--pairs 10]
        [--algos fedavg ditto] [--backends inline] [--vectorize auto off]

For every (backend, algorithm, vectorize, n, m) one Federation on the synthetic task runs
`--pairs` pairs of rounds, one round with counting and one without (`Federation.counting`,
the internal switch that exists for this comparison only), the order alternating from
pair to pair so that a drift of the machine's load falls on both sides. It prints the
median round time of each side and the overhead: median(with) / median(without) - 1
(target: at most 3%), of the wall clock and of this process's CPU time (inline: the whole
round's work, and less disturbed by the other processes of a loaded machine; on Ray the
hosts' share is not in it), and of the least CPU time of each side. On a loaded machine
those differences of two rounds are noisier than the overhead itself, so the inline rows
also time the counting code directly (`timed_counting`: each call of it timed, in a few
more rounds with counting) and print its milliseconds per round and its share of a round. Counting changes no arithmetic (tests/test_ledger.py), so both sides
run the same rounds. Evaluation is off (`eval_every` past the last round). Figures are
printed, never asserted: report them with the machine's load (`uptime`).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from dataclasses import dataclass, field

from raycompo.configuration.config import RunConfig


@dataclass
class Result:
    backend: str
    algo: str
    vectorize: str
    n: int
    m: int
    with_s: float
    """Median seconds per round with counting (wall clock: the row's round_time)."""
    without_s: float
    """Median seconds per round without counting."""
    with_cpu_s: float = 0.0
    """Median CPU seconds of this process per round with counting (inline: all of the
    round's work; less disturbed than the wall clock by other processes on the machine)."""
    without_cpu_s: float = 0.0
    """Median CPU seconds of this process per round without counting."""
    counting_s: float = 0.0
    """Median seconds per round spent in the counting code itself (timed around each of its
    calls, `timed_counting`): the overhead without the noise of two rounds' difference."""
    times: dict[str, list[float]] = field(default_factory=dict)

    @property
    def counting_share(self) -> float:
        """`counting_s` as a share of the median round with counting."""
        return self.counting_s / self.with_s

    @property
    def overhead(self) -> float:
        """Wall-clock overhead: median(with) / median(without) - 1."""
        return self.with_s / self.without_s - 1.0

    @property
    def cpu_overhead(self) -> float:
        """CPU-time overhead of this process: median(with) / median(without) - 1."""
        return self.with_cpu_s / self.without_cpu_s - 1.0 if self.without_cpu_s > 0 else float("nan")

    @property
    def cpu_min_overhead(self) -> float:
        """min(with) / min(without) - 1 of the CPU times: the least disturbed round of each side."""
        lo = min(self.times["without_cpu"])
        return min(self.times["with_cpu"]) / lo - 1.0 if lo > 0 else float("nan")


class timed_counting:
    """Within the block, every call of the counting code of an inline run (the host's count
    of each member, the batched path's, the driver's record and the ledger's totals) adds
    its duration to `seconds`: the module attributes are wrapped, then restored."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._saved: list[tuple[object, str, object]] = []

    def _wrap(self, owner: object, name: str) -> None:
        fn = getattr(owner, name)

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        self._saved.append((owner, name, fn))
        setattr(owner, name, timed)

    def __enter__(self) -> timed_counting:
        from raycompo.engine import batched, exchange, host, ledger

        for owner, name in ((host, "count_by_key"), (host, "samples_read"), (batched, "member_sizes"),
                            (batched, "samples_read_many"), (ledger.MemberCosts, "add"),
                            (ledger.MemberCosts, "add_many"), (exchange, "exchange_cost"),
                            (ledger.Ledger, "record"), (ledger.Ledger, "close_round")):
            self._wrap(owner, name)
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, fn in reversed(self._saved):
            setattr(owner, name, fn)


def bench_one(backend: str, algo: str, n: int, m: int, pairs: int = 10, vectorize: str = "auto", hosts: int = 2,
              threads: int | None = 1) -> Result:
    """One configuration: a warm-up round, then `pairs` pairs of rounds with and without
    counting, alternating which comes first."""
    import torch

    from raycompo.engine.federation import Federation

    if threads:
        torch.set_num_threads(threads)
    rounds = 2 * pairs + 2  # one more than run: the last round would evaluate
    cfg = RunConfig(task="synthetic", algo=algo, rounds=rounds, backend=backend, eval_every=rounds, eval_clients=10,
                    vectorize=vectorize, cpus_per_actor=0.5 if backend == "ray" else 1.0,
                    settings={"n_clients": n, "clients_per_round": m})
    if backend == "ray":
        from raycompo.engine.ray_start import ensure_ray

        cfg.clients_per_actor = math.ceil(n / hosts)
        ensure_ray(None, include_dashboard=False)
    fed = Federation(cfg)
    times: dict[str, list[float]] = {"with": [], "without": [], "with_cpu": [], "without_cpu": []}
    try:
        fed.run_round()  # warm-up: data materialized, first-use costs
        for i in range(pairs):
            for counting in ((True, False) if i % 2 == 0 else (False, True)):
                side = "with" if counting else "without"
                fed.counting = counting
                cpu = time.process_time()
                times[side].append(float(fed.run_round()["round_time"]))
                times[side + "_cpu"].append(time.process_time() - cpu)
        if backend == "inline":  # the counting code's own time (on Ray most of it runs in the hosts)
            fed.counting = True
            times["counting"] = []
            for _ in range(min(pairs, 5)):
                with timed_counting() as timer:
                    fed.run_round()
                times["counting"].append(timer.seconds)
    finally:
        fed.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    return Result(backend, algo, vectorize, n, m, med["with"], med["without"], med["with_cpu"], med["without_cpu"],
                  med.get("counting", float("nan")), times)


HEADER = (f"{'backend':7} {'algo':6} {'vector':6} {'n':>8} {'m':>5} {'with s':>8} {'without s':>9} {'overhead':>8} "
          f"{'with cpu':>8} {'without cpu':>11} {'cpu overhead':>12} {'min cpu overhead':>16} {'counting ms':>11} "
          f"{'share':>6}")


def fmt(r: Result) -> str:
    return (f"{r.backend:7} {r.algo:6} {r.vectorize:6} {r.n:>8} {r.m:>5} {r.with_s:8.4f} {r.without_s:9.4f} "
            f"{100 * r.overhead:7.2f}% {r.with_cpu_s:8.4f} {r.without_cpu_s:11.4f} {100 * r.cpu_overhead:11.2f}% "
            f"{100 * r.cpu_min_overhead:15.2f}% {1e3 * r.counting_s:11.3f} {100 * r.counting_share:5.2f}%")


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser."""
    p = argparse.ArgumentParser(prog="python -m raycompo.bench ledger", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, nargs="+", default=[10**6])
    p.add_argument("--m", type=int, nargs="+", default=[100])
    p.add_argument("--pairs", type=int, default=10, help="pairs of rounds (one with counting, one without)")
    p.add_argument("--algos", nargs="+", default=["fedavg", "ditto"])
    p.add_argument("--backends", nargs="+", default=["inline"], choices=["inline", "ray"])
    p.add_argument("--vectorize", nargs="+", default=["auto", "off"], choices=["auto", "on", "off"])
    p.add_argument("--hosts", type=int, default=2, help="Ray client-host actors")
    p.add_argument("--threads", type=int, default=1, help="torch threads of this process (0: torch's default)")
    return p


def main(argv: list[str] | None = None) -> list[Result]:
    a = build_parser().parse_args(argv)
    if a.pairs < 1:
        raise SystemExit(f"--pairs must be >= 1, got {a.pairs}")
    print(HEADER, flush=True)
    results = []
    for backend in a.backends:
        for algo in a.algos:
            for vectorize in a.vectorize:
                for n in a.n:
                    for m in a.m:
                        if m > n:
                            continue
                        r = bench_one(backend, algo, n, m, a.pairs, vectorize, a.hosts, a.threads)
                        results.append(r)
                        print(fmt(r), flush=True)
    if results:
        if any(r.backend == "inline" for r in results):
            most = max((r for r in results if r.backend == "inline"), key=lambda r: r.counting_share)
            print(f"counting code: at most {100 * most.counting_share:.2f}% of a round ({1e3 * most.counting_s:.2f} ms; "
                  f"{most.algo}, vectorize {most.vectorize}, m={most.m}); target <= 3%", flush=True)
        worst = max(results, key=lambda r: r.overhead)
        print(f"largest overhead: {100 * worst.overhead:.2f}% of the wall clock, {100 * worst.cpu_overhead:.2f}% of "
              f"this process's CPU time ({worst.backend}, {worst.algo}, vectorize {worst.vectorize}, m={worst.m}); "
              "target <= 3%", flush=True)
    return results


if __name__ == "__main__":
    main()
