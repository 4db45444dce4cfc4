"""`python -m raycompo.bench ops`: its counts of one round (aten operations, Python calls)
are deterministic, and they grow with the number of clients by the slope it prints."""

from __future__ import annotations

import re

from raycompo.bench import ops


def printed(out: str, algo: str) -> tuple[dict[int, tuple[int, int]], dict[str, float]]:
    """The rows {m: (aten, py calls)} and the slopes {count: per client} printed for `algo`."""
    rows, slopes = {}, {}
    for line in out.splitlines():
        cells = line.split()
        if cells[:1] == [algo] and len(cells) == 6 and cells[1].isdigit():
            rows[int(cells[1])] = (int(cells[2]), int(cells[3]))
        match = re.match(rf"{algo}\s+(aten|py calls)\s+.*slope (\S+) per client", line)
        if match:
            slopes[match.group(1)] = float(match.group(2))
    return rows, slopes


def test_counts_repeat_and_grow_by_the_printed_slope(capsys):
    """With `randperm` (a draw per client and step, so the counts grow with m)."""
    assert ops.main(["--quick", "--algos", "fedavg", "--sampler", "randperm"]) == 0  # m = 4 and 8
    rows, slopes = printed(capsys.readouterr().out, "fedavg")
    assert sorted(rows) == [4, 8] and set(slopes) == {"aten", "py calls"}
    again = ops.measure("fedavg", 4, sampler="randperm")
    assert (again["aten"], again["py calls"]) == rows[4]  # deterministic: the same counts in a new run
    assert slopes["aten"] == (rows[8][0] - rows[4][0]) / 4 > 0
    # Every synthetic client holds more samples than a batch: each extra client adds the
    # same work, so the slope from m = 4 to 8 predicts m = 12 exactly.
    twelve = ops.measure("fedavg", 12, sampler="randperm")
    assert twelve["aten"] == rows[8][0] + 4 * slopes["aten"]
    assert twelve["py calls"] == rows[8][1] + 4 * slopes["py calls"]


def test_an_extra_client_adds_only_its_draws():
    """Per extra client of vectorized FedAvg (tau 20 steps, batch 10) with `randperm`, only its sampler's
    `randperm` per step: the first b of the permutations are taken, and the chunk's rows of
    every step gathered from the host's data slab (one `index_select` of x and one of y),
    for the whole chunk at once."""
    four, eight = (ops.measure("fedavg", m, sampler="randperm")["by_op"] for m in (4, 8))
    grown = {op: (eight[op] - four.get(op, 0)) / 4 for op in eight if eight[op] != four.get(op, 0)}
    assert grown == {"aten.randperm": 20.0}


def test_the_gather_does_not_grow_with_the_clients():
    """The same number of `index_select` at m = 4 and m = 16, for an algorithm with two
    gathered streams (Ditto: its global and personal steps)."""
    four, sixteen = ops.measure("ditto", 4)["by_op"], ops.measure("ditto", 16)["by_op"]
    assert four["aten.index_select"] == sixteen["aten.index_select"] > 0


def test_a_keyed_round_does_not_grow_with_the_clients():
    """With the keyed sampler, a vectorized round of FedAvg and of Ditto (two gathered
    streams, a stacked personal model) makes the same aten operations and the same Python
    calls at m = 20 and m = 60 clients (one chunk each: past `FOLD_MANY_PYTHON`): the draws,
    the gathers, the counting, the contexts, the states and the costs are per chunk."""
    for algo in ("fedavg", "ditto"):
        twenty, sixty = ops.measure(algo, 20, None, "keyed"), ops.measure(algo, 60, None, "keyed")
        assert (twenty["aten"], twenty["py calls"]) == (sixty["aten"], sixty["py calls"]), algo


def test_a_keyed_pdsgd_round_does_not_grow_with_the_clients():
    """PDSGD (every client each round, ragged per-sample dual weights): with the keyed sampler
    the same aten operations and Python calls at m = 20 and m = 60 clients. Its dual weights
    are one padded (k, max n_i) tensor per chunk, read and written at once, its sampled
    weights gathered and its ascent scattered for the whole chunk, and its normalizer summed
    by the engine (no per-client contribution)."""
    twenty, sixty = ops.measure("pdsgd", 20, None, "keyed"), ops.measure("pdsgd", 60, None, "keyed")
    assert twenty["by_op"] == sixty["by_op"]
    assert twenty["py calls"] == sixty["py calls"]


