"""ClientDataCache: lazy materialization, LRU bound, prefetch in one call, device moves."""

from __future__ import annotations

import pytest
import torch

from raycompo.engine.client_data import ClientDataCache
from raycompo.tasks.base import ClientData


def make(cid: int) -> ClientData:
    x = torch.full((3, 2), float(cid))
    y = torch.full((3,), cid, dtype=torch.long)
    return ClientData(cid, x, y, x[:1], y[:1])


class Loader:
    def __init__(self):
        self.calls: list[list[int]] = []

    def __call__(self, ids: list[int]) -> list[ClientData]:
        self.calls.append(list(ids))
        return [make(i) for i in reversed(ids)]  # any order: matched by client_id


def test_lazy_and_cached():
    load = Loader()
    cache = ClientDataCache(load)
    assert cache.materialized == 0 and load.calls == []
    c = cache.get(7)
    assert c.client_id == 7 and torch.equal(c.x, torch.full((3, 2), 7.0))
    assert cache.get(7) is c and load.calls == [[7]]
    assert 7 in cache and 8 not in cache and cache.materialized == 1


def test_lru_bound():
    load = Loader()
    cache = ClientDataCache(load, max_clients=3)
    for i in range(3):
        cache.get(i)
    cache.get(0)  # 1 is now the least recently used
    cache.get(3)
    assert cache.materialized == 3 and 1 not in cache and {0, 2, 3} == set(cache.ids())
    assert cache.get(1).client_id == 1  # rebuilt on demand
    assert cache.loaded == 5 and cache.loads == 5


def test_prefetch_one_call():
    load = Loader()
    cache = ClientDataCache(load, max_clients=10)
    cache.get(2)
    cache.prefetch([1, 2, 3, 3, 4])
    assert load.calls == [[2], [1, 3, 4]]
    assert cache.ids() == [1, 2, 3, 4]  # in the prefetch order, all most recent
    n = len(load.calls)
    for i in (1, 2, 3, 4):
        cache.get(i)
    assert len(load.calls) == n
    cache.prefetch([2, 4])
    assert len(load.calls) == n  # nothing missing: no call
    big = ClientDataCache(Loader(), max_clients=2)
    big.prefetch(range(5))
    assert big.ids() == [3, 4]


def test_loader_must_return_every_id():
    cache = ClientDataCache(lambda ids: [make(i) for i in ids[1:]])
    with pytest.raises(RuntimeError, match="no data"):
        cache.prefetch([1, 2])
    with pytest.raises(ValueError):
        ClientDataCache(Loader(), max_clients=0)


def test_device_and_task_loader():
    from raycompo.configuration.config import RunConfig, resolve

    task = resolve(RunConfig(task="synthetic", algo="fedavg", backend="inline", settings={"n_clients": 1000})).make_task()
    cache = ClientDataCache(task.clients, max_clients=4, device="cpu")
    c = cache.get(999)
    assert c.client_id == 999 and c.x.device.type == "cpu"
    assert torch.equal(c.x, task.clients([999])[0].x)
    if torch.cuda.is_available():
        gpu = ClientDataCache(task.clients, device="cuda")
        assert gpu.get(5).x.device.type == "cuda"
