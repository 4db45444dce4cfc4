"""StateStore: exact round trips in memory and spilled, the budget, LRU, snapshots, files."""

from __future__ import annotations

import os
import random

import pytest
import torch

from raycompo.engine.state_store import StateStore

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool, torch.complex64]


def rich_state(i: int) -> dict:
    g = torch.Generator().manual_seed(i)
    return {
        "m": torch.randn(3, 4, generator=g),
        "u": torch.randn(60, dtype=torch.float64, generator=g),
        "u_task": {3: torch.randn(5, generator=g), 7: torch.randn(5, generator=g), (1, 2): torch.tensor(1.5, dtype=torch.bfloat16)},
        "steps": i,
        "big": 1 << 70,
        "neg": -(1 << 63),
        "loss": 0.1 * i,
        "nan": float("nan"),
        "flag": i % 2 == 0,
        "none": None,
        "empty": {},
        "zero_size": torch.empty(0, 3),
        "scalar_t": torch.tensor(i, dtype=torch.int16),
        "mask": torch.tensor([True, False, True]),
        "half": torch.tensor([1.0, -0.0, float("inf")], dtype=torch.float16),
    }


def assert_same(a, b, path="state"):
    assert type(a) is type(b), f"{path}: {type(a)} != {type(b)}"
    if isinstance(a, dict):
        assert list(a.keys()) == list(b.keys()), f"{path}: keys {list(a)} != {list(b)}"
        for (ka, va), kb in zip(a.items(), b.keys()):
            assert type(ka) is type(kb), f"{path}: key type {type(ka)} != {type(kb)}"
            assert_same(va, b[kb], f"{path}[{ka!r}]")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{path}: {a.dtype}{tuple(a.shape)} != {b.dtype}{tuple(b.shape)}"
        # bitwise: compare the bytes (NaN payloads, -0.0 included)
        assert torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8)), path
    elif isinstance(a, float):
        assert repr(a) == repr(b) and (a != a or a == b), path
    else:
        assert a == b, path


def test_round_trip_in_memory(tmp_path):
    store = StateStore()
    for i in range(10):
        store.put(i, rich_state(i))
    assert len(store) == 10 and store.ids() == list(range(10)) and 3 in store and 10 not in store
    for i in range(10):
        assert_same(store.get(i), rich_state(i))
    assert store.spilled_bytes == 0 and store.spilled_clients == 0
    assert store.get(11) is None and store.get(10**9) is None
    store.put(20, {})
    assert store.get(20) == {}


def test_get_returns_a_copy_owned_by_the_caller():
    store = StateStore()
    store.put(0, {"m": torch.zeros(4)})
    got = store.get(0)
    got["m"].add_(1)
    got["extra"] = 1
    assert_same(store.get(0), {"m": torch.zeros(4)})
    src = {"m": torch.zeros(4)}
    store.put(1, src)
    src["m"].add_(1)  # the store copied the values in
    assert_same(store.get(1), {"m": torch.zeros(4)})


def test_round_trip_spilled_and_budget(tmp_path):
    store = StateStore(budget_bytes=3000, spill_dir=str(tmp_path))
    for i in range(50):
        store.put(i, rich_state(i))
        assert store.memory_bytes <= 3000
    assert store.spilled_bytes > 0 and store.spilled_clients > 0
    assert len(store) == 50 and store.spilled_clients < 50
    assert os.path.exists(store.spill_path)
    for i in random.Random(0).sample(range(50), 50):
        assert_same(store.get(i), rich_state(i))
        assert store.memory_bytes <= 3000
    # items() and snapshot() read spilled states without moving anything
    before = (store.memory_bytes, store.spilled_bytes, store.spilled_clients)
    seen = dict(store.items())
    assert sorted(seen) == list(range(50))
    for i in range(50):
        assert_same(seen[i], rich_state(i))
    assert (store.memory_bytes, store.spilled_bytes, store.spilled_clients) == before
    store.close()


def test_replace_changes_layout_and_frees_space(tmp_path):
    store = StateStore(budget_bytes=1000, spill_dir=str(tmp_path))
    for i in range(30):
        store.put(i, {"v": torch.full((60,), float(i))})
    spilled = store.spilled_clients
    assert spilled > 0
    for i in range(30):  # replace every state by one of another layout
        store.put(i, {"v": torch.full((10,), float(i), dtype=torch.float64), "k": i})
    assert len(store) == 30
    for i in range(30):
        assert_same(store.get(i), {"v": torch.full((10,), float(i), dtype=torch.float64), "k": i})
    store.discard(3)
    assert 3 not in store and len(store) == 29 and store.get(3) is None
    store.close()


