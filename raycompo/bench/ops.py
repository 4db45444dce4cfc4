"""Operations per round of a vectorized cohort of m clients (issue 41): how the round's work
grows with the number of clients, counted, not timed.

For each algorithm, inline with `--vectorize auto` on task `synthetic`, at m clients per
round (the population is m clients; an algorithm without a cohort, e.g. FedDRO, takes all
n_clients = m each round); the Local-SCGD family on `maml-sinusoid` with `--vectorize on`
(m <= 25):

  aten         aten operations of one round: every call a `TorchDispatchMode` sees
  py calls     the interpreter's function calls of one round: `sys.setprofile`'s 'call' and
               'c_call' events (Python and C functions called from Python)

Each count is of round 3 alone (rounds 1 and 2 run uncounted: the data built, the buffers
allocated; the evaluation is off, eval_every 10^6), in a run of its own per count. Both are
deterministic and machine-independent. Then, per algorithm, the ratio of the largest m's
count to the smallest's beside the issue's targets (aten at most 1.2x, Python calls at most
2x) and the per-client slope, (count(m_max) - count(m_min)) / (m_max - m_min): operations
per extra client. `--top N` lists the N aten operations that grow most with m.

    python -m raycompo.bench ops [--m 10 100 1000] [--algos fedavg comfedl ditto] [--set KEY=VALUE ...] [--top 8]
    python -m raycompo.bench ops --algos local-moml local-scgdm --m 5 25
                                 [--sampler randperm] [--compress KEY=METHOD ...]

`--sampler randperm` counts the runs with the draws of releases up to 0.1.1 (RunConfig.sampler,
raycompo/keyed.py): a `randperm` per client and step instead of a chunk's keyed draws in
one call. `--compress` (as `python -m raycompo.run --compress`) counts the runs with their
uploads compressed, e.g. `'*=topk:0.01'` (error feedback: the clients' residuals are read and
written as stacked rows, engine/batched.py).

Figures are printed, never asserted (tests/test_bench_ops.py checks the counts' properties).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

from raycompo.configuration.config import RunConfig
from raycompo.engine.federation import Federation
from raycompo.keyed import SMALL_ROWS
from raycompo.run import parse_compress
from raycompo.settings import parse_sets
from raycompo.tasks.sampler import DEFAULT_SAMPLER

ALGOS: dict[str, dict[str, Any]] = {
    "fedavg": {},
    "comfedl": {"gamma": 10.0},  # gamma 1 overflows exp(f / gamma) on synthetic: NaN rounds (bench/cohort.py)
    "ditto": {},
    "qfedavg": {},
    "drfl": {},
}
"""Algorithms that draw a cohort of clients_per_round = m, batched on `synthetic`, and their
settings here."""

FULL: dict[str, dict[str, Any]] = {"feddro": {}, "pdsgd": {}, "fastdro": {}, "mbsgd-co": {}, "fedavg-co": {}}
"""Algorithms that take every client each round (n_clients = m), batched on `synthetic`."""

META: dict[str, dict[str, Any]] = {"local-moml": {}, "local-scgdm": {}, "local-scgd": {}, "local-bsgd": {}}
"""The Local-SCGDM paper's family, on `maml-sinusoid` (n_clients = m, at most 25: its 25
training tasks) with `--vectorize on` (what `auto` does too since its MLP has no convolution:
configuration/vectorize.py; `on` makes a run that would not batch an error); all m clients
take part every round."""
META_TASK = "maml-sinusoid"

DEFAULT_ALGOS = ("fedavg", "comfedl", "ditto")
TARGETS = {"aten": 1.2, "py calls": 2.0}
"""The issue's targets: the largest m's count at most this many times the smallest's."""

COUNTED_ROUND = 3


