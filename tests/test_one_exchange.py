"""One exchange for every aggregation (issue 40; engine/exchange.py): the matrix {sync, sync with
a deadline, buffered, async} x {plain, --compress up, --compress-down, DP} checked for the same
semantics, one path seen by a replaced step and a listener, draws keyed per dispatch, clients
that leave never computed, and the event log."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import pytest
import torch

from raycompo.compression.methods import parse_method
from raycompo.configuration.config import RunConfig
from raycompo.costs.exchange import BREAKDOWN_KEY
from raycompo.engine.exchange import Exchange
from raycompo.engine.federation import Federation
from raycompo.errors import ConfigError
from raycompo.system.event_log import EVENTS_KEY
from tests.helpers import assert_rows_close

SETTINGS = {"n_clients": 8, "clients_per_round": 4, "tau": 2, "min_samples": 60, "max_samples": 60, "batch_size": 16}
AGGREGATIONS = {
    "sync": {},
    "deadline": {"system": "mobile"},  # 130 % over-selection, a 300 s deadline
    "buffered": {"system": "uniform", "aggregation": "buffered", "concurrency": 4, "buffer": 2},
    "async": {"system": "uniform", "aggregation": "async", "concurrency": 4},
}
TRANSFORMS = {
    "plain": {},
    "up": {"compress": {"nw": "topk:0.1"}},
    "down": {"compress_down": {"w": "qsgd:8"}},
    "dp": {"dp_clip": 1.0, "dp_noise": 1.0},
}
ROUNDS = 3


def config(aggregation: str, transform: str, **kw) -> RunConfig:
    return RunConfig(task="synthetic", algo="fedavg", rounds=ROUNDS, backend="inline", eval_every=ROUNDS,
                     settings=dict(SETTINGS), **AGGREGATIONS[aggregation], **TRANSFORMS[transform], **kw)


def rounds(fed: Federation, count: int = ROUNDS) -> list[dict]:
    try:
        return [fed.run_round() for _ in range(count)]
    finally:
        fed.close()


def by_direction(breakdown: list[dict], round_: int) -> dict[str, dict[str, tuple[int, int]]]:
    out: dict[str, dict[str, tuple[int, int]]] = {"up": {}, "down": {}}
    for r in breakdown:
        if r["round"] == round_:
            out[r["direction"]][r["key"]] = (r["values"], r["bytes"])
    return out


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("aggregation", list(AGGREGATIONS))
def test_every_aggregation_counts_and_transforms_alike(aggregation, transform):
    """costs.csv's bytes per key sum to metrics.csv's columns and are the encoding formulas'
    sizes; epsilon is the stated mechanism's; DP under asynchronous aggregation is refused."""
    cfg = config(aggregation, transform)
    if transform == "dp" and aggregation in ("buffered", "async"):
        with pytest.raises(ConfigError, match="no epsilon could be stated"):
            Federation(cfg)
        return
    fed = Federation(cfg)
    d = fed.w.numel()
    rows = rounds(fed)
    before = {"bytes_up": 0, "bytes_down": 0, "values_up": 0, "values_down": 0}
    for t, row in enumerate(rows, start=1):
        keys = by_direction(row[BREAKDOWN_KEY], t)
        for direction in ("up", "down"):
            assert sum(v for v, _ in keys[direction].values()) == row[f"values_{direction}"] - before[f"values_{direction}"]
            assert sum(b for _, b in keys[direction].values()) == row[f"bytes_{direction}"] - before[f"bytes_{direction}"]
        members = keys["down"]["w"][0] // d  # each member received the model once
        assert members >= 1 and keys["up"]["n"] == (members, 8 * members)  # n_i: one 8-byte number each
        if transform == "up":
            assert keys["up"]["nw"] == (members * d, members * math.ceil(parse_method("topk:0.1", "nw").bits(d) / 8))
        else:
            assert keys["up"]["nw"] == (members * d, members * d * 4)
        if transform == "down":
            assert keys["down"]["w"] == (members * d, members * math.ceil(parse_method("qsgd:8", "w").bits(d) / 8))
        else:
            assert keys["down"]["w"] == (members * d, members * d * 4)
        before = {k: row[k] for k in before}
    if transform == "dp":
        from tests.test_compression import stated_mechanism_epsilon

        expected = [stated_mechanism_epsilon(8, 4, 1.0, 1.0, 1e-5, [1] * t) for t in range(1, ROUNDS + 1)]
        assert [r["epsilon"] for r in rows] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("transform", ["plain", "up", "down"])
