"""Asynchronous aggregation on the simulated clock (issue 31): FedBuff and FedAsync, the
algorithms' buffered forms, the event order, and what a user cannot configure."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

import raycompo
from raycompo.configuration.config import RunConfig, resolve
from raycompo.engine import run
from raycompo.errors import ConfigError
from raycompo.system.aggregation import AggregationSettings, staleness_weight
from raycompo.system.events import ARRIVAL, DISPATCH, Event, Queue
from tests.helpers import assert_rows_close

N = 6
EQUAL = {"n_clients": N, "clients_per_round": None, "tau": 2, "min_samples": 60, "max_samples": 60, "batch_size": 16}
"""Synthetic clients of equal size (60 samples): FedAvg's n_i-weighted mean is the plain mean."""
ASYNC_COLUMNS = ("staleness_mean", "staleness_max", "in_flight")


def cfg(rounds=3, settings=None, **kw):
    return RunConfig(task="synthetic", algo=kw.pop("algo", "fedavg"), rounds=rounds, backend="inline",
                     settings={**EQUAL, **(settings or {})}, **kw)


def values(rows, drop=("round_time", "wall_time")):
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


# --- the staleness weights and the event order ------------------------------------------
def test_staleness_weights_are_the_papers_formulas():
    assert staleness_weight("constant", 7, 0.5, 4) == 1.0
    assert staleness_weight("polynomial", 3, 0.5, 4) == pytest.approx(4 ** -0.5)  # (1 + tau)^-a, FedBuff
    assert staleness_weight("hinge", 4, 10, 4) == 1.0  # tau <= b
    assert staleness_weight("hinge", 6, 10, 4) == pytest.approx(1 / (10 * 2 + 1))  # 1 / (a (tau - b) + 1)
    assert AggregationSettings(staleness="hinge").weight(5) == pytest.approx(1 / 11)  # FedAsync's a = 10, b = 4
    assert AggregationSettings().weight(0) == 1.0


def test_arrivals_come_before_dispatches_at_equal_times_and_in_dispatch_order():
    q = Queue()
    q.push(Event(2.0, DISPATCH, 0))
    q.push(Event(2.0, ARRIVAL, 5, client=1))
    q.push(Event(2.0, ARRIVAL, 3, client=2))
    q.push(Event(1.0, DISPATCH, 9))
    order = [(e.time, e.kind, e.seq) for e in (q.pop() for _ in range(4))]
    assert order == [(1.0, DISPATCH, 9), (2.0, ARRIVAL, 3), (2.0, ARRIVAL, 5), (2.0, DISPATCH, 0)]
    q2 = Queue()
    q2.load(json.loads(json.dumps(q.state())))
    assert q2.state() == q.state()


# --- equivalences: what the buffer reduces to -----------------------------------------
@pytest.mark.parametrize("algo,extra", [
    ("fedavg", {}),
    ("comfedl", {"gamma": 1.0}),
])
def test_fedbuff_with_every_client_equal_devices_and_no_staleness_is_the_synchronous_round(algo, extra):
    """Equal, always-online devices (`uniform`), C = K = n, constant weight, eta_g = 1: all n
    clients finish at the same instant, the buffer holds them all (tau = 0), and the n slots
    are refilled with the new model: FedBuff's (1/K) sum of Deltas is the synchronous mean."""
    settings = {**extra, "staleness": "constant"}
    sync = run(cfg(rounds=3, algo=algo, settings={**extra}, system="uniform"))
    buff = run(cfg(rounds=3, algo=algo, settings=settings, system="uniform", aggregation="buffered",
                   concurrency=N, buffer=N))
    assert [r["staleness_max"] for r in buff.rows[1:]] == [0, 0, 0]
    assert [r["in_flight"] for r in buff.rows[1:]] == [0, 0, 0]  # all arrived; the N slots refill after the step
    keep = [k for k in sync.rows[0] if k not in ("round_time", "wall_time", "sim_time", "exchanges")]
    assert_rows_close([{k: r[k] for k in keep} for r in sync.rows], [{k: r[k] for k in keep} for r in buff.rows],
                      tol=1e-6)
    assert buff.rows[-1]["sim_time"] == pytest.approx(sync.rows[-1]["sim_time"], rel=1e-9)


