"""`ClientRows` (map_rows' answer) and `Shares` (a payload of each client's own entry):
the same values as the dicts they replace, read without work per member."""

import dataclasses
import pickle

import numpy as np
import pandas as pd
import pytest
import torch

import raycompo
from raycompo.algorithms.client_rows import ClientRows, Shares
from raycompo.engine.batched import member_sizes
from raycompo.engine.federation import Federation, RoundCtx
from raycompo.engine.ledger import MemberCosts, count_values
from raycompo.engine.pools import combine
from raycompo.engine.ray_pool import payload_bytes
from tests.helpers import small_config


def rows_of_two_chunks_and_a_client():
    """Two batched chunks (stacked rows, one with ragged losses) and one client-by-client answer."""
    g = torch.Generator().manual_seed(0)
    rows = ClientRows()
    rows.add([4, 1, 7], {"f": torch.randn(3, generator=g), "l": torch.randn(3, 2, generator=g), "n": [1.0, 2.0, 3.0]})
    rows.add([2, 9], {"f": torch.randn(2, generator=g), "l": [torch.randn(3, generator=g), torch.randn(1, generator=g)],
                      "n": [4.0, 5.0]})
    per_client = {5: {"f": torch.randn((), generator=g), "l": torch.randn(4, generator=g), "n": 6.0}}
    return ClientRows.merge([rows, per_client])


def test_as_dict_is_each_members_own_copy_in_the_parts_order():
    rows = rows_of_two_chunks_and_a_client()
    each = rows.as_dict()
    assert list(each) == [4, 1, 7, 2, 9, 5] == rows.ids() == list(rows)
    torch.testing.assert_close(each[7]["l"], rows.parts[0][1]["l"][2], rtol=0, atol=0)
    assert each[9]["n"] == 5.0 and each[5]["n"] == 6.0
    each[7]["l"].add_(1.0)  # a copy: the chunk's rows do not move
    assert not torch.equal(each[7]["l"], rows.parts[0][1]["l"][2])
    assert rows[7].keys() == {"f", "l", "n"} and len(rows) == 6 and 3 not in rows and 9 in rows


@pytest.mark.parametrize("order", [None, [5, 9, 2, 7, 1, 4], [1, 1, 5], [9]])
def test_stacked_and_flat_equal_the_members_values_in_order(order):
    rows = rows_of_two_chunks_and_a_client()
    each = rows.as_dict()
    ids = rows.ids() if order is None else order
    torch.testing.assert_close(rows.stacked("f", order), torch.stack([each[i]["f"].reshape(()) for i in ids]), rtol=0, atol=0)
    numbers = rows.stacked("n", order)
    assert numbers.dtype == torch.float64 and numbers.tolist() == [each[i]["n"] for i in ids]
    flat, lengths = rows.flat("l", order)
    torch.testing.assert_close(flat, torch.cat([each[i]["l"].reshape(-1) for i in ids]), rtol=0, atol=0)
    assert lengths == [each[i]["l"].numel() for i in ids]


def test_a_member_that_did_not_answer_is_named():
    rows = rows_of_two_chunks_and_a_client()
    with pytest.raises(KeyError, match="3"):
        rows.stacked("f", [4, 3])
    with pytest.raises(KeyError, match="no member answered"):
        ClientRows().stacked("f")


def test_combine_of_hosts_keeps_every_part_and_pickles_as_rows():
    a, b = ClientRows(), ClientRows()
    a.add([0, 1], {"x": torch.arange(4.0).view(2, 2)})
    b.add([2], {"x": torch.tensor([[9.0, 9.0]])})
    both = pickle.loads(pickle.dumps(combine([a, b], reduce=False)))
    assert both.ids() == [0, 1, 2] and len(both.parts) == 2
    torch.testing.assert_close(both.stacked("x", [2, 0]), torch.tensor([[9.0, 9.0], [0.0, 1.0]]))


def test_shares_are_the_split_entries():
    values = torch.arange(10, dtype=torch.float64)
    clients, lengths = [3, 0, 8, 5], [2, 3, 1, 4]
    shares = Shares(clients, values, lengths)
    split = dict(zip(clients, torch.split(values, lengths)))
    assert list(shares) == clients and len(shares) == 4
    for cid in clients:
        torch.testing.assert_close(shares[cid], split[cid], rtol=0, atol=0)
    torch.testing.assert_close(shares.cat([5, 3, 5]), torch.cat([split[5], split[3], split[5]]), rtol=0, atol=0)
    assert count_values(shares) == count_values(split)  # the ledger counts what the dict counted
    assert payload_bytes({"q": shares}) == payload_bytes({"q": split}) == 80  # Ray's put-or-inline choice too
    again = pickle.loads(pickle.dumps(shares.to("cpu")))
    torch.testing.assert_close(again.cat(clients), values, rtol=0, atol=0)
    with pytest.raises(KeyError, match="4"):
        shares.cat([4])
    with pytest.raises(ValueError, match="lengths"):
        Shares([0, 1], values, [3, 3])


