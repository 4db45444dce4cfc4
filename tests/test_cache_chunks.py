"""Cache-sized chunks of a batched local step (engine/batched.py `STEP_CACHE_BYTES`, issue 28):
where a client's step is a large share of the cache, a host cuts its cohort into nearly
equal chunks whose one step fits it, gathering step by step; the numbers are those of one
whole chunk, and small steps (the synthetic task) or large models keep their chunks."""

from __future__ import annotations

import torch

from raycompo.bench import cohort
from raycompo.engine import batched
from raycompo.engine.federation import Federation


def test_the_cut_follows_the_step_bytes():
    # logistic-784 at batch 32: 4 * (7850 + 32 * 784) = 131,752 bytes a client -> 31 in 4 MiB
    assert batched.cache_chunk(7850, 784, 32) == (4 * 2**20) // (4 * (7850 + 32 * 784)) == 31
    assert batched.cache_chunk(610, 60, 10) is None  # synthetic: 866 clients, a step too small to matter
    assert batched.cache_chunk(159_010, 784, 32) is None  # an MLP 784-200-10: 5 clients, too few


def test_cache_chunks_give_the_numbers_of_one_chunk(monkeypatch):
    """40 clients of logistic-784 run as 2 chunks of 20 (not 31 + 9), gather step by step,
    and end at the model of one chunk of 40 (the same draws and per-client products), which
    agrees with the per-client path as documented."""
    cfg = cohort.config("logistic-784", "fedavg", 40, "inline", "on")
    cut = Federation(cfg)
    host = cut.pool.host
    items = [(cid, 1) for cid in range(40)]
    assert [len(c) for c in batched.chunks(host, "local", items)] == [20, 20]
    assert batched.gather_bytes(host, "local", items) == batched.STEP_CACHE_BYTES
    cut.run_rounds(2)
    monkeypatch.setattr(batched, "STEP_CACHE_BYTES", 0)  # no cut: one chunk, steps gathered ahead
    whole = Federation(cfg)
    assert [len(c) for c in batched.chunks(whole.pool.host, "local", items)] == [40]
    whole.run_rounds(2)
    per_client = Federation(cohort.config("logistic-784", "fedavg", 40, "inline", "off"))
    per_client.run_rounds(2)
    torch.testing.assert_close(cut.w, whole.w, rtol=1e-6, atol=0)
    torch.testing.assert_close(cut.w, per_client.w, rtol=1e-5, atol=1e-6)
