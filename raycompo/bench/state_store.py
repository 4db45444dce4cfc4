"""Memory and speed of the StateStore with a population of small client states.

    python -m raycompo.bench state_store [--clients 1000000] [--floats 60] [--budget-mb 64]

Each state is {"m": float32[floats], "u": float32[floats]} (a momentum and an inner state
of the synthetic task's size). The benchmark puts every client's state into a store with
no budget and reports the resident memory it added per client (the process's anonymous
RSS, so the arenas, the index and the allocator's slack), and the mean put / get time; then the same with
`--budget-mb` of memory, where most states are spilled: put time (including spilling),
get time of spilled states (read, brought back, others spilled), spill file size. A
baseline keeps the same states as a plain {cid: {name: tensor}} dict.

Numbers are printed, never asserted; they depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import gc
import random
import tempfile
import time

import torch

from raycompo.engine.state_store import StateStore


def rss() -> int:
    """Anonymous resident memory (RssAnon): the mapped spill file's pages are page cache
    the kernel can drop, not the process's memory."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser (main parses with it; tests check documented commands)."""
    p = argparse.ArgumentParser(prog="python -m raycompo.bench state_store", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=1_000_000)
    p.add_argument("--floats", type=int, default=60)
    p.add_argument("--budget-mb", type=float, default=64.0)
    p.add_argument("--gets", type=int, default=100_000, help="random gets timed per store")
    p.add_argument("--baseline", action="store_true", help="also measure a plain dict of tensors")
    return p


def time_puts_gets(store, n: int, state: dict, ids: list[int]) -> tuple[float, float]:
    """Seconds per put (clients 0..n-1) and per get (of `ids`); collects garbage after the
    puts, so that the caller's RSS reading that follows counts only what the store keeps."""
    t = time.perf_counter()
    for cid in range(n):
        store.put(cid, state)
    put_s = (time.perf_counter() - t) / n
    gc.collect()
    t = time.perf_counter()
    for cid in ids:
        store.get(cid)
    return put_s, (time.perf_counter() - t) / len(ids)


def main(argv: list[str] | None = None) -> None:
    a = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    n, d = a.clients, a.floats
    m, u = torch.randn(d), torch.randn(d)
    state = {"m": m, "u": u}
    ids = random.Random(0).choices(range(n), k=a.gets)
    payload = 2 * d * 4
    print(f"{n} clients, states of 2 x float32[{d}] ({payload} payload bytes)")

    gc.collect()
    r0 = rss()
    store = StateStore()
    put_s, get_s = time_puts_gets(store, n, state, ids)
    per_client = (rss() - r0) / n
    print(
        f"in memory : {per_client:7.0f} B/client anon RSS (payload {payload}), "
        f"put {put_s * 1e6:5.1f} us, get {get_s * 1e6:5.1f} us, allocated {store.allocated_bytes / n:.0f} B/client"
    )
    store.close()
    del store
    gc.collect()

    with tempfile.TemporaryDirectory() as tmp:
        budget = int(a.budget_mb * 2**20)
        r0 = rss()
        store = StateStore(budget_bytes=budget, spill_dir=tmp)
        put_s, get_s = time_puts_gets(store, n, state, ids)
        grew = (rss() - r0) / n
        print(
            f"spilling  : budget {a.budget_mb:g} MiB, {store.spilled_clients} spilled ({store.spilled_bytes / 2**20:.0f} MiB, "
            f"file {store.file_bytes / 2**20:.0f} MiB), anon RSS {grew:5.0f} B/client, "
            f"put {put_s * 1e6:5.1f} us, get (mostly spilled) {get_s * 1e6:5.1f} us"
        )
        store.close()
        del store
        gc.collect()

    if a.baseline:
        r0 = rss()
        plain = {}
        t = time.perf_counter()
        for cid in range(n):
            plain[cid] = {"m": m.clone(), "u": u.clone()}
        put_s = (time.perf_counter() - t) / n
        gc.collect()
        print(f"plain dict: {(rss() - r0) / n:7.0f} B/client anon RSS, put (clone) {put_s * 1e6:5.1f} us")


if __name__ == "__main__":
    main()