class OpCounter(TorchDispatchMode):
    """Counts every aten operation dispatched while active, by name (`counts`)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


def config(algo: str, m: int, sets: dict[str, Any] | None = None, sampler: str = DEFAULT_SAMPLER,
           compress: dict[str, str] | None = None) -> RunConfig:
    """The run counted: `algo` on `synthetic`, inline, vectorize auto, m clients a round,
    mini-batches drawn by `sampler`, uploads compressed by `compress` (RunConfig.compress)."""
    cohort = {"clients_per_round": m} if algo in ALGOS else {}
    settings = {**ALGOS.get(algo, FULL.get(algo, META.get(algo, {}))), "n_clients": m, **cohort, **(sets or {})}
    task, vectorize = (META_TASK, "on") if algo in META else ("synthetic", "auto")
    return RunConfig(task=task, algo=algo, rounds=10**6, eval_every=10**6, settings=settings,
                     backend="inline", vectorize=vectorize, sampler=sampler, compress=dict(compress or {}))


def counted_round(cfg: RunConfig, count: Callable[[Callable[[], Any]], Any]) -> Any:
    """`count(run_round)` of round `COUNTED_ROUND` of a fresh inline run of `cfg` (the
    rounds before it run uncounted)."""
    fed = Federation(cfg)
    try:
        for _ in range(COUNTED_ROUND - 1):
            fed.run_round()
        return count(fed.run_round)
    finally:
        fed.close()


def aten_ops(fn: Callable[[], Any]) -> Counter[str]:
    """The aten operations `fn()` dispatches, by name."""
    with OpCounter() as counter:
        fn()
    return counter.counts


def profiled(fn: Callable[[], Any], hook: Callable[[Any, str, Any], None]) -> Any:
    """`fn()` with `hook(frame, event, arg)` as the interpreter's profile function
    (`sys.setprofile`), the previous one restored after; what `fn()` returns."""
    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        return fn()
    finally:
        sys.setprofile(previous)


def python_calls(fn: Callable[[], Any]) -> int:
    """The Python and C function calls `fn()` makes (`sys.setprofile` events)."""
    calls = 0

    def hook(frame, event, arg):
        nonlocal calls
        if event == "call" or event == "c_call":
            calls += 1

    profiled(fn, hook)
    return calls - 1  # the call of sys.setprofile that removes the hook


def measure(algo: str, m: int, sets: dict[str, Any] | None = None, sampler: str = DEFAULT_SAMPLER,
            compress: dict[str, str] | None = None) -> dict[str, Any]:
    """{'aten': total, 'by_op': Counter, 'py calls': total} of one counted round."""
    cfg = config(algo, m, sets, sampler, compress)
    by_op = counted_round(cfg, aten_ops)
    return {"aten": sum(by_op.values()), "by_op": by_op, "py calls": counted_round(cfg, python_calls)}


def slope(low: tuple[int, float], high: tuple[int, float]) -> float:
    """Per extra client between two (m, count) points."""
    (m0, c0), (m1, c1) = low, high
    return (c1 - c0) / (m1 - m0) if m1 != m0 else float("nan")


def summary(algo: str, counts: dict[int, dict[str, Any]]) -> list[str]:
    """The per-algorithm lines after its rows: ratio of the largest m to the smallest, beside
    the target, and the per-client slope, for each count."""
    ms = sorted(counts)
    lo, hi = ms[0], ms[-1]
    lines = []
    for key, target in TARGETS.items():
        ratio = counts[hi][key] / max(counts[lo][key], 1)
        per = slope((lo, counts[lo][key]), (hi, counts[hi][key]))
        verdict = "meets" if ratio <= target else "misses"
        lines.append(f"{algo:<9} {key:<8} m={hi}/m={lo}: {ratio:7.2f}x (target <= {target}x: {verdict}); "
                     f"slope {per:.2f} per client")
    mid = next((m for m in ms[1:-1] if m > SMALL_ROWS), None)
    if lo <= SMALL_ROWS and mid is not None:  # the small chunk's draws were numpy's: no aten operation
        ratio = counts[hi]["aten"] / max(counts[mid]["aten"], 1)
        lines.append(f"{algo:<9} aten     m={hi}/m={mid}: {ratio:7.2f}x (past {SMALL_ROWS} clients: a chunk of at most "
                     f"{SMALL_ROWS} drawing rows draws in numpy, with no aten operation)")
    return lines


def top_growth(counts: dict[int, dict[str, Any]], n: int) -> list[str]:
    """The n aten operations whose count grows most per client from the smallest m to the largest."""
    ms = sorted(counts)
    lo, hi = counts[ms[0]]["by_op"], counts[ms[-1]]["by_op"]
    growth = {op: slope((ms[0], lo.get(op, 0)), (ms[-1], hi[op])) for op in hi}
    ranked = sorted(growth.items(), key=lambda kv: -kv[1])[:n]
    return [f"    {op:<28} {per:8.2f} per client ({lo.get(op, 0)} -> {hi[op]})" for op, per in ranked if per > 0]


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser (main parses with it; tests check documented commands)."""
    p = argparse.ArgumentParser(prog="python -m raycompo.bench ops", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--m", type=int, nargs="+", default=[10, 100, 1000], help="clients per round (at least 2 values)")
    p.add_argument("--quick", action="store_true", help="m = 4 and 8 (a check of the bench itself)")
    p.add_argument("--algos", nargs="+", choices=[*ALGOS, *FULL, *META], default=list(DEFAULT_ALGOS),
                   help=f"algorithms counted; {', '.join(META)} on {META_TASK}, where m <= 25")
    p.add_argument("--set", dest="sets", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                   help="more task/algorithm settings for every run")
    p.add_argument("--sampler", choices=("randperm", "keyed"), default=DEFAULT_SAMPLER,
                   help="how clients' mini-batches are drawn (as python -m raycompo.run --sampler)")
    p.add_argument("--compress", nargs="+", action="extend", default=[], metavar="KEY=METHOD",
                   help="compress the uploads (as python -m raycompo.run --compress), e.g. '*=topk:0.01'")
    p.add_argument("--top", type=int, default=0, help="list the N aten operations that grow most with m")
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    ms = sorted(set([4, 8] if args.quick else args.m))
    if len(ms) < 2:
        p.error("--m needs at least two values")
    if any(a in META for a in args.algos) and ms[-1] > 25:
        p.error(f"{', '.join(a for a in args.algos if a in META)} run on {META_TASK}, of at most 25 clients: "
                f"give --m at most 25 (e.g. --m 5 25)")
    sets = parse_sets(args.sets)
    compress = parse_compress(args.compress, "--compress")
    shown = f", compress {' '.join(args.compress)}" if compress else ""
    where = "task synthetic" + (f" (the Local-SCGD family: {META_TASK}, vectorize on)" if any(a in META for a in args.algos) else "")
    print(f"one round's counts (round 3 alone; inline, vectorize auto, {where}, sampler {args.sampler}{shown})")
    print(f"{'algo':<9} {'m':>6} {'aten':>9} {'py calls':>9} {'aten/m':>8} {'calls/m':>8}")
    for algo in args.algos:
        counts = {m: measure(algo, m, sets, args.sampler, compress) for m in ms}
        for m in ms:
            c = counts[m]
            print(f"{algo:<9} {m:>6} {c['aten']:>9} {c['py calls']:>9} {c['aten'] / m:8.1f} {c['py calls'] / m:8.1f}",
                  flush=True)
        for line in summary(algo, counts) + (top_growth(counts, args.top) if args.top else []):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