def test_fedasync_with_one_client_and_alpha_one_is_sequential_fedavg():
    """n = C = 1: every update has tau = 0 and FedAsync's w <- (1 - alpha) w + alpha y with
    alpha = 1 is y, the one client's local model: the synchronous FedAvg of that client."""
    one = {"n_clients": 1}
    sync = run(cfg(rounds=3, settings=one))
    fa = run(cfg(rounds=3, settings={**one, "async_alpha": 1.0}, system="uniform", aggregation="async"))
    assert_rows_close(values(sync.rows, ("round_time", "wall_time", "exchanges")),
                      [{k: r[k] for k in values(sync.rows, ("round_time", "wall_time", "exchanges"))[0]} for r in fa.rows],
                      tol=1e-6)


def test_fedbuff_server_steps_are_the_staleness_weighted_deltas():
    """FedBuff with C = 2, K = 1 on `uniform`: both first clients a, b download w0 and finish
    at the same instant; a (dispatched first) makes step 1 with tau = 0, b step 2 with
    tau = 1. The arrival order is read from the events the queue hands out; the steps are
    recomputed here from the two clients' local models y = sum n_i w_i / n_i:
    w1 = w0 - eta (w0 - y_a), w2 = w1 - eta (1 + 1)^-0.5 (w0 - y_b)."""
    import torch

    from raycompo.engine.federation import Federation

    eta = 0.7
    fed = Federation(cfg(settings={"server_lr": eta}, system="uniform", aggregation="buffered", concurrency=2,
                         buffer=1, eval_every=10**6))  # no evaluation: the per-client counters' window stays open
    try:
        queue = fed.asynchronous.queue
        popped: list[Event] = []
        real_pop = queue.pop

        def recording_pop() -> Event:
            popped.append(real_pop())
            return popped[-1]

        queue.pop = recording_pop
        w0 = fed.w.clone()
        fed.run_round()
        w1 = fed.w.clone()
        row = fed.run_round()
        w2 = fed.w.clone()
        assert row["staleness_max"] == 1
        arrivals = [e for e in popped if e.kind == ARRIVAL]
        assert len(arrivals) == 2 and all(e.version == 0 and not e.lost for e in arrivals)
        (first, second) = arrivals
        assert first.time == second.time and first.seq < second.seq  # equal times: in dispatch order
        a, b = first.client, second.client
        assert a != b and sorted(fed.system.counters["selected"]) == sorted((a, b))
        out = fed.pool.map("local", 0, {a: 1, b: 1}, {"w": w0}, False)
        y = {c: (out[c]["nw"] / out[c]["n"]).to(torch.float64) for c in (a, b)}
        w0d = w0.to(torch.float64)
        e1 = w0d - eta * (w0d - y[a])
        e2 = e1 - eta * 2 ** -0.5 * (w0d - y[b])
        torch.testing.assert_close(w1.double(), e1, atol=1e-6, rtol=0)
        torch.testing.assert_close(w2.double(), e2, atol=1e-6, rtol=0)
        # the other order would not fit: the two clients' updates differ
        assert not torch.allclose(w0d - eta * (w0d - y[b]), e1, atol=1e-6)
    finally:
        fed.close()


# --- determinism, Ray, resume -------------------------------------------------------
MOBILE = dict(system="mobile", aggregation="buffered", concurrency=4, buffer=2)


def test_deterministic_per_seed_with_staleness_on_a_heterogeneous_system():
    a = run(cfg(rounds=5, settings={"n_clients": 20}, **MOBILE))
    b = run(cfg(rounds=5, settings={"n_clients": 20}, **MOBILE))
    assert values(a.rows) == values(b.rows)
    assert list(a.rows[0])[-3:] == list(ASYNC_COLUMNS)
    assert max(r["staleness_max"] for r in a.rows[1:]) >= 1  # slow devices arrive stale
    assert [r["sim_time"] for r in a.rows] == sorted(r["sim_time"] for r in a.rows)
    assert a.config["aggregation_plan"] == {**dataclasses.asdict(AggregationSettings()), "aggregation": "buffered",
                                            "concurrency": 4, "buffer": 2}
    c = run(dataclasses.replace(cfg(rounds=5, settings={"n_clients": 20}, **MOBILE), seed=1))
    assert values(c.rows) != values(a.rows)


def test_max_staleness_drops_stale_updates_and_counts_their_work():
    r = run(cfg(rounds=6, settings={"n_clients": 20, "max_staleness": 0}, **MOBILE))
    assert all(row["staleness_max"] == 0 for row in r.rows[1:])
    assert sum(row["dropped"] for row in r.rows) > 0 and r.rows[-1]["wasted_s"] > 0
    free = run(cfg(rounds=6, settings={"n_clients": 20}, **MOBILE))
    # a dropped update was downloaded, computed and sent: the ledger counts it
    assert r.rows[-1]["samples"] > free.rows[-1]["samples"]