def test_a_chunks_shares_answer_reads_and_counts_as_its_list_of_tensors():
    """A batched phase's values of different lengths as one `Shares` (FastDRO's ragged
    losses): the same members' values as the list of k tensors it replaces, and the same
    ledger sizes, counted without a call per member."""
    values, lengths = torch.arange(9, dtype=torch.float32), [4, 2, 3]
    as_list, as_shares = ClientRows(), ClientRows()
    as_list.add([6, 2, 8], {"l": list(torch.split(values, lengths)), "f": torch.ones(3)})
    as_shares.add([6, 2, 8], {"l": Shares([6, 2, 8], values, lengths), "f": torch.ones(3)})
    for order in (None, [8, 6, 2], [2, 2]):
        for got, want in zip(as_shares.flat("l", order), as_list.flat("l", order)):
            assert torch.equal(got, want) if isinstance(got, torch.Tensor) else got == want
    assert {c: v["l"].tolist() for c, v in as_shares.as_dict().items()} == \
        {c: v["l"].tolist() for c, v in as_list.as_dict().items()}
    with pytest.raises(ValueError, match="flat"):
        as_shares.stacked("l")
    with pytest.raises(ValueError, match="chunk's members"):
        ClientRows().add([2, 6, 8], {"l": Shares([6, 2, 8], values, lengths)})

    def costs(out):
        c = MemberCosts()
        c.add_many([6, 2, 8], [1, 2, 1], [5, 5, 5], member_sizes(out, 3), [0, 0, 0])
        return c

    ragged, shared = costs(as_shares.parts[0][1]), costs(as_list.parts[0][1])
    assert (ragged.values_up, ragged.bytes_up, ragged.by_key) == (shared.values_up, shared.bytes_up, shared.by_key)
    assert ragged.values_up == [5, 6, 4] and ragged.by_key["l"] == [11, 44]  # member 2 twice: 2 x 2 values
    # beside a list of tensors of their own shapes (counted member by member): each member its own length
    both = costs({**as_shares.parts[0][1], "x": [torch.zeros(1), torch.zeros(2, 2), torch.zeros(0)]})
    assert both.values_up == [6, 14, 4] and all(type(v) is int for v in both.values_up + both.bytes_up)
    assert both.by_key["l"] == [11, 44]


def test_a_population_cuts_a_chunks_shares_into_its_trials_rows():
    values, lengths, clients = torch.arange(10.0), [4, 2, 3, 1], [6, 2, 8, 5]
    shares = Shares(clients, values, lengths)
    split = dict(zip(clients, torch.split(values, lengths)))
    for at in (slice(0, 2), slice(2, 4), slice(1, 3), slice(4, 4)):
        part = shares.rows(at)
        assert list(part) == clients[at] and part.lengths.tolist() == lengths[at]
        for cid in clients[at]:
            assert torch.equal(part[cid], split[cid])
    assert ClientRows([(clients[2:], {"l": shares.rows(slice(2, 4))})]).flat("l")[1] == [3, 1]


@pytest.mark.parametrize("vectorize", ["on", "off"])
def test_map_rows_of_a_run_equals_map_each(vectorize):
    """A server round's map_rows and map_each of the same phase, state and seeds: the same
    contributions (FastDRO's per-sample losses, a batched chunk or client by client)."""
    feds = [Federation(dataclasses.replace(small_config("fastdro"), vectorize=vectorize)) for _ in range(2)]
    assert ("losses" in feds[0].pool.host.batched) == (vectorize == "on")
    clients = list(range(feds[0].n_clients))[::-1]
    rows = RoundCtx(feds[0], 0).map_rows("losses", clients, {"w": feds[0].w, "j": 0})
    each = RoundCtx(feds[1], 0).map_each("losses", clients, {"w": feds[1].w, "j": 0})
    assert sorted(rows.as_dict()) == sorted(each) == sorted(clients)
    flat, lengths = rows.flat("l", clients)
    torch.testing.assert_close(flat, torch.cat([each[c]["l"] for c in clients]), rtol=0, atol=0)
    assert lengths == [len(each[c]["l"]) for c in clients]
    assert np.all(np.asarray(lengths) > 0)


@pytest.mark.parametrize("uplink", [{}, {"dp_clip": 1.0, "dp_noise": 0.5}, {"compress": {"l": "qsgd:4"}}])
def test_ragged_fastdro_batched_equals_per_client_through_the_uplink(uplink):
    """FastDRO with clients of fewer samples than the batch: a chunk's losses are one
    `Shares`, which DP's clipping and noise and a compressed key see member by member, as
    the per-client path sends them: the same rows vectorized and not."""
    kw = dict(rounds=2, settings={"batch_size": 64, "n_clients": 16}, **uplink)
    on, off = (raycompo.run("synthetic", "fastdro", vectorize=v, **kw).metrics for v in ("on", "off"))
    cols = [c for c in on if "loss" in c or "acc" in c]
    pd.testing.assert_frame_equal(on[cols], off[cols], rtol=1e-5, atol=1e-6)
    assert on["values_up"].equals(off["values_up"]) and on["bytes_up"].equals(off["bytes_up"])