def test_spill_file_slots_are_reused(tmp_path):
    store = StateStore(budget_bytes=240 * 10, spill_dir=str(tmp_path))
    for i in range(100):
        store.put(i, {"v": torch.full((60,), float(i))})
    size = store.file_bytes
    assert size <= 100 * 240
    for _ in range(3):  # cycle through everyone: the file must not grow
        for i in range(100):
            v = store.get(i)
            v["v"] += 1
            store.put(i, v)
    assert store.file_bytes <= size + 2 * 240  # high-water mark of spilled states (eviction batches)
    for i in range(100):
        assert_same(store.get(i), {"v": torch.full((60,), float(i + 3))})
    store.close()


def test_lru(tmp_path):
    row = 60 * 4
    store = StateStore(budget_bytes=row * 16, spill_dir=str(tmp_path))
    for i in range(16):
        store.put(i, {"v": torch.full((60,), float(i))})
    assert store.spilled_clients == 0
    store.get(0)  # 0 is now the most recently used; 1 the least
    store.put(16, {"v": torch.zeros(60)})  # over budget: the oldest go first
    assert store.spilled_clients >= 1
    spilled = {i for i in range(17) if i in store and _on_disk(store, i)}
    assert 1 in spilled and 0 not in spilled and 16 not in spilled
    oldest = sorted(spilled)
    assert oldest == list(range(1, 1 + len(oldest)))  # exactly the least recently used
    store.close()


def _on_disk(store: StateStore, cid: int) -> bool:
    return int(store._where[cid]) == 2


def test_tiny_budget_still_round_trips(tmp_path):
    store = StateStore(budget_bytes=0, spill_dir=str(tmp_path))
    for i in range(5):
        store.put(i, rich_state(i))
        assert store.memory_bytes == 0
    for i in range(5):
        assert_same(store.get(i), rich_state(i))
    assert store.memory_bytes == 0 and store.spilled_clients == 5
    store.close()


def test_snapshot_load(tmp_path):
    a = StateStore(budget_bytes=2000, spill_dir=str(tmp_path))
    for i in range(20):
        a.put(i, rich_state(i))
    snap = a.snapshot()
    assert sorted(snap) == list(range(20))
    assert all(t.device.type == "cpu" for s in snap.values() for t in s.values() if isinstance(t, torch.Tensor))
    part = a.snapshot([2, 5, 99])
    assert sorted(part) == [2, 5]
    b = StateStore()
    b.put(3, {"other": 1})
    b.load(snap)
    assert len(b) == 20
    for i in range(20):
        assert_same(b.get(i), rich_state(i))
    a.close()


def test_close_removes_files(tmp_path):
    store = StateStore(budget_bytes=100, spill_dir=str(tmp_path))
    for i in range(10):
        store.put(i, {"v": torch.randn(60)})
    assert os.listdir(tmp_path)
    store.close()
    assert os.listdir(tmp_path) == []
    assert len(store) == 0
    # a dropped store removes its file too
    other = StateStore(budget_bytes=100, spill_dir=str(tmp_path))
    for i in range(10):
        other.put(i, {"v": torch.randn(60)})
    assert os.listdir(tmp_path)
    del other
    import gc

    gc.collect()
    assert os.listdir(tmp_path) == []


def test_clear(tmp_path):
    store = StateStore(budget_bytes=500, spill_dir=str(tmp_path))
    for i in range(10):
        store.put(i, {"v": torch.randn(60)})
    store.clear()
    assert len(store) == 0 and store.ids() == [] and store.memory_bytes == 0 and store.spilled_bytes == 0
    store.put(1, {"v": torch.ones(2)})
    assert_same(store.get(1), {"v": torch.ones(2)})
    store.close()


def test_rejects_what_it_cannot_round_trip():
    store = StateStore()
    with pytest.raises(TypeError):
        store.put(0, {"x": [1, 2]})
    with pytest.raises(TypeError):
        store.put(0, {1.5: torch.zeros(1)})
    with pytest.raises(TypeError):
        store.put(0, {True: torch.zeros(1)})
    with pytest.raises(TypeError):
        store.put(0, [torch.zeros(1)])
    with pytest.raises(ValueError):
        store.put(-1, {})
    assert len(store) == 0