@pytest.mark.parametrize("algo,settings", [
    ("local-scgdm", {"n_clients": 4, "p": 2, "per_task_state": False}),
    ("fedavg-co", {"n_clients": 4, "sync_every": 2}),
])
def test_compositional_algorithms_run_buffered(algo, settings):
    task = "maml-sinusoid" if algo == "local-scgdm" else "toy-co"
    c = RunConfig(task=task, algo=algo, rounds=3, backend="inline", settings=settings, system="mobile",
                  aggregation="buffered", concurrency=3, buffer=2)
    r = run(c)
    assert r.status == "completed" and len(r.rows) == 4
    assert r.rows[-1]["sim_time"] > 0


def test_resume_mid_run_continues_the_clients_in_flight(tmp_path):
    straight = run(cfg(rounds=6, settings={"n_clients": 20}, **MOBILE), out=str(tmp_path / "a"))
    run(cfg(rounds=3, settings={"n_clients": 20}, **MOBILE), out=str(tmp_path / "b"), checkpoint_every=3)
    resumed = raycompo.resume(tmp_path / "b", rounds=6)
    assert_rows_close(straight.rows, resumed.rows, tol=1e-12)
    assert [r["sim_time"] for r in resumed.rows] == [r["sim_time"] for r in straight.rows]
    for changes, message in (({"buffer": 3}, "--buffer 3"), ({"aggregation": "async"}, "--aggregation async"),
                             ({"settings": {"server_lr": 0.5}}, "server_lr=0.5")):
        with pytest.raises(ConfigError, match=message):
            raycompo.runfolder.results.resumed_config(tmp_path / "b", rounds=8, changes=changes)


def test_a_run_interrupted_mid_way_resumes_to_the_uninterrupted_rows(tmp_path):
    """Interrupted at step 5 (Ctrl-C), the run resumes from its checkpoint of step 3, with
    clients in flight, and ends with the rows of the run that was never interrupted."""
    straight = run(cfg(rounds=6, settings={"n_clients": 20}, **MOBILE))

    def stop(row):
        if row["round"] == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        raycompo.run("synthetic", "fedavg", rounds=6, settings={**EQUAL, "n_clients": 20}, out=tmp_path / "k",
                     checkpoint_every=3, on_row=stop, **MOBILE)
    resumed = raycompo.resume(tmp_path / "k")
    assert resumed.status == "completed"
    assert_rows_close(straight.rows, resumed.rows, tol=1e-12)
    # costs.csv: the rows of rounds 4-5 written before the interruption are not written twice
    assert resumed.cost_rows == straight.cost_rows
    assert (tmp_path / "k" / "costs.csv").read_text() == straight.costs.to_csv(index=False)


@pytest.mark.slow
def test_ray_equals_inline(ray_session):
    c = cfg(rounds=3, settings={"n_clients": 20}, eval_every=3, **MOBILE)
    inline = run(c)
    remote = run(dataclasses.replace(c, backend="ray", clients_per_actor=10, cpus_per_actor=0.5))
    assert_rows_close(inline.rows, remote.rows, tol=1e-6)
    assert [r["sim_time"] for r in inline.rows] == pytest.approx([r["sim_time"] for r in remote.rows], rel=1e-9)


# --- what is counted -----------------------------------------------------------------
@pytest.mark.parametrize("vectorize", ["off", "on"])
def test_costs_csv_counts_the_encoded_uploads_per_key_as_metrics_bytes_up(vectorize, tmp_path):
    """Buffered FedAvg with top-k up: each applied update sends nw as top-k's message,
    k (32 + ceil(log2 d)) bits with k = max(1, floor(0.1 d)), rounded up to bytes, and n as
    an 8-byte number. costs.csv's per-key upload bytes are those messages (not the decoded
    d float32 entries), and they sum to metrics.csv's bytes_up, step by step."""
    import math

    import pandas as pd

    K = 2
    r = raycompo.run("synthetic", "fedavg", rounds=3, settings=EQUAL, system="uniform", aggregation="buffered",
                     concurrency=4, buffer=K, compress={"*": "topk:0.1"}, vectorize=vectorize, out=tmp_path / "run")
    assert r.status == "completed"
    d = resolve(cfg()).make_task().init_weights().numel()  # the model's entries
    k = max(1, math.floor(0.1 * d))
    message = math.ceil(k * (32 + math.ceil(math.log2(d))) / 8)
    costs = pd.read_csv(tmp_path / "run" / "costs.csv")
    metrics = pd.read_csv(tmp_path / "run" / "metrics.csv")
    up = costs[costs["direction"] == "up"]
    for step in (1, 2, 3):  # uniform: no loss, no staleness bound: K uploads a step
        mine = up[up["round"] == step].set_index("key")["bytes"].to_dict()
        assert mine == {"nw": K * message, "n": K * 8}, step
        grew = metrics.loc[metrics["round"] == step, "bytes_up"].item() - metrics.loc[metrics["round"] == step - 1,
                                                                                     "bytes_up"].item()
        assert sum(mine.values()) == grew
    assert up["bytes"].sum() == metrics["bytes_up"].iloc[-1]
    down = costs[costs["direction"] == "down"]
    assert down["bytes"].sum() == metrics["bytes_down"].iloc[-1]