@pytest.mark.parametrize("aggregation", list(AGGREGATIONS))
def test_resume_from_a_checkpoint_gives_the_uninterrupted_rows(aggregation, transform):
    whole = rounds(Federation(config(aggregation, transform)))
    first = Federation(config(aggregation, transform))
    try:
        first.run_rounds(2)
        ckpt = first.checkpoint()
    finally:
        first.close()
    second = Federation(config(aggregation, transform))
    second.restore(ckpt)
    resumed = rounds(second, 1)
    drop = ("round_time", "wall_time", BREAKDOWN_KEY, "_clients")
    assert_rows_close([{k: v for k, v in resumed[0].items() if k not in drop}],
                      [{k: v for k, v in whole[-1].items() if k not in drop}], tol=1e-12)


@pytest.mark.parametrize("method", ["qsgd:4", "randk:0.1"])
@pytest.mark.parametrize("aggregation", list(AGGREGATIONS))
def test_keyed_compression_draws_per_client_batched_and_resumed_alike(aggregation, method, monkeypatch):
    """QSGD's levels and rand-k's entries, keyed per (client, round or version, exchange) for
    a whole chunk (the default sampler), in every aggregation: the per-client path and the
    batched chunks give the same rows, and a resumed run the uninterrupted one's. The keyed
    draws are what runs (their rows counted: one per member alone, several in a chunk)."""
    from raycompo.compression import methods

    drawn: dict[str, list[int]] = {"uniform": [], "indices": []}

    def counting(real, key):
        def spy(seeds, *args, **kw):
            drawn[key].append(len(seeds))
            return real(seeds, *args, **kw)
        return spy

    monkeypatch.setattr(methods, "keyed_uniform", counting(methods.keyed_uniform, "uniform"))
    monkeypatch.setattr(methods, "keyed_indices", counting(methods.keyed_indices, "indices"))
    used = "uniform" if method.startswith("qsgd") else "indices"
    drop = ("round_time", "wall_time", BREAKDOWN_KEY, "_clients")

    def kept(rows):
        return [{k: v for k, v in r.items() if k not in drop} for r in rows]

    def cfg(**kw):
        return dataclasses.replace(config(aggregation, "plain", compress={"nw": method}), **kw)

    per_client = rounds(Federation(cfg(vectorize="off")))
    assert drawn[used] and set(drawn[used]) == {1}
    drawn[used].clear()
    batched = rounds(Federation(cfg(vectorize="on")))
    assert drawn[used] and max(drawn[used]) > 1
    assert_rows_close(kept(batched), kept(per_client), tol=1e-5)
    first = Federation(cfg())
    try:
        first.run_rounds(2)
        ckpt = first.checkpoint()
    finally:
        first.close()
    second = Federation(cfg())
    second.restore(ckpt)
    assert_rows_close(kept(rounds(second, 1)), kept(batched[-1:]), tol=1e-12)


# --- one path ------------------------------------------------------------------------
@pytest.mark.parametrize("aggregation", list(AGGREGATIONS))
def test_a_replaced_step_and_a_listener_act_in_every_aggregation(aggregation, monkeypatch):
    """A downlink step replaced once (here: every payload's model sent as zeros) and a
    listener added once reach synchronous rounds and asynchronous steps alike."""
    real = Exchange.send

    def zero_model(self, phase, round_, index, payload):
        payload, encoded = real(self, phase, round_, index, payload)
        return {**payload, "w": torch.zeros_like(payload["w"])}, encoded

    monkeypatch.setattr(Exchange, "send", zero_model)
    fed = Federation(config(aggregation, "plain"))
    heard = []
    fed.exchange_listeners.append(heard.append)
    seen = []
    real_map = fed.pool.map

    def spying(phase, round_, counts, payload, *args, **kw):
        if phase == "local":
            seen.append(float(payload["w"].abs().sum()))
        return real_map(phase, round_, counts, payload, *args, **kw)

    fed.pool.map = spying
    rows = rounds(fed, 2)
    assert seen and all(s == 0.0 for s in seen)  # every client started from the replaced payload
    assert [c.round for c in heard] == [1, 2] and all(c.barrier == (aggregation in ("sync", "deadline")) for c in heard)
    assert sum(sum(c.samples) for c in heard) == rows[-1]["samples"]  # the listener saw what the ledger counted


