"""Recovery from a killed host: the same Ray-backend run twice, unfaulted and with host
actor `clients-1` killed right after round `--kill-after` (engine/faults.py), side by side.
Figures are printed, never asserted.

    python -m raycompo.bench recovery [--task dro-mnist5k] [--algo comfedl] [--rounds 30]
        [--kill-after 25] [--checkpoint-every 10] [--clients-per-actor 5] [--cpus-per-actor 0.5]
        [--set gamma=1 tau=5]

Rounds are timed one driver call each (runs otherwise take several rounds per call).
Printed: seconds per normal round (median gap between two rows of the unfaulted run);
each run's start-up (actors started, data partitioned, round 0 evaluated); recovery, from the kill to the next new round written, split into detection (the kill to
the failure seen by the run), restart + restore (the failure to the first replayed row:
new driver and host actors, the checkpoint read back from disk and restored, that round
run), and the replay of the remaining rounds; the rounds replayed; each run's wall time;
and whether the faulted run's rows equal the unfaulted run's (1e-6).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

import torch

from raycompo.configuration.config import RunConfig
from raycompo.engine import run, runner
from raycompo.engine.faults import KillActor
from raycompo.engine.ray_start import ensure_ray
from raycompo.settings import parse_sets
from raycompo.watch.observers import Observer, Row

TIME_COLUMNS = ("round_time", "wall_time")


class Timeline(Observer):
    """(round, time.perf_counter()) of every row written, replays included."""

    def __init__(self):
        self.rows: list[tuple[int, float]] = []

    def on_row(self, row: Row) -> None:
        self.rows.append((int(row["round"]), time.perf_counter()))


def max_difference(a: list[Row], b: list[Row]) -> float:
    """Largest relative difference of the float metrics of two runs' rows (inf when the rounds differ)."""
    if [r["round"] for r in a] != [r["round"] for r in b]:
        return float("inf")
    diffs = [abs(ra[k] - rb[k]) / max(1.0, abs(ra[k])) for ra, rb in zip(a, b) for k in ra
             if k not in TIME_COLUMNS and isinstance(ra[k], float) and isinstance(rb.get(k), float)]
    return max(diffs, default=0.0)


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser (main parses with it; tests check documented commands)."""
    p = argparse.ArgumentParser(prog="python -m raycompo.bench recovery", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="dro-mnist5k")
    p.add_argument("--algo", default="comfedl")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--kill-after", type=int, default=25, help="kill clients-1 right after this round is written")
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--clients-per-actor", type=int, default=5, help="dro-mnist5k has 10 clients: 2 hosts")
    p.add_argument("--cpus-per-actor", type=float, default=0.5)
    p.add_argument("--set", dest="sets", nargs="+", default=["gamma=1", "tau=5"], metavar="KEY=VALUE",
                   help="task/algorithm settings (default: gamma=1 tau=5, the README's dro-mnist5k run)")
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    if not 0 < args.kill_after < args.rounds:
        p.error("--kill-after must be in [1, --rounds)")
    torch.set_num_threads(1)
    ensure_ray(include_dashboard=False)
    cfg = RunConfig(task=args.task, algo=args.algo, rounds=args.rounds, backend="ray", settings=parse_sets(args.sets),
                    clients_per_actor=args.clients_per_actor, cpus_per_actor=args.cpus_per_actor)
    tmp = tempfile.mkdtemp(prefix="raycompo-recovery-")
    results = {}
    # One round per driver call: a run's loop otherwise takes a call's rounds at once
    # (engine/loop.py), so rows would reach the timeline in bursts and a round's gap be 0.
    call_seconds, runner.ROUNDS_CALL_SECONDS = runner.ROUNDS_CALL_SECONDS, 0.0
    try:
        for name in ("unfaulted", "faulted"):
            line, kill, seen = Timeline(), KillActor("clients-1", after=args.kill_after), []
            observers = [line, kill] if name == "faulted" else [line]
            t0 = time.perf_counter()
            res = run(cfg, out=f"{tmp}/{name}", checkpoint_every=args.checkpoint_every, observers=observers,
                      log=lambda msg, seen=seen: seen.append((time.perf_counter(), msg)))
            results[name] = (res, line, kill, seen, time.perf_counter() - t0, line.rows[0][1] - t0)
            if res.status != "completed":
                print(f"the {name} run ended {res.status} at round {res.final.get('round')}; choose other --set values")
                return 1
    finally:
        runner.ROUNDS_CALL_SECONDS = call_seconds

    base, base_line, _, _, base_wall, base_start = results["unfaulted"]
    res, line, kill, seen, wall, start = results["faulted"]
    gaps = [b[1] - a[1] for a, b in zip(base_line.rows[1:], base_line.rows[2:])]  # rounds 2..R (round 1 pays warm-up)
    normal = statistics.median(gaps)
    k = args.kill_after
    t_kill = kill.killed_at[0]
    t_seen = seen[0][0] if seen else float("nan")
    after_kill = [(r, t) for r, t in line.rows if t > t_kill]
    t_first = after_kill[0][1]  # the first replayed row
    t_next = next(t for r, t in after_kill if r == k + 1)
    replayed = sum(1 for r, _ in after_kill if r <= k)
    print(f"{cfg.algo} on {cfg.task}, {cfg.rounds} rounds, Ray backend, hosts of {args.clients_per_actor} clients with {args.cpus_per_actor:g} CPU; checkpoint every "
          f"{args.checkpoint_every} rounds (read back from disk on recovery); clients-1 killed after round {k}")
    print(f"  normal round: {normal:.3f} s (median over the unfaulted run)")
    print(f"  start-up (run called -> round 0 written): unfaulted {base_start:.2f} s, faulted {start:.2f} s")
    print(f"  recovery, kill -> round {k + 1} written: {t_next - t_kill:.2f} s = {(t_next - t_kill) / normal:.0f} normal rounds")
    print(f"    detection (kill -> failure seen):            {t_seen - t_kill:.2f} s")
    print(f"    restart + restore + first replayed round:    {t_first - t_seen:.2f} s")
    print(f"    replay of the other rounds and round {k + 1}:   {t_next - t_first:.2f} s")
    print(f"  rounds replayed: {replayed} (rounds {k - replayed + 1}..{k}, after the checkpoint of round {k - replayed})")
    print(f"  wall: unfaulted {base_wall:.1f} s, faulted {wall:.1f} s (+{wall - base_wall:.1f} s)")
    print(f"  faulted rows == unfaulted rows: max relative difference {max_difference(base.rows, res.rows):.1e}")
    if seen:
        print(f"  logged: {seen[0][1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
