"""What per-client results cost at one evaluation (raycompo/watch/per_client.py, clients.csv), next
to the evaluation itself, for K evaluated clients of a population of a million. Figures
are printed, never asserted.

    python -m raycompo.bench per_client                       # K = 10^3, 10^4 of 10^6 clients
    python -m raycompo.bench per_client --evaluated 1000 --clients 1000

Measured in one process on the same evaluate phase's per-client results: the evaluate
phase (every evaluated client's forward pass, inline), the row it had before (means and
worst client: `summarize`), and what per-client results add: the spread columns
(`spread`), the record that travels with the row (`ClientMetrics.build`) and appending it
to clients.csv (`ClientsFile.append`). The added share is (spread + record + file) /
(evaluate phase + summarize); per evaluated client it should stay flat as K grows (O(K)).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch

from raycompo.algorithms.client_rows import ClientRows
from raycompo.configuration.config import RunConfig
from raycompo.engine.federation import Federation, summarize
from raycompo.runfolder.clients_file import ClientsFile
from raycompo.watch.per_client import N_SAMPLES_KEY, ClientMetrics, spread


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m raycompo.bench per_client", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=10**6, help="population n of the synthetic task (default 10^6)")
    p.add_argument("--evaluated", type=int, nargs="+", default=[10**3, 10**4],
                   help="evaluated clients K per evaluation (--eval-clients), one measurement each")
    p.add_argument("--repeat", type=int, default=3, help="timings per part (the median is printed)")
    return p


def _median_seconds(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(n: int, k: int, repeat: int, folder: str) -> dict[str, float]:
    """Seconds of each part for K = k evaluated clients of n (medians of `repeat`)."""
    cfg = RunConfig(task="synthetic", algo="fedavg", rounds=1, backend="inline", eval_clients=k,
                    settings={"n_clients": n, "clients_per_round": 10})
    fed = Federation(cfg)
    try:
        ids = {c: 1 for c in fed.eval_clients()}
        assert fed.pool is not None
        fed.pool.map("evaluate", 0, ids, {"w": fed.w}, False)  # the clients' data materialized once
        results: dict[str, Any] = {}

        def phase() -> None:
            answer = fed.pool.map("evaluate", 0, ids, {"w": fed.w}, False)  # type: ignore[union-attr]
            results["per_client"] = ClientRows.of(answer).as_dict()  # by client, as Federation.evaluate reads it

        evaluate = _median_seconds(phase, repeat)
        per_client = results["per_client"]
        record = ClientMetrics.build(0, per_client)
        plain = {c: {key: v for key, v in m.items() if key != N_SAMPLES_KEY} for c, m in per_client.items()}
        out = ClientsFile(folder)
        try:
            out.append(record)  # pandas' first CSV write (imports) is not the per-evaluation cost
            file = _median_seconds(lambda: out.append(record), repeat)
        finally:
            out.close()
        return {
            "evaluate": evaluate,
            "summarize": _median_seconds(lambda: summarize(plain, fed.task.worst), repeat),
            "spread": _median_seconds(lambda: spread(plain, fed.task.worst), repeat),
            "record": _median_seconds(lambda: ClientMetrics.build(0, per_client), repeat),
            "file": file,
        }
    finally:
        fed.close()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    print(f"per-client results at one evaluation, synthetic task, n = {args.clients} clients, inline, 1 thread; "
          f"medians of {args.repeat}")
    print(f"{'K':>8} {'evaluate s':>10} {'row ms':>8} {'spread ms':>9} {'record ms':>9} {'file ms':>8} "
          f"{'added us/client':>15} {'added share':>11}")
    for k in args.evaluated:
        with tempfile.TemporaryDirectory(prefix="raycompo-perclient-") as folder:
            t = measure(args.clients, k, args.repeat, folder)
        added = t["spread"] + t["record"] + t["file"]
        print(f"{k:>8} {t['evaluate']:>10.3f} {t['summarize'] * 1e3:>8.1f} {t['spread'] * 1e3:>9.1f} "
              f"{t['record'] * 1e3:>9.1f} {t['file'] * 1e3:>8.1f} {added / k * 1e6:>15.2f} "
              f"{added / (t['evaluate'] + t['summarize']):>11.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