# --- draws per dispatch ------------------------------------------------------------------
def test_a_client_dispatched_again_at_one_version_draws_apart_and_counts_its_samples():
    """The issue's case: 4 clients, C = K = 2 on mobile-sync: a client that arrives first is
    dispatched again with the same version. Its two updates differ, and every dispatch's
    samples are counted (samples = oracle calls / 2 for FedAvg's plain gradients)."""
    cfg = RunConfig(task="synthetic", algo="fedavg", rounds=10, backend="inline", eval_every=10, system="mobile-sync",
                    aggregation="buffered", concurrency=2, buffer=2, log_events=True,
                    settings={"n_clients": 4, "clients_per_round": 2})
    fed = Federation(cfg)
    updates = []
    real = fed.asynchronous._update

    def keep(contribution, z):
        out = real(contribution, z)
        updates.append(out["y"]["w"])
        return out

    fed.asynchronous._update = keep
    rows = rounds(fed, 10)
    events = [e for r in rows for e in r[EVENTS_KEY]]
    repeats = Counter((e["client"], e["version"]) for e in events)
    assert max(repeats.values()) >= 2  # the case happens
    assert len({tuple(u.flatten().tolist()) for u in updates}) == len(updates)  # no two updates alike
    for prev, row in zip([{"samples": 0, "oracle_calls": 0}] + rows, rows):
        assert row["samples"] - prev["samples"] == (row["oracle_calls"] - prev["oracle_calls"]) // 2


FLAKY = "name: flaky\navailability: {kind: bernoulli, p: 0.5, slot_s: 1}\n"


def test_a_client_that_leaves_is_never_computed_and_is_charged_its_work_until_it_left(tmp_path):
    profile = tmp_path / "flaky.yaml"
    profile.write_text(FLAKY)
    cfg = RunConfig(task="synthetic", algo="fedavg", rounds=30, backend="inline", eval_every=30, system=str(profile),
                    aggregation="buffered", concurrency=4, buffer=2, log_events=True, settings={"n_clients": 20})
    fed = Federation(cfg)
    computed = []
    real = fed.pool.map

    def spying(phase, round_, counts, payload, reduce=True, count=False, dispatch=0, probe=False):
        if phase == "local" and not probe:
            computed.extend((c, round_, dispatch) for c in counts)
        return real(phase, round_, counts, payload, reduce, count, dispatch, probe)

    fed.pool.map = spying
    rows = rounds(fed, 30)
    events = [e for r in rows for e in r[EVENTS_KEY]]
    lost = [e for e in events if e["fate"] == "lost"]
    arrived = [e for e in events if e["fate"] != "lost"]
    assert lost and sum(r["dropped"] for r in rows) == len(lost)
    # every computation is one that arrived (or is still in flight): a lost dispatch was never computed
    assert len(computed) == len(set(computed)) <= len(arrived) + fed.asynchronous.queue.arrivals_in_flight()
    # the ledger counts the arrivals' downloads only; the lost ones' work until they left is in dropped_*
    payload_bytes = rows[0]["bytes_down"] // sum(1 for e in events if e["step"] == 1 and e["fate"] != "lost")
    assert rows[-1]["bytes_down"] == payload_bytes * len(arrived)
    assert 0 < rows[-1]["dropped_bytes_down"] <= payload_bytes * len(lost)
    assert 0 <= rows[-1]["dropped_samples"] <= fed.asynchronous.work.data_samples * len(lost)


# --- the event log ------------------------------------------------------------------------
def test_the_event_log_of_synchronous_rounds_and_asynchronous_steps():
    sync = rounds(Federation(config("deadline", "plain", log_events=True)))
    for t, row in enumerate(sync, start=1):
        applied = [e for e in row[EVENTS_KEY] if e["fate"] == "applied"]
        assert len(applied) == 4 and all(e["step"] == t and e["version"] == t - 1 and e["staleness"] == 0 for e in applied)
        assert all(e["dispatched_s"] <= e["finished_s"] <= row["sim_time"] + 1e-9 for e in row[EVENTS_KEY])
        assert sum(e["fate"] in ("dropped", "lost") for e in row[EVENTS_KEY]) == row["dropped"]
    numbers = [e["dispatch"] for row in sync for e in row[EVENTS_KEY]]
    assert sorted(numbers) == list(range(len(numbers)))
    buffered = rounds(Federation(config("buffered", "plain", log_events=True)), 6)
    for t, row in enumerate(buffered, start=1):
        applied = [e for e in row[EVENTS_KEY] if e["fate"] == "applied"]
        assert len(applied) == 2 and all(e["staleness"] == t - 1 - e["version"] for e in applied)
        assert max(e["staleness"] for e in applied) == row["staleness_max"]
    plain = rounds(Federation(config("sync", "plain", log_events=True)), 1)[0][EVENTS_KEY]
    assert len(plain) == 4 and all(e["dispatched_s"] is None and e["finished_s"] is None for e in plain)