def test_non_contiguous_and_grad_tensors():
    store = StateStore()
    base = torch.arange(24.0).reshape(4, 6)
    w = torch.randn(5, requires_grad=True)
    store.put(0, {"t": base.t(), "s": base[:, ::2], "w": w * 2})
    got = store.get(0)
    assert torch.equal(got["t"], base.t()) and torch.equal(got["s"], base[:, ::2])
    assert torch.equal(got["w"], (w * 2).detach()) and not got["w"].requires_grad


def _random_value(rng: random.Random, depth: int):
    r = rng.random()
    if depth < 2 and r < 0.15:
        return _random_state(rng, depth + 1)
    if r < 0.6:
        dtype = rng.choice(DTYPES)
        shape = tuple(rng.randint(0, 4) for _ in range(rng.randint(0, 3)))
        g = torch.Generator().manual_seed(rng.randrange(1 << 30))
        if dtype.is_floating_point or dtype.is_complex:
            return torch.randn(shape, generator=g).to(dtype)
        if dtype == torch.bool:
            return torch.randint(0, 2, shape, generator=g).bool()
        return torch.randint(0, 100, shape, generator=g).to(dtype)
    return rng.choice([rng.randint(-(1 << 62), 1 << 62), rng.random() * 1e6 - 5e5, True, False, None, 1 << 80])


def _random_state(rng: random.Random, depth: int = 0) -> dict:
    out = {}
    for _ in range(rng.randint(0, 4)):
        key = rng.choice([f"k{rng.randint(0, 5)}", rng.randint(0, 5), (rng.randint(0, 3), rng.randint(0, 3))])
        out[key] = _random_value(rng, depth)
    return out


@pytest.mark.parametrize("budget", [None, 0, 4000])
def test_property_random_states(tmp_path, budget):
    rng = random.Random(budget or 7)
    store = StateStore(budget_bytes=budget, spill_dir=str(tmp_path))
    truth: dict[int, dict] = {}
    for _ in range(600):
        cid = rng.randrange(60)
        op = rng.random()
        if op < 0.5:
            truth[cid] = _random_state(rng)
            store.put(cid, truth[cid])
        elif op < 0.9:
            got = store.get(cid)
            if cid in truth:
                assert_same(got, truth[cid])
            else:
                assert got is None
        else:
            store.discard(cid)
            truth.pop(cid, None)
        if budget is not None:
            assert store.memory_bytes <= budget
        assert len(store) == len(truth)
    assert store.ids() == sorted(truth)
    for cid, state in store.items():
        assert_same(state, truth[cid])
    snap = store.snapshot()
    for cid in truth:
        assert_same(snap[cid], truth[cid])
    store.close()
    assert os.listdir(tmp_path) == []


@pytest.mark.gpu
def test_device_states(tmp_path):
    store = StateStore(budget_bytes=1000, spill_dir=str(tmp_path), device="cuda")
    truth = {i: rich_state(i) for i in range(10)}
    for i, st in truth.items():
        store.put(i, {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in st.items()})
    for i, st in truth.items():
        got = store.get(i)
        assert got["m"].device.type == "cuda"
        assert_same({k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in got.items()}, st)
    assert all(v.device.type == "cpu" for v in store.snapshot([0])[0].values() if isinstance(v, torch.Tensor))
    store.close()


def test_many_layouts_stay_small():
    # per-task states: every client holds a different set of task keys, i.e. its own layout
    store = StateStore()
    for i in range(300):
        store.put(i, {"u_task": {i: torch.randn(5), i + 1: torch.randn(5)}})
    assert store.allocated_bytes < 300 * 40 * 4 + 2**20  # a row or so per layout, not a chunk of MiBs
    for i in range(300):
        assert sorted(store.get(i)["u_task"]) == [i, i + 1]
    # one layout with many rows crosses from growing chunks to full ones
    big = StateStore()  # 12,000-byte rows: full chunks of 256 rows after the growing ones
    for i in range(1000):
        big.put(i, {"v": torch.full((3000,), float(i))})
    assert big._specs[0].rows_per_chunk == 256
    assert all(float(big.get(i)["v"][-1]) == i for i in range(1000))
    assert big.allocated_bytes < 1300 * 12_000