def test_a_drfl_and_a_fastdro_round_do_not_grow_with_the_clients():
    """DRFL (its loss set U's values) and FastDRO (the pooled batch's per-sample losses, then
    each client's weights q_i back): the same aten operations and Python calls at m = 20 and
    m = 60. The members' answers stay the chunk's rows (`ctx.map_rows`: `ClientRows.stacked`,
    `.flat`), the weights go down as one `Shares`, and FastDRO's chunk draws its "grad" batch
    again uncounted (no journal hand-over). Before, each member's answer was cut out and read one by one:
    about 7 (DRFL) and 8 (FastDRO) aten operations per client. DRFL's cohort is drawn with
    replacement (by lambda), so its distinct clients, and with them the path of a chunk's
    draws (numpy or torch, `keyed.SMALL_ROWS`), vary with m: at 30 and 60 they take the same."""
    for algo, small in (("drfl", 30), ("fastdro", 20)):
        few, sixty = ops.measure(algo, small, None, "keyed"), ops.measure(algo, 60, None, "keyed")
        assert few["by_op"] == sixty["by_op"], algo
        assert few["py calls"] == sixty["py calls"], algo


def test_a_ragged_fastdro_round_does_not_grow_with_the_clients():
    """FastDRO with a batch larger than some clients' samples (`batch_size=64`): its losses
    of different lengths are one `Shares` per chunk, whose members' sizes the ledger counts
    at once (before: a list of k tensors, counted one by one, 26 Python calls per client).
    At m = 30 and 60: past the chunks whose seeds are folded in Python (`FOLD_MANY_PYTHON`)."""
    sets = {"batch_size": 64}
    few, sixty = ops.measure("fastdro", 30, sets, "keyed"), ops.measure("fastdro", 60, sets, "keyed")
    assert few["by_op"] == sixty["by_op"]
    assert few["py calls"] == sixty["py calls"]


def test_a_keyed_sinusoid_round_does_not_grow_with_the_clients():
    """The Local-SCGD family vectorized (`bench ops --algos local-moml`, maml-sinusoid): with
    the keyed sampler a chunk's meta-batches (the tasks, their points and targets) are drawn at
    once (`MamlSinusoid.meta_rows`), and its per-task states are rows of the chunk's states,
    read and written once per step (algorithms/task_states.py): the same aten operations and
    Python calls at m = 20 and m = 25 clients (1 or 2 tasks each: no draw of picks at either), and no more at
    m = 25 than at m = 5 (5 tasks each, 3 picked by keyed hashes)."""
    for algo in ("local-moml", "local-scgdm"):
        five, twenty, all_ = (ops.measure(algo, m) for m in (5, 20, 25))
        assert twenty["by_op"] == all_["by_op"] and twenty["py calls"] == all_["py calls"], algo
        assert all_["aten"] <= five["aten"] and all_["py calls"] <= five["py calls"], algo
        assert "aten.randperm" not in all_["by_op"] and "aten.rand" not in all_["by_op"], algo
    assert ops.config("local-moml", 5).task == "maml-sinusoid" and ops.config("local-moml", 5).vectorize == "on"


def test_an_extra_randperm_sinusoid_client_adds_only_its_task_draws():
    """With `--sampler randperm` (the draws of 0.1.1) each client draws its meta-batch from its
    generator: per extra client only those draws grow (per task: a `rand` of its points, their
    targets A sin(x + b pi / 5), the support / query cuts), not the per-task states (a moving
    average per task would add more `mul` than the draws' two per task)."""
    five, ten = (ops.measure("local-moml", m, None, "randperm")["by_op"] for m in (5, 10))
    grown = {op: ten[op] - five.get(op, 0) for op in ten if ten[op] != five.get(op, 0)}
    assert set(grown) == {"aten.slice", "aten.randperm", "aten.rand", "aten.mul", "aten.add", "aten.sin"}
    assert grown["aten.rand"] == grown["aten.sin"] > 0 and grown["aten.mul"] == grown["aten.add"] == 2 * grown["aten.sin"]