"""The stacked data slab (issue 41): a chunk's batches gathered from the host's slab with one
`index_select` of x and of y are the rows each client's own gather reads, padding zeros; the
data cache keeps every client's x and y equal to what the task built through eviction,
reloads and compaction."""

from __future__ import annotations

import random

import pytest
import torch

from raycompo.algorithms.cohort import CohortBatch
from raycompo.engine.client_data import ClientDataCache
from raycompo.engine.data_slab import MIN_ROWS
from raycompo.engine.host import ClientCtx
from raycompo.tasks.base import ClientData
from raycompo.tasks.slab import PAD, common_slab

SIZES = [3, 40, 7, 25, 1, 60, 12, 33]
"""n_i of the clients: some below the batch size used (10), some above."""


def make(cid: int) -> ClientData:
    """Client cid's data, a pure function of cid: n_i = SIZES[cid % 8] + cid // 8 rows of
    (2, 3) features with values of their own, labels 1..5 (never the padding's 0)."""
    n = SIZES[cid % len(SIZES)] + cid // len(SIZES)
    g = torch.Generator().manual_seed(cid)
    x = torch.randn(n, 2, 3, generator=g) + 1.0
    y = torch.randint(1, 6, (n,), generator=g)
    return ClientData(cid, x, y, x[:1].clone(), y[:1].clone())


def load(ids: list[int]) -> list[ClientData]:
    return [make(i) for i in ids]


def contexts(data: list[ClientData]) -> list[ClientCtx]:
    return [ClientCtx(c.client_id, c, round=2, seed=5) for c in data]


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def chunks(ids: list[int], device: str = "cpu") -> tuple[CohortBatch, CohortBatch]:
    """The same chunk twice: on the clients' own tensors, and on the data cache's slab."""
    cache = ClientDataCache(load, device=device)
    cache.prefetch(range(40))  # others in the slab too: the chunk's offsets are not 1, 2, ...
    own = CohortBatch(contexts([c.to(device) for c in load(ids)]), None, torch.device(device))
    slab = CohortBatch(contexts([cache.get(i) for i in ids]), None, torch.device(device))
    assert own.slab is None and slab.slab is not None
    return own, slab


class Batch:
    """A copy of a handed-out batch (the engine's buffers are reused by the next)."""

    def __init__(self, b):
        self.x, self.y, self.mask, self.count = b.x.clone(), b.y.clone(), b.mask.clone(), b.count.clone()
        self.rows = list(b.rows)
        self.picks = [None if p is None else p.clone() for p in b.picks]


