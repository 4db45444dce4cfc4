"""A chunk's client states as stacked rows, and a host's batched map without Python work per
client (issue 41): `StateStore.get_many` / `put_many` equal `get` / `put` client by client,
`ChunkState` equals its list of dicts, batched stateful algorithms equal per client over
several rounds and resume exactly, and the engine's calls per chunk do not grow with k."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from raycompo.algorithms.chunk_state import ChunkState
from raycompo.bench import ops
from raycompo.configuration.config import RunConfig
from raycompo.engine import checkpoint, run
from raycompo.engine.client_data import ClientDataCache
from raycompo.engine.host import ClientCtx
from raycompo.engine.state_store import StateStore
from tests.helpers import assert_client_states_close
from tests.test_client_data import Loader
from tests.test_durability import StopAt, assert_same_costs, assert_same_metrics
from tests.test_vectorize import DRO_SYN, SYN, federation, run_rounds


def flat_state(cid: int, dim: int = 5) -> dict:
    g = torch.Generator().manual_seed(cid)
    return {"v": torch.randn(dim, generator=g), "n": torch.randint(0, 9, (2, 3), generator=g), "s": torch.randn((), generator=g)}


def assert_same_states(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for cid in a:
        assert list(a[cid]) == list(b[cid])  # the same keys, in the same order (the layout)
        for key in a[cid]:
            va, vb = a[cid][key], b[cid][key]
            if isinstance(va, torch.Tensor):
                assert va.dtype == vb.dtype and torch.equal(va, vb), (cid, key)
            else:
                assert type(va) is type(vb) and va == vb, (cid, key)


def test_get_many_equals_get_and_marks_the_clients_used():
    one, many = StateStore(), StateStore()
    for cid in (3, 0, 7, 5):
        one.put(cid, flat_state(cid))
        many.put(cid, flat_state(cid))
    ids = [5, 2, 0, 40, 3]  # 2 and 40 have no state (40 beyond the index)
    tensors, present = many.get_many(ids)
    assert present.tolist() == [True, False, True, False, True]
    for i, cid in enumerate(ids):
        expected = one.get(cid)
        if expected is None:
            assert not present[i]
            continue
        assert list(tensors) == list(expected)
        for key, value in expected.items():
            assert tensors[key].dtype == value.dtype and torch.equal(tensors[key][i], value)
    # recency as the per-client reads leave it: the same least recently used first
    assert np.array_equal(np.argsort(one._tick[:8], kind="stable"), np.argsort(many._tick[:8], kind="stable"))
    none, absent = many.get_many([1, 2])
    assert none == {} and not absent.any()


def test_get_many_leaves_spilled_mixed_and_nested_states_to_per_client_reads():
    mixed = StateStore()
    mixed.put(0, flat_state(0))
    mixed.put(1, flat_state(1, dim=6))  # another layout
    assert mixed.get_many([0, 1]) is None and mixed.get_many([0]) is not None
    nested = StateStore()
    nested.put(0, {"u_task": {1: {2: torch.ones(2)}}})  # dicts in dicts
    scalar = StateStore()
    scalar.put(0, {"v": torch.ones(2), "t": 3})
    assert nested.get_many([0]) is None and scalar.get_many([0]) is None
    small = StateStore(budget_bytes=3 * 80)  # a few states fit: the rest spill
    for cid in range(10):
        small.put(cid, {"v": torch.full((20,), float(cid))})
    assert small.spilled_clients > 0
    spilled = [cid for cid in range(10) if small._where[cid] == 2]
    ticks = small._tick.copy()
    assert small.get_many([spilled[0], 9]) is None
    assert np.array_equal(small._tick, ticks)  # nothing read: recency unchanged
    small.close()


@pytest.mark.parametrize("budget", [None, 5 * 76])
def test_put_many_equals_put_with_mixed_layouts_and_spilling(budget):
    one, many = StateStore(budget_bytes=budget), StateStore(budget_bytes=budget)
    for cid in range(0, 12, 2):  # earlier states: some of another layout, some spilled with a budget
        old = {"other": torch.arange(cid + 1)} if cid % 4 == 0 else flat_state(cid)
        one.put(cid, old)
        many.put(cid, old)
    ids = [4, 1, 10, 7, 2, 15]
    rows = {key: torch.stack([flat_state(100 + cid)[key] for cid in ids]) for key in ("v", "n", "s")}
    for i, cid in enumerate(ids):
        one.put(cid, {key: t[i] for key, t in rows.items()})
    many.put_many(ids, rows)
    assert len(one) == len(many) and one.memory_bytes + one.spilled_bytes == many.memory_bytes + many.spilled_bytes
    if budget is not None:
        assert many.spilled_clients > 0 and many.memory_bytes <= budget
    assert_same_states(one.snapshot(), many.snapshot())
    got = many.get_many([1, 7, 15])
    assert (got is None) == any(many._where[cid] == 2 for cid in (1, 7, 15))  # spilled: read one by one
    if got is not None:
        assert got[1].all() and torch.equal(got[0]["v"], rows["v"][[1, 3, 5]])
    with pytest.raises(ValueError, match="distinct"):
        many.put_many([1, 1], {"v": torch.zeros(2, 3)})
    with pytest.raises(ValueError, match="rows"):
        many.put_many([1, 2], {"v": torch.zeros(3, 3)})
    one.close()
    many.close()


def test_a_dict_of_tensors_in_the_states_is_stacked_as_a_dict_of_rows():
    """The uplink's residuals (a dict of tensors under one key): `put_many` of a dict of
    (k, ...) rows stores what `put` of each state does, `get_many` reads it back as such
    a dict, and a `ChunkState` of it gives each client's nested dict."""
    ids = [3, 0, 5]
    rows = {"v": torch.randn(3, 4), "_uplink": {"local:nw": torch.randn(3, 6), "local:n": torch.randn(3, 1, dtype=torch.float64)}}
    one, many = StateStore(), StateStore()
    for i, cid in enumerate(ids):
        one.put(cid, {"v": rows["v"][i], "_uplink": {name: r[i] for name, r in rows["_uplink"].items()}})
    many.put_many(ids, rows)
    assert one.memory_bytes == many.memory_bytes
    a, b = one.snapshot(), many.snapshot()
    assert a.keys() == b.keys()
    for cid in ids:
        assert list(a[cid]) == list(b[cid]) == ["v", "_uplink"] and torch.equal(a[cid]["v"], b[cid]["v"])
        assert list(a[cid]["_uplink"]) == list(b[cid]["_uplink"])
        assert all(torch.equal(a[cid]["_uplink"][n], b[cid]["_uplink"][n]) for n in a[cid]["_uplink"])
    got, present = one.get_many([5, 3])
    assert present.all() and torch.equal(got["_uplink"]["local:nw"], rows["_uplink"]["local:nw"][[2, 0]])
    chunk = ChunkState(2, got)
    assert torch.equal(chunk[1]["_uplink"]["local:n"], rows["_uplink"]["local:n"][0])
    with pytest.raises(ValueError, match="one level"):
        many.put_many([1], {"u": {"a": {"b": torch.zeros(1, 2)}}})
    with pytest.raises(ValueError, match="rows"):
        ChunkState(3, {"_uplink": {"local:nw": torch.zeros(2, 3)}})


