"""Milliseconds to draw a cohort's mini-batch indices (issue 41, item 2): per client and step,
`randperm(n_i)[:b]` from a generator reseeded by its key (the 'randperm' sampler, as
`CohortBatch.draw_steps` draws today), beside the keyed sampler's one call for the whole
chunk (`keyed_indices`, raycompo/keyed.py; `--sampler keyed`) and its per-client
path's one row at a time (`keyed_draw`, as `ClientData.batch` draws it), on the same seeds.

    python -m raycompo.bench sampler [--m 1000] [--n 60] [--b 16] [--steps 20] [--repeats 5]

The best of `--repeats` timings of each; with CUDA, the keyed draw on the GPU too (and
whether its indices equal the CPU's). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from raycompo.bench.arguments import positive_int
from raycompo.seeding import CLIENT, fold, fold_many
from raycompo.tasks.sampler import keyed_draw, keyed_indices


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser."""
    p = argparse.ArgumentParser(
        prog="python -m raycompo.bench sampler",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--m", type=positive_int, default=1000, help="clients drawing (default 1000)")
    p.add_argument("--n", type=positive_int, default=60, help="samples per client n_i (default 60)")
    p.add_argument("--b", type=positive_int, default=16, help="batch size b < n (default 16)")
    p.add_argument("--steps", type=positive_int, default=20, help="local steps drawn (default 20)")
    p.add_argument(
        "--repeats", type=positive_int, default=5, help="timings of each, the best is printed (default 5)"
    )
    return p


def best_ms(fn: Callable[[], Any], repeats: int) -> float:
    """The fastest of `repeats` calls of fn, in milliseconds."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.b < args.n:
        parser.error(f"--b must be below --n (a draw of b of n points without replacement), got b={args.b}, n={args.n}")
    m, n, b, steps = args.m, args.n, args.b, args.steps
    prefixes = fold_many(
        np.full(m, fold(0, 0, CLIENT), dtype=np.uint64), np.arange(m, dtype=np.int64), 3
    )
    seeds = np.stack(
        [fold_many(prefixes, t, 0) >> np.uint64(1) for t in range(steps)], 1
    )  # (m, steps)
    seed_list = seeds.tolist()
    sizes = torch.full((m * steps,), n, dtype=torch.int64)
    keyed = torch.from_numpy(seeds.view(np.int64).reshape(-1))

    def per_client() -> None:
        g = torch.Generator()
        for row in seed_list:
            for s in row:
                g.manual_seed(s)
                torch.randperm(n, generator=g)[:b]

    def per_row() -> None:
        for row in seed_list:
            for s in row:
                keyed_draw(s, n, b)

    print(
        f"drawing b={b} of n={n} for m={m} clients x {steps} steps ({m * steps} draws), best of {args.repeats}"
    )
    print(
        f"  randperm, per client and step (generator reseeded): {best_ms(per_client, args.repeats):9.2f} ms"
    )
    print(
        f"  keyed, per client and step (one row, numpy):        {best_ms(per_row, args.repeats):9.2f} ms"
    )
    print(
        f"  keyed, one call for the chunk (CPU):                {best_ms(lambda: keyed_indices(keyed, sizes, b), args.repeats):9.2f} ms"
    )
    if torch.cuda.is_available():
        k_gpu, s_gpu = keyed.cuda(), sizes.cuda()

        def on_gpu() -> None:
            keyed_indices(k_gpu, s_gpu, b)
            torch.cuda.synchronize()

        on_gpu()  # warm-up (kernels loaded)
        same = torch.equal(keyed_indices(k_gpu, s_gpu, b).cpu(), keyed_indices(keyed, sizes, b))
        print(
            f"  keyed, one call for the chunk (CUDA):               {best_ms(on_gpu, args.repeats):9.2f} ms"
            f"  (indices equal to the CPU's: {same})"
        )
    return 0
