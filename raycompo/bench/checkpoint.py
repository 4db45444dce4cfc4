"""Checkpoint cost: seconds per checkpoint and its share of a round, for populations with
per-client state (Ditto's personal models on the synthetic task). Figures are printed,
never asserted.

    python -m raycompo.bench checkpoint
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import torch

from raycompo.configuration.config import RunConfig
from raycompo.engine import checkpoint, run
from raycompo.engine.federation import Federation


def main(argv: list[str] | None = None) -> int:
    import tempfile

    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="raycompo-ckpt-")
    for n in (10, 1000):
        cfg = RunConfig(task="synthetic", algo="ditto", rounds=6, backend="inline", eval_every=6, eval_clients=10,
                        settings={"n_clients": n, "clients_per_round": min(n, 100) if n > 10 else None})
        res = run(cfg, out=f"{tmp}/{n}", checkpoint_every=1)
        size = os.path.getsize(f"{tmp}/{n}/checkpoint.pt")
        fed = Federation(cfg)
        for _ in range(6):
            fed.run_round()
        ts = []
        for _ in range(5):
            a = time.perf_counter()
            checkpoint.save(f"{tmp}/{n}/x.pt", fed.checkpoint())
            ts.append(time.perf_counter() - a)
        rt, ck = statistics.median(r["round_time"] for r in res.rows[1:]), statistics.median(ts)
        print(f"n={n}: clients with state {len(fed.checkpoint()['client_states'])}, checkpoint {ck * 1000:.1f} ms, "
              f"file {size / 1e6:.2f} MB, round {rt * 1000:.0f} ms, share when taken every round {ck / (rt + ck):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