@pytest.mark.parametrize("aggregation", ["deadline", "buffered"])
def test_events_csv_of_a_resumed_run_is_the_uninterrupted_ones(aggregation, tmp_path):
    """Through the run folder, with the driver's own events: a run stopped at its checkpoint
    of step 2 and resumed to 4 writes events.csv byte for byte as a run of 4; a file that
    lost a whole row is refused (the checkpoint counts them)."""
    from raycompo.engine import run
    from raycompo.runfolder.events_file import FILE, read_events

    logged = dataclasses.replace(config(aggregation, "plain", log_events=True), rounds=4, eval_every=2)
    whole = run(logged, out=str(tmp_path / "whole"))
    assert len(whole.events) == len(read_events(tmp_path / "whole")) > 0
    assert set(whole.events["step"]) == {1, 2, 3, 4}
    run(dataclasses.replace(logged, rounds=2), out=str(tmp_path / "cut"))
    run(logged, out=str(tmp_path / "cut"), resume=True)
    assert (tmp_path / "cut" / FILE).read_bytes() == (tmp_path / "whole" / FILE).read_bytes()
    run(dataclasses.replace(logged, rounds=2), out=str(tmp_path / "short"))
    lines = (tmp_path / "short" / FILE).read_text().splitlines(keepends=True)
    (tmp_path / "short" / FILE).write_text("".join(lines[:-1]))  # a whole row lost
    with pytest.raises(ConfigError, match="events.csv holds .* rows up to step 2, and the checkpoint's event log"):
        run(logged, out=str(tmp_path / "short"), resume=True)


def test_without_the_event_log_rows_are_the_same():
    with_log = rounds(Federation(config("buffered", "up", log_events=True)))
    without = rounds(Federation(config("buffered", "up")))
    drop = ("round_time", "wall_time", EVENTS_KEY, BREAKDOWN_KEY, "_clients")
    assert_rows_close([{k: v for k, v in r.items() if k not in drop} for r in with_log],
                      [{k: v for k, v in r.items() if k not in drop} for r in without], tol=0)


@pytest.mark.slow
@pytest.mark.parametrize("aggregation", list(AGGREGATIONS))
def test_ray_equals_inline_for_every_aggregation(aggregation, ray_session):
    transform = "up" if aggregation in ("buffered", "async") else "dp"
    inline = rounds(Federation(config(aggregation, transform)))
    on_ray = rounds(Federation(dataclasses.replace(config(aggregation, transform), backend="ray", clients_per_actor=4,
                                                   cpus_per_actor=0.5)))
    drop = ("round_time", "wall_time", BREAKDOWN_KEY, "_clients")
    assert_rows_close([{k: v for k, v in r.items() if k not in drop} for r in on_ray],
                      [{k: v for k, v in r.items() if k not in drop} for r in inline], tol=1e-6)


@pytest.mark.slow
def test_ray_equals_inline_with_keyed_compression_under_async(ray_session):
    """The keyed QSGD draws of asynchronous steps (keyed by client, version and dispatch) on
    Ray's host actors are the inline ones."""
    cfg = config("async", "plain", compress={"nw": "qsgd:4"})
    inline = rounds(Federation(cfg))
    on_ray = rounds(Federation(dataclasses.replace(cfg, backend="ray", clients_per_actor=4, cpus_per_actor=0.5)))
    drop = ("round_time", "wall_time", BREAKDOWN_KEY, "_clients")
    assert_rows_close([{k: v for k, v in r.items() if k not in drop} for r in on_ray],
                      [{k: v for k, v in r.items() if k not in drop} for r in inline], tol=1e-6)


# --- privacy, for every (aggregation, algorithm family) --------------------------------------
FAMILIES = {  # algorithm: (settings, noised exchanges a round)
    "fedavg": ({}, 1),  # one average of models
    "comfedl": ({"normalizer": "lse", "gamma": 10.0}, 2),  # the compositional family: f_i(w) for the centre, then models
    "drfl": ({}, None),  # draws its own cohort with replacement: refused with DP
}


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("aggregation", list(AGGREGATIONS))
def test_dp_gives_the_stated_mechanisms_epsilon_or_is_refused_with_the_reason(aggregation, family):
    """Each combination either runs with epsilon equal to dp-accounting's for the mechanism
    docs/compression.md states (m of n sampled without replacement, E noised releases a
    round), or is refused before round 0 saying why: DRFL's own cohorts, any algorithm under
    asynchronous aggregation."""
    settings, exchanges = FAMILIES[family]
    cfg = dataclasses.replace(config(aggregation, "dp"), algo=family, settings={**SETTINGS, **settings})
    if family == "drfl":
        with pytest.raises(ConfigError, match="draws its own cohorts|no epsilon could be stated|cannot run asynchronously"):
            Federation(cfg)
        return
    if aggregation in ("buffered", "async"):
        with pytest.raises(ConfigError, match="no epsilon could be stated|barrier"):
            Federation(cfg)
        return
    from tests.test_compression import stated_mechanism_epsilon

    rows = rounds(Federation(cfg), 2)
    expected = [stated_mechanism_epsilon(8, 4, 1.0, 1.0, 1e-5, [exchanges] * t) for t in (1, 2)]
    assert [r["epsilon"] for r in rows] == pytest.approx(expected, rel=1e-9)