# --- what cannot run -----------------------------------------------------------------
@pytest.mark.parametrize("kw,message", [
    (dict(aggregation="buffered", system="uniform", concurrency=2, buffer=3), "is more than concurrency"),
    (dict(aggregation="buffered"), "give --system"),
    (dict(aggregation="async", system="uniform", buffer=2), "--buffer must be 1"),
    (dict(buffer=2), "applies to --aggregation buffered or async"),
    (dict(aggregation="buffered", system="uniform", settings={"max_staleness": -1}), "max_staleness must be >= 0"),
    (dict(aggregation="buffered", system="uniform", concurrency=N + 1), "at most the 6 clients"),
    (dict(aggregation="buffered", system="uniform", settings={"async_alpha": 0.5}), "applies to --aggregation async"),
    (dict(aggregation="async", system="uniform", algo="comfedl", settings={"async_rho": 0.1}), "proximal term"),
    (dict(aggregation="buffered", system="uniform", algo="comfedl", settings={"normalizer": "lse"}), "barrier"),
    # client-level DP: no epsilon can be stated for the asynchronous selection (issue 40)
    (dict(aggregation="buffered", system="uniform", dp_clip=1.0, dp_noise=1.0),
     r"--dp-clip / --dp-noise \(client-level DP\) with --aggregation buffered: not supported: .*one client twice.*"
     r"no epsilon could be stated.*runs with synchronous rounds"),
    (dict(aggregation="async", system="uniform", dp_clip=1.0), "--dp-clip .* with --aggregation async: not supported"),
])
def test_configurations_that_cannot_run_are_refused_before_anything_runs(kw, message):
    settings = kw.pop("settings", {})
    with pytest.raises(ConfigError, match=message):
        raycompo.run("synthetic", kw.pop("algo", "fedavg"), rounds=1, settings={**EQUAL, **settings}, **kw)


