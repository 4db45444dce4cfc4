"""The simulated system's cost (issue 32): per cohort beside the engine's own draw, and the
size of a checkpoint as a run goes on.

    python -m raycompo.bench system [--n 10000000] [--m 100] [--cohorts 50]
        [--profiles uniform mobile] [--rounds 100 300] [--cohort 10]

1. Per cohort of `--m` at `--n` clients, for each profile: the median and least
   milliseconds of the system's selection (`RoundCtx.sample` of a counted round: candidates
   drawn among the online clients, their devices, predictions, the policy's choice and the
   counters) beside the engine's own uniform draw (`draw_cohort`), over `--cohorts` rounds.
   Target: under 1 ms for `mobile` at 10^7 clients. Beside them, in alternation (a cohort
   of each in turn), for `mobile`: a minimal hand-written version of the same work at the
   same shapes (`hand_cohort`: keyed candidate draws, the diurnal check, 130 devices, their
   predictions and stays, the choice of 100; no repeat check, no counters, no edge cases),
   and its keyed hashing alone (the six splitmix folds of a cohort): what numpy costs for
   this work before any of the system's structure.
2. A `mobile` run of FedAvg on the synthetic task with `--n` clients and a cohort of
   `--cohort` (evaluation of 10 clients every 50 rounds), inline: the bytes of its
   checkpoint (`Federation.checkpoint`, as torch saves it) and of the system's part at each
   round of `--rounds`, and the ratio of the last to the first (target: within 1.3x from
   round 100 to round 300: the system's state is bounded, see raycompo/system/counters.py).
   The ledger's part is printed beside it: its cumulative counts and the number of
   costs.csv rows written (the rows themselves are appended to costs.csv round by round,
   raycompo/runfolder/costs_file.py), O(1) in the rounds.

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time


def cohort_ms(n: int, m: int, profile: str, cohorts: int, hand: bool = False) -> dict[str, list[float]]:
    """Milliseconds of each system cohort and of each engine draw at n clients under
    `profile`, wall clock and this process's CPU time (less disturbed by a loaded machine);
    `hand`: also `hand_cohort` and its hashing alone, CPU time, in the same alternation."""
    from raycompo.configuration.config import RunConfig
    from raycompo.engine.federation import Federation, RoundCtx

    fed = Federation(RunConfig(task="synthetic", algo="fedavg", backend="inline", system=profile,
                               settings={"n_clients": n, "clients_per_round": m}), start=False)
    out: dict[str, list[float]] = {"system": [], "draw": [], "system_cpu": [], "draw_cpu": []}
    for r in range(cohorts + 2):
        t0, c0 = time.perf_counter(), time.process_time()
        fed.system.begin_round(r + 1)
        RoundCtx(fed, r, counted=True).sample(m)
        fed.system.end_round()
        t1, c1 = time.perf_counter(), time.process_time()
        RoundCtx(fed, r).sample(m)  # the engine's own draw, no system
        t2, c2 = time.perf_counter(), time.process_time()
        if hand:
            c3 = time.process_time()
            hand_cohort(r, n, m)
            c4 = time.process_time()
            hand_cohort(r, n, m, folds_only=True)
            c5 = time.process_time()
            if r >= 2:
                out.setdefault("hand_cpu", []).append(1e3 * (c4 - c3))
                out.setdefault("folds_cpu", []).append(1e3 * (c5 - c4))
        if r >= 2:  # warm-up
            out["system"].append(1e3 * (t1 - t0))
            out["draw"].append(1e3 * (t2 - t1))
            out["system_cpu"].append(1e3 * (c1 - c0))
            out["draw_cpu"].append(1e3 * (c2 - c1))
    return out


def hand_cohort(r: int, n: int = 10**7, m: int = 100, folds_only: bool = False) -> list[int]:
    """A minimal hand-written mobile cohort (see the module docstring): the system's work
    without its structure; `folds_only`: just its keyed hashing. Returns the kept ids."""
    import math
    from statistics import NormalDist

    import numpy as np

    from raycompo.seeding import splitmix_into

    def fold(h: np.ndarray) -> np.ndarray:
        splitmix_into(h)
        return h

    def unit(h: np.ndarray) -> np.ndarray:
        return ((h >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)

    k, batch, day_s, window = math.ceil(1.3 * m), 8 * math.ceil(1.3 * m) + 32, 86400.0, 6 * 3600.0
    t = 1000.0 * r
    ids = (fold(np.arange(batch, dtype=np.uint64) ^ np.uint64(r + 12345)) % np.uint64(n)).astype(np.int64)
    x = t + unit(fold(ids.view(np.uint64) ^ np.uint64(77))) * day_s
    day = np.floor(x / day_s)
    day_h = fold(fold(ids.view(np.uint64) ^ np.uint64(78)) ^ day.astype(np.int64).view(np.uint64))
    if folds_only:  # and the devices' five uniforms of k of them
        fold(ids[:k].view(np.uint64)[None, :] ^ np.arange(5, dtype=np.uint64)[:, None])
        return []
    within = x - day * day_s
    on = (within < window) & (unit(day_h) < 0.9)
    cand, stays = ids[on][:k], (window - within[on])[:k]
    u = unit(fold(cand.view(np.uint64)[None, :] ^ np.arange(5, dtype=np.uint64)[:, None]))
    inv = NormalDist().inv_cdf  # Python's own, per number, as the system's draws must be
    z = np.array(list(map(inv, u[1:].ravel().tolist()))).reshape(4, -1) * np.array([0.3, 0.9, 0.9, 0.5])[:, None]
    f = np.array(list(map(math.exp, z.ravel().tolist()))).reshape(4, -1)
    flops = np.array([1e9, 5e9, 2e10])[np.searchsorted([0.4, 0.8, 1.0], u[0])] * f[0]
    pred = 2 * 0.05 * f[3] + 4e4 / (2.5e6 * f[2]) + 4e4 / (6.25e5 * f[1]) + 0.0 / flops
    reports = np.where(pred <= stays, pred, np.inf)
    order = np.lexsort((cand, reports))
    return sorted(cand[order[:m]].tolist())


def checkpoint_sizes(n: int, cohort: int, rounds: list[int]) -> list[tuple[int, int, int, int]]:
    """(round, checkpoint bytes, system state bytes, ledger state bytes) of a mobile FedAvg
    run at each round."""
    import torch

    from raycompo.configuration.config import RunConfig
    from raycompo.engine.federation import Federation

    cfg = RunConfig(task="synthetic", algo="fedavg", backend="inline", system="mobile", rounds=max(rounds),
                    eval_every=50, eval_clients=10,
                    settings={"n_clients": n, "clients_per_round": cohort, "tau": 1, "max_samples": 60})
    fed = Federation(cfg)
    out = []
    try:
        fed.initial_row()
        for r in range(1, max(rounds) + 1):
            fed.run_round()
            if r in rounds:
                ckpt = fed.checkpoint()
                whole, part, led = io.BytesIO(), io.BytesIO(), io.BytesIO()
                torch.save(ckpt, whole)
                torch.save(ckpt["system"], part)
                torch.save(ckpt["ledger"], led)
                out.append((r, whole.tell(), part.tell(), led.tell()))
    finally:
        fed.close()
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m raycompo.bench system", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=10**7, help="clients")
    p.add_argument("--m", type=int, default=100, help="cohort of the per-cohort timing")
    p.add_argument("--cohorts", type=int, default=50, help="cohorts timed per profile")
    p.add_argument("--profiles", nargs="+", default=["uniform", "mobile"])
    p.add_argument("--rounds", type=int, nargs="*", default=[100, 300], help="rounds at which the checkpoint is sized")
    p.add_argument("--cohort", type=int, default=10, help="cohort of the checkpoint run")
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    return p


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    if a.threads:
        import torch

        torch.set_num_threads(a.threads)
    print(f"per cohort of {a.m} at {a.n} clients (ms): system vs the engine's own draw")
    print(f"{'profile':10} {'system median':>13} {'system min':>10} {'system cpu':>10} {'draw median':>11} "
          f"{'draw min':>8} {'draw cpu':>8}")
    for prof in a.profiles:
        t = cohort_ms(a.n, a.m, prof, a.cohorts, hand=prof == "mobile")
        med = {k: statistics.median(v) for k, v in t.items()}
        print(f"{prof:10} {med['system']:13.3f} {min(t['system']):10.3f} {med['system_cpu']:10.3f} "
              f"{med['draw']:11.3f} {min(t['draw']):8.3f} {med['draw_cpu']:8.3f}", flush=True)
        if "hand_cpu" in med:
            print(f"{'':10} hand-written minimal cohort {med['hand_cpu']:.3f} ms cpu, its keyed hashing alone "
                  f"{med['folds_cpu']:.3f} ms cpu (system / hand: {med['system_cpu'] / med['hand_cpu']:.2f}x)",
                  flush=True)
    if a.rounds:
        print(f"\ncheckpoint of a mobile FedAvg run at {a.n} clients, cohort {a.cohort} (bytes)")
        print(f"{'round':>6} {'checkpoint':>11} {'system':>9} {'ledger':>9}")
        sizes = checkpoint_sizes(a.n, a.cohort, sorted(a.rounds))
        for r, whole, part, led in sizes:
            print(f"{r:6d} {whole:11d} {part:9d} {led:9d}", flush=True)
        if len(sizes) > 1:
            print(f"round {sizes[-1][0]} / round {sizes[0][0]}: checkpoint {sizes[-1][1] / sizes[0][1]:.3f}x, "
                  f"system {sizes[-1][2] / sizes[0][2]:.3f}x, ledger {sizes[-1][3] / sizes[0][3]:.3f}x (target <= 1.3x)")
    return 0