def test_put_many_then_get_many_spans_arena_chunks():
    store = StateStore()
    ids = list(range(300, 0, -1))  # rows over several arena chunks (1, 2, 4, ... rows)
    rows = {"w": torch.randn(len(ids), 4096, dtype=torch.float64)}  # 32 KiB a row: 128 rows a chunk
    store.put_many(ids, rows)
    back, present = store.get_many(ids[::-1])
    assert present.all() and torch.equal(back["w"], rows["w"].flip(0))
    assert torch.equal(store.get(17)["w"], rows["w"][ids.index(17)])


def test_chunk_state_equals_its_list_of_dicts():
    k, v, x = 4, torch.randn(4, 3), torch.randn(4, 3)
    present = torch.tensor([True, False, True, False])
    chunk = ChunkState(k, {"v": v, "x": x}, present)
    dicts = list(chunk)
    assert dicts[1] == {} and torch.equal(dicts[2]["x"], x[2]) and list(dicts[0]) == ["v", "x"]
    default = torch.full((3,), 7.0)
    assert torch.equal(chunk.stacked("v", default), torch.stack([d.get("v", default) for d in dicts]))
    assert torch.equal(chunk.stacked("u", default), default.expand(k, 3))
    with pytest.raises(KeyError):
        chunk.stacked("v", None)
    # a new value of one key only: clients without a state would get fewer keys -> dicts
    partial = chunk.replace({"v": v + 1})
    assert isinstance(partial, list) and list(partial[1]) == ["v"] and list(partial[0]) == ["v", "x"]
    whole = chunk.replace({"v": v + 1, "x": x})  # every key, in the state's order: stays stacked
    assert isinstance(whole, ChunkState) and whole.present is None and list(whole.tensors) == ["v", "x"]
    with pytest.raises(ValueError, match="rows"):
        ChunkState(3, {"v": v})