def test_feddro_is_refused_with_why_and_the_cli_exits_2():
    with pytest.raises(ConfigError, match="barrier of all clients by construction"):
        raycompo.run("toy-co", "feddro", rounds=1, system="uniform", aggregation="buffered")
    p = subprocess.run([sys.executable, "-m", "raycompo.run", "--task", "synthetic", "--algo", "fedavg", "--rounds", "1",
                        "--backend", "inline", "--system", "uniform", "--aggregation", "buffered", "--concurrency", "2",
                        "--buffer", "3", "--set", "n_clients=12"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "buffer (--buffer, K) = 3 is more than concurrency" in p.stderr


@pytest.mark.parametrize("extra,message", [
    (["--dp-clip", "1", "--dp-noise", "1"], "--dp-clip / --dp-noise (client-level DP) with --aggregation buffered"),
])
def test_dp_with_asynchronous_aggregation_exits_2_with_one_line(extra, message, capsys):
    from raycompo.run import main

    code = main(["--task", "synthetic", "--algo", "fedavg", "--rounds", "1", "--backend", "inline", "--quiet",
                 "--system", "uniform", "--aggregation", "buffered", "--concurrency", "2", "--buffer", "2",
                 "--set", "n_clients=6", "clients_per_round=2", *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0]


# --- clients that leave mid-flight ---------------------------------------------------
FLAKY = """name: flaky
description: equal devices online in 1-second slots with probability 0.5
availability: {kind: bernoulli, p: 0.5, slot_s: 1}
"""


def test_a_client_whose_online_interval_ends_before_it_finishes_is_lost_and_counted(tmp_path):
    """Bernoulli slots of 1 s, updates of about 0.2 s: a client dispatched near the end of an
    online slot whose next slot is off leaves before it finishes. Its update never arrives
    (it is not in any buffer), its slot is refilled, its seconds are wasted, per client too."""
    profile = tmp_path / "flaky.yaml"
    profile.write_text(FLAKY)
    r = run(cfg(rounds=40, settings={"n_clients": 20}, system=str(profile), aggregation="buffered", concurrency=4,
                buffer=2, eval_every=40), out=str(tmp_path / "run"))
    assert r.status == "completed"
    lost = sum(row["dropped"] for row in r.rows)
    assert lost > 0 and r.rows[-1]["wasted_s"] > 0
    clients = r.clients
    per_client = clients[clients["round"] == 40].drop_duplicates("client")
    assert per_client["dropped"].sum() == per_client["left"].sum() == lost  # no staleness bound: all left
    assert per_client["wasted_s"].sum() == pytest.approx(r.rows[-1]["wasted_s"])
    # every step still applied K = 2 updates that arrived
    assert all(row["in_flight"] <= 4 for row in r.rows[1:])


def test_a_sim_time_budget_ends_an_asynchronous_run_at_the_step_that_reaches_it():
    full = run(cfg(rounds=8, settings={"n_clients": 20}, **MOBILE))
    limit = full.rows[4]["sim_time"]
    cut = run(dataclasses.replace(cfg(rounds=8, settings={"n_clients": 20}, **MOBILE), budget={"sim_time": limit}))
    assert cut.status == "completed" and cut.rows[-1]["round"] == 4
    assert_rows_close(values(cut.rows), values(full.rows[:5]), tol=1e-12)


def test_ten_million_clients_no_structure_of_n():
    """At n = 10^7 a server step touches O(C) clients: the in-flight set holds C ids and
    a few steps allocate far less than one byte per client."""
    import tracemalloc

    from raycompo.engine.federation import Federation

    tiny = {"n_clients": 10**7, "clients_per_round": 50, "n_features": 5, "n_classes": 2, "tau": 1,
            "batch_size": 4, "max_samples": 60, "min_samples": 50}
    fed = Federation(RunConfig(task="synthetic", algo="fedavg", rounds=5, backend="inline", settings=tiny, eval_every=10**6,
                               system="mobile", aggregation="buffered", concurrency=50, buffer=10))
    try:
        fed.run_round()
        tracemalloc.start()
        for _ in range(3):
            row = fed.run_round()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert row["in_flight"] <= 50 and len(fed.asynchronous.queue.heap) <= 50
        assert peak < 10**7 / 10  # < 1 MB for 10^7 clients
    finally:
        fed.close()


def test_clients_dispatched_with_one_version_run_as_one_batched_call():
    """On `uniform` with C = 6, K = 2, the six clients of a wave finish together: three steps
    consume them and the six slots refill at that instant with one version, so the pool is
    called once per wave, with all six clients, through the batched phase."""
    from raycompo.engine.federation import Federation

    fed = Federation(cfg(rounds=6, system="uniform", aggregation="buffered", concurrency=N, buffer=2,
                         vectorize="on", eval_every=10**6))
    calls, probes = [], []
    real = fed.pool.map

    def counting(phase, round_, counts, *args, **kw):
        (probes if kw.get("probe") else calls).append((phase, round_, len(counts)))
        return real(phase, round_, counts, *args, **kw)

    fed.pool.map = counting
    try:
        rows = [fed.run_round() for _ in range(6)]
    finally:
        fed.close()
    assert [c for c in calls if c[0] == "local"] == [("local", 0, N), ("local", 3, N)]
    assert probes == [("local", 0, N)]  # the first wave's work, predicted once, before anything was computed
    assert [r["staleness_max"] for r in rows] == [0, 1, 2, 0, 1, 2]
    assert "local" in fed.resolved.vectorized.record()["phases"]


def test_more_clients_in_flight_than_are_ever_online_is_refused(tmp_path):
    (tmp_path / "trace.csv").write_text("client,start_s,end_s\n0,0,1000\n3,0,1000\n")
    (tmp_path / "two.yaml").write_text("name: two\navailability: {kind: trace, path: trace.csv}\n")
    with pytest.raises(ConfigError, match="only 2 clients are ever online"):
        raycompo.run("synthetic", "fedavg", rounds=1, settings=EQUAL, system=str(tmp_path / "two.yaml"),
                     aggregation="buffered", concurrency=3, buffer=1)