def same(a, b) -> None:
    for name in ("x", "y", "mask", "count"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert a.rows == b.rows
    for p, q in zip(a.picks, b.picks):
        assert (p is None and q is None) or torch.equal(p, q)


@pytest.mark.parametrize("device", DEVICES)
def test_slab_gather_equals_each_clients_gather(device):
    ids = [5, 17, 2, 30, 9, 4, 12]
    for size in (10, None, 100):  # drawn batches; all rows; a batch larger than every client
        own, slab = chunks(ids, device)
        got = {}
        for batches in (own.batches(6, size, stream=1), slab.batches(6, size, stream=1)):
            for t, b in batches:
                got.setdefault(t, []).append(Batch(b))
        assert sorted(got) == list(range(6))
        for a, b in got.values():
            same(a, b)
            for i, n in enumerate(b.rows):  # padding rows zero, label 0; real rows the client's
                assert not b.x[i, n:].any() and not b.y[i, n:].any()
                assert b.y[i, :n].min() >= 1 and b.mask[i].sum() == n
        # one step at a time (`batch` without a gather ahead), on another stream
        for t in range(3):
            same(Batch(own.batch(t, size, stream=2)), slab.batch(t, size, stream=2))


def test_slab_gather_writes_the_padding_zeros_of_a_reused_buffer():
    """Each step's buffer dirtied after use (it is reused by the next gather): the slab
    gather writes every row, the padding's zeros included (no zeroing of its own)."""
    for steps_at_once in (1, 2):  # `batch` step by step; groups of two steps (`gather`)
        own, slab = chunks([1, 6, 4, 8])
        for cb in (own, slab):
            cb.gather_bytes = steps_at_once * cb._step_bytes(10)
        for (_, a), (_, b) in zip(own.batches(6, 10), slab.batches(6, 10)):
            same(a, b)
            b.x.fill_(7.0)
            b.y.fill_(9)


def test_cache_keeps_every_clients_data_through_eviction_reload_and_compaction():
    rng = random.Random(0)
    cache = ClientDataCache(load, max_clients=12)
    rows = cache.rows
    assert rows is not None
    held = {}
    for step in range(400):
        ids = rng.sample(range(200), rng.choice([1, 3, 5]))
        cache.prefetch(ids)
        if step % 50 == 0:  # a client held past its eviction (a context of this round)
            cid = ids[0]
            held[cid] = (cache.get(cid), make(cid))
        if step % 37 == 0:
            cache.discard(rng.choice(cache.ids()))
        for cid in cache.ids():
            c, ref = cache.get(cid), make(cid)
            assert torch.equal(c.x, ref.x) and torch.equal(c.y, ref.y) and c.slab is not None
            assert c.slab.slab is rows.slab  # every live client in the current slab
        for c, ref in held.values():  # dropped or not, its own rows are unchanged
            assert torch.equal(c.x, ref.x) and torch.equal(c.y, ref.y)
        slab = rows.slab
        assert slab is not None and not slab.x[PAD].any() and slab.y[PAD] == 0
        # bounded: the holes never exceed the live rows (or the first slab's size)
        assert rows.used - 1 - rows.live_rows <= max(rows.live_rows, MIN_ROWS)
        assert rows.live_rows == sum(len(cache.get(i).y) for i in cache.ids())
    assert rows.compactions > 0 and cache.loaded > 200  # evicted, reloaded, compacted


def test_clients_that_do_not_fit_keep_their_own_tensors():
    odd = make(3)
    odd.outer = (odd.x, odd.y)  # an outer data set: not in the slab
    other = ClientData(4, torch.zeros(5, 7), torch.zeros(5, dtype=torch.long), torch.zeros(1, 7),
                       torch.zeros(1, dtype=torch.long))  # another sample shape than the slab's
    by_id = {1: make(1), 3: odd, 4: other}
    cache = ClientDataCache(lambda ids: [by_id[i] for i in ids])
    cache.prefetch([1, 3, 4])
    assert cache.get(1).slab is not None and cache.get(3).slab is None and cache.get(4).slab is None
    assert CohortBatch(contexts([cache.get(1), cache.get(3)]), None, torch.device("cpu")).slab is None
    replaced = cache.get(1)
    replaced.x = replaced.x.clone()  # data replaced after placing: the slab no longer holds them
    assert CohortBatch(contexts([replaced]), None, torch.device("cpu")).slab is None
    assert ClientDataCache(load, slab=False).get(1).slab is None


def test_a_host_keeps_a_slab_only_where_local_steps_run_batched():
    """Vectorized FedAvg: the host's clients are in one slab and its chunks gather from it;
    client by client: each client keeps its own tensors (no copy). The same model."""
    from raycompo.configuration.config import RunConfig
    from raycompo.engine.federation import Federation

    models = {}
    for vectorize in ("on", "off"):
        fed = Federation(RunConfig(task="synthetic", algo="fedavg", rounds=2, backend="inline", eval_every=10**6,
                                   vectorize=vectorize, settings={"n_clients": 12, "clients_per_round": 6, "tau": 3}))
        try:
            fed.run_round()
            fed.run_round()
            cache = fed.pool.host.clients
            held = [cache.get(i) for i in cache.ids()]
            assert len(held) >= 6
            if vectorize == "on":
                assert cache.rows is not None and common_slab(held) is not None
            else:
                assert cache.rows is None and all(c.slab is None for c in held)
            models[vectorize] = fed.w.clone()
        finally:
            fed.close()
    torch.testing.assert_close(models["on"], models["off"], rtol=1e-5, atol=1e-5)


def test_steps_gathered_one_at_a_time_have_their_indices_drawn_ahead_in_one_call(monkeypatch):
    """`batches` with room for one step's batch only: one `draw_steps` for the 6 steps (not
    6), and each step's batch the one `batch(t)` draws on its own, indices included."""
    ahead, alone = chunks([1, 6, 4, 8])[1], chunks([1, 6, 4, 8])[1]
    ahead.gather_bytes = ahead._step_bytes(10)
    calls = []
    original = type(ahead).draw_steps
    monkeypatch.setattr(type(ahead), "draw_steps", lambda self, steps, *a, **k: calls.append(
        (id(self), len(steps))) or original(self, steps, *a, **k))
    for t, b in ahead.batches(6, 10):
        same(Batch(b), alone.batch(t, 10))
    assert [n for who, n in calls if who == id(ahead)] == [6]
    assert [n for who, n in calls if who == id(alone)] == [1] * 6