def test_client_contexts_are_tuples_read_by_name():
    c = ClientCtx(3, None, round=2, seed=5)  # type: ignore[arg-type]
    assert (c.client_id, c.round, c.seed, c.dispatch, c.scratch) == (3, 2, 5, 0, {})
    assert c.key_prefix == ClientCtx(3, None, round=2, seed=5).key_prefix  # type: ignore[arg-type]
    assert c.rng(1).initial_seed() != ClientCtx(4, None, round=2, seed=5).rng(1).initial_seed()  # type: ignore[arg-type]


def test_data_cache_get_many_is_get_of_each():
    """`get_many` is `get` of each id in order: one `load` call for the missing, the same
    least recently used dropped past `max_clients`, each client's n_i read once."""
    one, many = ClientDataCache(Loader(), max_clients=4), ClientDataCache(Loader(), max_clients=4)
    for ids in ([0, 1, 2], [5, 1], [2, 6, 7], [0]):
        got = many.get_many(ids)
        assert [c.client_id for c in got] == ids == [one.get(i).client_id for i in ids]
        assert many.ids() == one.ids() and many.sizes == {i: 3 for i in many.ids()}
    assert many.loads == 4 and one.loads > many.loads  # one call per get_many with missing clients


STATEFUL = [("ditto", SYN), ("feddro", {**DRO_SYN, "beta": 0.5}), ("pdsgd", {**DRO_SYN, "dual_lr": 0.05})]
"""Batched algorithms with client states: Ditto's personal models, FedDRO's three keys,
PDSGD's dual weights (ragged n_i, kept as padded rows)."""


@pytest.mark.parametrize("algo,settings", STATEFUL)
def test_stacked_states_are_the_per_client_states_over_rounds(algo, settings, monkeypatch):
    """Several rounds: Ditto's of partial participation (7 of 12 clients a round: clients
    without a state next to clients with one), FedDRO's of three keys per state, PDSGD's
    of clients with 2 to 40 samples (a state as long as its chunk's largest n_i)."""
    ref = run_rounds(federation("synthetic", algo, settings, "off"), 5)
    stacked: Counter = Counter()

    def counting(name):
        fn = getattr(StateStore, name)

        def counted(self, *args):
            got = fn(self, *args)
            stacked[name, got is not None] += 1
            return got
        return counted

    for name in ("get_many", "put_many"):
        monkeypatch.setattr(StateStore, name, counting(name))
    vec = run_rounds(federation("synthetic", algo, settings, "on"), 5)
    assert stacked["get_many", True] and stacked["put_many", False]  # the states went stacked both ways
    torch.testing.assert_close(vec.w, ref.w, rtol=1e-5, atol=1e-5)
    a, b = ref.pool.client_states(), vec.pool.client_states()
    assert a.keys() == b.keys() and a
    for cid in a:
        assert list(a[cid]) == list(b[cid])
    assert_client_states_close(a, b, 1e-5)


