"""The batched local step does only the work the maths needs (issue 28), with the same
numbers: the chunk's seeds folded at once are the per-client seeds, batches gathered for
several steps are the step-by-step batches, the fused update is the gradient step, the
float64 sum by blocks is the whole sum, and a stateless algorithm or a large population
costs the host nothing of length n."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import raycompo
from raycompo.algorithms.cohort import CohortBatch
from raycompo.bench.scale import Result, compare
from raycompo.configuration.config import RunConfig, resolve
from raycompo.engine import batched
from raycompo.engine.federation import Federation
from raycompo.engine.host import ClientCtx, as_range
from raycompo.engine.ray_pool import RayPool
from raycompo.keyed import as_int64
from raycompo.seeding import CLIENT, fold, fold_many
from raycompo.tasks.base import Task

SYN = {"n_clients": 12, "min_samples": 2, "max_samples": 40, "clients_per_round": 12, "tau": 3}


def chunk(seed: int = 0, round_: int = 3, n: int = 12) -> tuple[Task, list[ClientCtx]]:
    """A ragged chunk of synthetic clients (2..40 samples: some below a batch of 10)."""
    task = resolve(RunConfig(task="synthetic", algo="fedavg", settings=SYN, backend="inline")).make_task()
    return task, [ClientCtx(cid, d, round=round_, seed=seed) for cid, d in enumerate(task.clients(list(range(n))))]


def test_fold_many_is_the_python_fold_bit_for_bit():
    rng = np.random.default_rng(0)
    prefixes = [int(p) for p in rng.integers(0, 2**63, 200, dtype=np.int64)] + [0, 2**64 - 1, 2**63]
    prefixes += [fold(0, 7, CLIENT, i, 3) for i in range(50)]
    for key in [(0, 0), (4, 1), (2**40, 3), (2**64 - 1,), ()]:
        got = fold_many(np.array(prefixes, dtype=np.uint64), *key).tolist()
        assert got == [fold(p, *key) for p in prefixes]
    ids = rng.integers(0, 10**12, len(prefixes))  # a key part per prefix (the chunk's client ids)
    got = fold_many(np.array(prefixes, dtype=np.uint64), 9, ids, 3).tolist()
    assert got == [fold(p, 9, int(i), 3) for p, i in zip(prefixes, ids)]


@pytest.mark.parametrize("sampler", ["keyed", "randperm"])
def test_chunk_seeds_and_draws_are_each_clients_own(sampler):
    """A chunk draws each client's indices as the client alone does (`draw_indices` from its
    generator: the keyed hashes, the default, or `randperm(n)[:b]`)."""
    from raycompo.tasks.base import draw_indices

    task, ctxs = chunk()
    for c in ctxs:
        c.data.sampler = sampler  # as the host sets it from RunConfig.sampler
    cb = CohortBatch(ctxs, task, torch.device("cpu"))
    for step, stream in ((0, 0), (4, 1)):
        assert cb.seeds(step, stream) == [c.rng(step, stream).initial_seed() for c in ctxs]
        assert cb.step_seeds(step, stream).tolist() == [as_int64(c.rng(step, stream).initial_seed()) for c in ctxs]
        for c, pick, n in zip(ctxs, cb.draw(step, 10, stream), cb.sizes):
            if n <= 10:
                assert pick is None
            else:
                assert torch.equal(pick, draw_indices(n, 10, c.rng(step, stream), sampler))
                if sampler == "randperm":
                    assert torch.equal(pick, torch.randperm(n, generator=c.rng(step, stream))[:10])


@pytest.mark.parametrize("n", [5, 40])
def test_step_seeds_are_each_clients_generator_seed(n):
    """`CohortBatch.step_seeds` (a task's own keyed draws of the chunk, e.g. maml-sinusoid's
    meta-batches): each client's `c.rng(step, stream).initial_seed()` as an int64 of the same
    bits, a few clients folded in Python and more in numpy."""
    task, base = chunk(seed=2**40 + 3)
    ctxs = [ClientCtx(1000 + i, base[i % len(base)].data, round=3, seed=2**40 + 3) for i in range(n)]
    cb = CohortBatch(ctxs, task, torch.device("cpu"))
    for step, stream in ((0, 0), (3, 2)):
        got = cb.step_seeds(step, stream)
        assert got.dtype == torch.int64 and got.shape == (n,)
        assert got.tolist() == [as_int64(c.rng(step, stream).initial_seed()) for c in ctxs]


def test_contexts_without_a_key_draw_from_their_own_generators():
    """A context that only has `rng` (a user's or a test's) gets the same draws, one
    generator per client as before."""
    task, ctxs = chunk()

    @dataclasses.dataclass
    class Plain:
        client_id: int
        data: object
        inner: ClientCtx

        def rng(self, step, stream=0):
            return self.inner.rng(step, stream)

    plain = [Plain(c.client_id, c.data, c) for c in ctxs]
    a = CohortBatch(ctxs, task, torch.device("cpu")).draw(2, 10, 1)
    b = CohortBatch(plain, task, torch.device("cpu"))  # type: ignore[arg-type]
    assert b.seeds(2, 1) is None
    for p, q in zip(a, b.draw(2, 10, 1)):
        assert (p is None and q is None) or torch.equal(p, q)


def test_batches_gathered_ahead_are_the_step_by_step_batches():
    task, ctxs = chunk()
    ahead = CohortBatch(ctxs, task, torch.device("cpu"))
    ahead.gather(range(0, 3), 10, stream=1)
    for t in range(3):
        got = ahead.batch(t, 10, stream=1)
        ref = CohortBatch(ctxs, task, torch.device("cpu")).batch(t, 10, stream=1)
        assert torch.equal(got.x, ref.x) and torch.equal(got.y, ref.y)  # padding included (zeros, label 0)
        assert torch.equal(got.mask, ref.mask) and torch.equal(got.count, ref.count)
        assert got.rows == ref.rows == [min(10, n) for n in ahead.sizes]
        assert all((p is None and q is None) or torch.equal(p, q) for p, q in zip(got.picks, ref.picks))
    # a step not gathered is drawn as usual
    assert torch.equal(ahead.batch(5, 10, stream=1).x, CohortBatch(ctxs, task, torch.device("cpu")).batch(5, 10, 1).x)


def test_samples_read_count_each_batch_handed_out():
    """The ledger's count (ClientData.samples_read) is min(b, n_i) per step and client,
    whether the steps were gathered ahead (local_sgd) or drawn one by one."""
    task, ctxs = chunk()
    before = [c.data.samples_read for c in ctxs]
    cb = CohortBatch(ctxs, task, torch.device("cpu"))
    cb.local_sgd(cb.broadcast(task.init_weights()), 3, 0.1, 10, cb.loss_gradient())
    cb.batch(0, 10, stream=2)
    cb.close()  # the engine's call when a batched phase returns: the chunk's counts handed over
    assert [c.data.samples_read - b for c, b in zip(ctxs, before)] == [4 * min(10, n) for n in cb.sizes]


@pytest.mark.parametrize("model", ["logistic", "mlp"])
@pytest.mark.parametrize("with_scale", [False, True])
def test_fused_step_is_the_gradient_step(model, with_scale):
    """Task.batched_loss_step_ (the update fused into the pullback's products) equals
    w - lr * g of the written-out gradient, and that of autograd (Task's default)."""
    x, y = torch.randn(300, 7), torch.arange(300) % 4
    cls = raycompo.task_from_arrays(x, y, n_clients=5, model=model, partition="dirichlet", name=f"step-{model}")
    task = resolve(RunConfig(task=cls, algo="fedavg", backend="inline")).make_task()
    ctxs = [ClientCtx(cid, d, round=0, seed=1) for cid, d in enumerate(task.clients(list(range(5))))]
    batch = CohortBatch(ctxs, task, torch.device("cpu")).batch(0, 40)
    assert batch.mask.sum() < batch.mask.numel()  # ragged
    scale = (lambda f: torch.exp(f)) if with_scale else None
    w = torch.randn(5, task.model.dim) * 0.3
    g, _ = task.batched_loss_grad(w, batch, scale)
    fused = w.clone()
    task.batched_loss_step_(fused, batch, 0.05, scale)
    torch.testing.assert_close(fused, w - 0.05 * g, rtol=1e-6, atol=1e-6)
    default = w.clone()
    Task.batched_loss_step_(task, default, batch, 0.05, scale)
    torch.testing.assert_close(fused, default, rtol=1e-6, atol=1e-6)
    assert not torch.equal(fused, w)


def test_local_sgd_leaves_its_input_and_snapshots_the_iterate():
    task, ctxs = chunk()
    cb = CohortBatch(ctxs, task, torch.device("cpu"))
    w0 = torch.randn(task.model.dim) * 0.1
    start = cb.broadcast(w0)
    kept = w0.clone()
    w, snap = cb.local_sgd(start, 3, 0.1, 10, cb.loss_gradient(), snapshot_at=2)
    assert torch.equal(w0, kept)  # the caller's model is not updated in place
    two = cb.local_sgd(cb.broadcast(w0), 2, 0.1, 10, cb.loss_gradient())
    assert torch.equal(snap, two)  # the iterate after 2 steps, not a view of the final one
    plain = cb.local_sgd(cb.broadcast(w0), 3, 0.1, 10, lambda w, b, t: cb.loss_grad(w, b)[0])  # unfused
    torch.testing.assert_close(w, plain, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("block_bytes", [8, 8 * 7 * 3, 1 << 20])
def test_float64_sum_by_blocks_is_the_whole_sum(monkeypatch, block_bytes):
    monkeypatch.setattr(batched, "SUM_BLOCK_BYTES", block_bytes)
    v = torch.randn(10, 7)
    mults = [1, 2, 1, 3, 1, 1, 1, 5, 1, 1]
    ref = (v.to(torch.float64) * torch.tensor(mults, dtype=torch.float64).unsqueeze(1)).sum(0)
    torch.testing.assert_close(batched._weighted_sum(v, mults, None), ref, rtol=1e-15, atol=1e-15)
    torch.testing.assert_close(batched._weighted_sum(v, [1] * 10, ref), ref + v.to(torch.float64).sum(0),
                               rtol=1e-15, atol=1e-15)


def test_a_large_stateless_population_costs_the_host_nothing_of_length_n():
    """FedAvg over 10^7 clients: the inline host's ids are a range, no state is stored and
    the store's index never grows to the largest client id; Ditto (personal models) does
    store its cohort's states."""
    n = 10**7
    cfg = RunConfig(task="synthetic", algo="fedavg", rounds=2, backend="inline", eval_every=10**6,
                    settings={"n_clients": n, "clients_per_round": 5, "tau": 1, "max_samples": 60})
    fed = Federation(cfg)
    try:
        fed.run_round()
        host = fed.pool.host
        assert host.client_ids == range(n)
        assert len(host.states) == 0 and len(host.states._where) == 1024  # the store's initial index
    finally:
        fed.close()
    ditto = Federation(dataclasses.replace(cfg, algo="ditto", settings={**cfg.settings, "n_clients": 1000}))
    try:
        ditto.run_round()
        assert len(ditto.pool.host.states) == 5
    finally:
        ditto.close()


def test_client_ids_as_ranges():
    assert as_range(range(3, 9)) == range(3, 9)
    assert as_range([4, 2, 3]) == range(2, 5)
    assert as_range([0, 0, 1]) == [0, 0, 1] and as_range([1, 3]) == [1, 3]
    pool = SimpleNamespace(_starts=[0, 4, 8])
    assert [RayPool.owner(pool, c) for c in (0, 3, 4, 7, 8, 10)] == [0, 0, 1, 1, 2, 2]  # type: ignore[arg-type]


def test_bench_scale_compares_the_largest_population_with_the_smallest():
    def result(n, peak, start):
        return Result("inline", "fedavg", n, 100, 4, None, 0.1, start, peak, 0.0, 0.0, 1.0, [0.1], start + 2.0)

    lines = compare([result(1000, 600 * 2**20, 0.5), result(10**7, 660 * 2**20, 0.6)], fresh=True)
    assert len(lines) == 1
    assert "n=10000000 / n=1000" in lines[0] and "peak memory 1.10x" in lines[0]
    assert "start 1.04x (2.60 / 2.50 s, command to round 1)" in lines[0]
    assert compare([result(1000, 1, 1.0)], fresh=False) == []  # one n: nothing to compare