@pytest.mark.parametrize("algo,settings", STATEFUL)
def test_resume_with_stacked_states_is_exact(tmp_path, algo, settings):
    cfg = RunConfig(task="synthetic", algo=algo, rounds=6, backend="inline", vectorize="on", settings=settings)
    run(cfg, out=tmp_path / "whole", checkpoint_every=2)
    with pytest.raises(KeyboardInterrupt):
        run(cfg, out=tmp_path / "cut", checkpoint_every=2, observers=[StopAt(5)])
    assert checkpoint.load(tmp_path / "cut" / checkpoint.FILE)["round"] == 4
    assert run(cfg, out=tmp_path / "cut", checkpoint_every=2, resume=True).status == "completed"
    assert_same_metrics(tmp_path / "whole", tmp_path / "cut")
    assert_same_costs(tmp_path / "whole", tmp_path / "cut")


def test_spilled_pdsgd_states_change_no_number():
    """PDSGD's padded dual weights through a state budget far below their size (a chunk with
    some on disk read client by client and padded to the chunk's width) give the model and
    the states of the in-memory run, bit for bit."""
    settings = {**DRO_SYN, "n_clients": 40, "dual_lr": 0.05}
    free = run_rounds(federation("synthetic", "pdsgd", settings, "on"), 4)
    tight = run_rounds(federation("synthetic", "pdsgd", settings, "on", state_memory_gb=2e-6), 4)
    assert tight.pool.host.stats()["state_spilled_bytes"] > 0
    assert torch.equal(free.w, tight.w)
    assert_client_states_close(free.pool.client_states(), tight.pool.client_states(), 0.0)


ENGINE_PER_CLIENT = ("engine/host.py:context", "engine/host.py:state", "engine/host.py:keep_state",
                     "engine/state_store.py:put", "engine/state_store.py:get", "engine/ledger.py:add",
                     "engine/ledger.py:samples_read", "engine/ledger.py:count_values", "engine/client_data.py:get",
                     "tasks/base.py:num_samples", "tasks/base.py:new_round", "C:OrderedDict.move_to_end")


def engine_calls(fn) -> Counter:
    """The calls `fn()` makes to the engine's per-client functions (sys.setprofile)."""
    counts: Counter = Counter()

    def hook(frame, event, arg):
        if event == "call":
            name = f"{frame.f_code.co_filename.split('raycompo/')[-1]}:{frame.f_code.co_name}"
            if name in ENGINE_PER_CLIENT:
                counts[name] += 1
        elif event == "c_call" and f"C:{getattr(arg, '__qualname__', '')}" in ENGINE_PER_CLIENT:
            counts[f"C:{arg.__qualname__}"] += 1

    ops.profiled(fn, hook)
    return counts


@pytest.mark.parametrize("algo,compress", [("fedavg", None), ("ditto", None), ("fedavg", {"*": "topk:0.05"})])
def test_a_batched_round_makes_no_engine_call_per_client(algo, compress):
    """A vectorized round's contexts, states and costs: the engine's per-client functions are
    called as often with 60 clients a round as with 20 (ditto's states stacked from round 2;
    under top-k with error feedback, the clients' residuals stacked from round 2)."""
    few, many = (ops.counted_round(ops.config(algo, m, compress=compress), engine_calls) for m in (20, 60))
    assert few == many


def test_no_python_function_is_called_per_client():
    """All of a round's calls of Python functions (C functions aside: with the default sampler,
    `randperm` and the generator's reseeding per client and step): none is called more often
    with 60 clients a round than with 20 (the counting of samples read included)."""
    def by_name(fn):
        counts: Counter = Counter()

        def hook(frame, event, arg):
            if event == "call":
                counts[f"{frame.f_code.co_filename.split('raycompo/')[-1]}:{frame.f_code.co_name}"] += 1

        ops.profiled(fn, hook)
        return counts

    few, many = (ops.counted_round(ops.config("ditto", m), by_name) for m in (20, 60))
    assert {name for name in many if many[name] > few[name]} == set()
