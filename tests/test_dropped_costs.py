"""What dropped candidates cost (issue 32: "every byte a device sends or receives is in the
ledger, with what dropped clients cost shown apart"): the columns `dropped_bytes_down`,
`dropped_bytes_up`, `dropped_samples`, `dropped_oracle_calls` (docs/costs.md).

A dropped candidate works through the round's exchanges as the mean member did (the ledger's
per-member means), on its own device: per exchange half the latency term, the download, the
compute, the upload, the other half, until it stops after its `wasted_s` seconds; what is in
progress then counts in proportion. Recomputed here from the run's own metrics.csv and
clients.csv, with devices known exactly from a CSV."""

from __future__ import annotations

import pandas as pd
import pytest

import raycompo
from raycompo.configuration.config import RunConfig
from raycompo.costs.exchange import DROPPED_COLUMNS, LEDGER_COLUMNS
from raycompo.engine.federation import Federation
from raycompo.run import main
from tests.test_resume_integrity import same_rows

FEDAVG = {"n_clients": 8, "clients_per_round": 3, "tau": 2, "max_samples": 60}
FPP = 6.0  # flop_per_sample_per_param
DEVICES = {  # client: (flops, uplink, downlink, latency): slow enough that stops fall mid-phase
    0: (1e6, 2e4, 5e4, 0.02), 1: (2e5, 1e4, 2e4, 0.05), 2: (5e5, 5e3, 1e4, 0.1), 3: (1e5, 3e4, 8e4, 0.01),
    4: (3e6, 2e3, 4e3, 0.2), 5: (8e5, 1.5e4, 3e4, 0.03), 6: (4e5, 8e3, 1.6e4, 0.08), 7: (6e4, 5e4, 1e5, 0.005),
}


def profile(tmp_path, selection="{over_selection: 2.0}"):
    (tmp_path / "d.csv").write_text("client,flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s\n" + "".join(
        f"{c},{f},{u},{d},{la}\n" for c, (f, u, d, la) in DEVICES.items()))
    (tmp_path / "p.yaml").write_text(f"devices: {{csv: d.csv, flop_per_sample_per_param: {FPP}}}\n"
                                     f"availability: {{kind: always}}\nselection: {selection}\n")
    return str(tmp_path / "p.yaml")


def step(rows, r):
    """Round r's cost: the cumulative cost columns' increase over round r - 1."""
    cols = [*LEDGER_COLUMNS, "wasted_s", *DROPPED_COLUMNS]
    return rows.iloc[r][cols] - rows.iloc[r - 1][cols]


def clip(x):
    return min(1.0, max(0.0, x))


def one_exchange_charge(c, t, d, down, up, samples, calls):
    """What client c gets through in t seconds of one exchange of (down, up) bytes and
    (samples, calls): latency, download, compute (calls / 2 samples' worth), upload, latency."""
    flops, ul, dl, lat = DEVICES[c]
    t_down, t_comp, t_up = down / dl, calls / 2 * FPP * d / flops, up / ul
    f_down = clip((t - lat) / t_down)
    f_comp = clip((t - lat - t_down) / t_comp)
    f_up = clip((t - lat - t_down - t_comp) / t_up)
    return (f_down * down, f_up * up, f_comp * samples, f_comp * calls), (f_down, f_comp, f_up)


def test_fedavg_dropped_costs_are_the_hand_computation(tmp_path):
    out = tmp_path / "run"
    raycompo.run("synthetic", "fedavg", rounds=2, settings=FEDAVG, system=profile(tmp_path), out=out)
    d = Federation(RunConfig(task="synthetic", algo="fedavg", backend="inline", settings=FEDAVG), start=False).w.numel()
    rows = pd.read_csv(out / "metrics.csv")
    clients = pd.read_csv(out / "clients.csv")
    clients = clients[clients["metric"] == clients["metric"].iloc[0]]  # one row per (round, client)
    m = FEDAVG["clients_per_round"]
    expect, fractions = [0.0] * 4, []
    for r in (1, 2):
        delta = step(rows, r)
        assert delta["exchanges"] == 1 and rows.iloc[r]["dropped"] == 3  # ceil(2 * 3) candidates, 3 kept
        mean = {k: delta[k] / m for k in ("bytes_down", "bytes_up", "samples", "oracle_calls")}
        dropped = clients[(clients["round"] == r) & (clients["dropped"] > 0)]
        assert len(dropped) == 3 and set(dropped["dropped"]) == {1}  # each once: its wasted_s is one stop
        for c, wasted in zip(dropped["client"], dropped["wasted_s"]):
            got, f = one_exchange_charge(int(c), wasted, d, mean["bytes_down"], mean["bytes_up"], mean["samples"],
                                         mean["oracle_calls"])
            expect = [a + b for a, b in zip(expect, got)]
            fractions += f
        for col, value in zip(DROPPED_COLUMNS, expect):
            assert rows.iloc[r][col] == pytest.approx(value, rel=1e-9, abs=1e-9), (r, col)
    assert any(0 < f < 1 for f in fractions)  # some candidate stopped mid-transfer or mid-compute
    assert all(v > 0 for v in expect)


def test_comfedl_lse_walks_both_exchanges(tmp_path):
    """ComFedL with normalizer='lse' has two exchanges a round (the cohort's f_i(w_s), then the
    local steps), the first downloading w alone. Whatever the rest, a dropped candidate has
    received min(w's bytes, (wasted_s - latency) * downlink) of the first exchange, and at most
    (wasted_s - latency) * downlink and the round's per-member download in all."""
    settings = {**FEDAVG, "normalizer": "lse"}
    out = tmp_path / "run"
    raycompo.run("synthetic", "comfedl", rounds=2, settings=settings, system=profile(tmp_path), out=out)
    w = Federation(RunConfig(task="synthetic", algo="comfedl", backend="inline", settings=settings), start=False).w
    first = w.numel() * w.element_size()
    rows = pd.read_csv(out / "metrics.csv")
    clients = pd.read_csv(out / "clients.csv")
    clients = clients[clients["metric"] == clients["metric"].iloc[0]]
    m = settings["clients_per_round"]
    beyond_first = False
    for r in (1, 2):
        delta = step(rows, r)
        assert delta["exchanges"] == 2
        per_member = delta["bytes_down"] / m
        low = high = 0.0
        for c, wasted in clients[(clients["round"] == r) & (clients["dropped"] > 0)][["client", "wasted_s"]].values:
            _, _, dl, lat = DEVICES[int(c)]
            reach = max(0.0, (wasted - lat) * dl)
            low += min(first, reach)
            high += min(per_member, reach)
        got = delta["dropped_bytes_down"]
        assert low * (1 - 1e-12) <= got <= high * (1 + 1e-12)
        beyond_first = beyond_first or got > low * (1 + 1e-9)  # someone got to the second exchange's download
    assert beyond_first


def test_uniform_charges_nothing_and_no_system_has_no_column(tmp_path):
    base = ["--task", "synthetic", "--algo", "fedavg", "--rounds", "2", "--backend", "inline", "--quiet", "--set",
            *[f"{k}={v}" for k, v in FEDAVG.items()]]
    assert main([*base, "--system", "uniform", "--out", str(tmp_path / "u")]) == 0
    assert main([*base, "--out", str(tmp_path / "plain")]) == 0
    uniform, plain = pd.read_csv(tmp_path / "u" / "metrics.csv"), pd.read_csv(tmp_path / "plain" / "metrics.csv")
    assert (uniform[list(DROPPED_COLUMNS)] == 0).all().all() and (uniform["dropped"] == 0).all()
    assert not set(DROPPED_COLUMNS) & set(plain.columns)
    assert list(uniform.columns) == list(plain.columns) + ["sim_time", "dropped", "wasted_s", *DROPPED_COLUMNS]
    pd.testing.assert_frame_equal(uniform[list(LEDGER_COLUMNS)], plain[list(LEDGER_COLUMNS)])


def test_the_ledger_columns_stay_the_cohorts(tmp_path):
    """Over-selection adds to the dropped columns, never to the ledger's: the ledger is what
    the cohort's exchanges cost, as without over-selection (the same cohort size)."""
    raycompo.run("synthetic", "fedavg", rounds=2, settings=FEDAVG, system=profile(tmp_path), out=tmp_path / "a")
    rows = pd.read_csv(tmp_path / "a" / "metrics.csv")
    m = FEDAVG["clients_per_round"]
    delta = step(rows, 2)
    per_member = delta["bytes_down"] / m
    assert delta["bytes_down"] == m * per_member and delta["dropped_bytes_down"] > 0
    assert delta["dropped_bytes_down"] <= rows.iloc[2]["dropped"] * per_member * (1 + 1e-12)


def test_a_resumed_run_gives_the_rows_of_the_run_done_in_one_go(tmp_path):
    """Stopped after round 2 with its checkpoints (what a killed run leaves), then resumed."""
    system = profile(tmp_path)
    base = ["--task", "synthetic", "--algo", "fedavg", "--backend", "inline", "--quiet", "--system", system,
            "--set", *[f"{k}={v}" for k, v in FEDAVG.items()]]
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main([*base, "--rounds", "4", "--out", str(whole)]) == 0
    assert main([*base, "--rounds", "2", "--out", str(part), "--checkpoint-every", "1"]) == 0
    assert main(["--resume", str(part), "--rounds", "4", "--quiet"]) == 0
    same_rows(whole, part)
    assert pd.read_csv(part / "metrics.csv")["dropped_bytes_down"].iloc[-1] > 0


def test_a_budget_on_dropped_bytes_down_ends_the_run(tmp_path):
    system = profile(tmp_path)
    full = raycompo.run("synthetic", "fedavg", rounds=4, settings=FEDAVG, system=system)
    limit = (full.rows[2]["dropped_bytes_down"] + full.rows[3]["dropped_bytes_down"]) / 2  # reached in round 3
    assert full.rows[3]["dropped_bytes_down"] > full.rows[2]["dropped_bytes_down"]
    cut = raycompo.run("synthetic", "fedavg", rounds=4, settings=FEDAVG, system=system,
                       budget={"dropped_bytes_down": limit})
    assert cut.status == "completed" and cut.rows[-1]["round"] == 3
    assert [r["dropped_bytes_down"] for r in cut.rows] == [r["dropped_bytes_down"] for r in full.rows[:4]]
    with pytest.raises(raycompo.errors.ConfigError, match="budget dropped_bytes_down needs a simulated system"):
        raycompo.run("synthetic", "fedavg", rounds=1, settings=FEDAVG, budget={"dropped_bytes_down": 1.0})


def test_asynchronous_runs_leave_them_to_the_ledger(tmp_path):
    """With --aggregation async a lost or too stale client's download (and a stale one's work)
    is in the ledger's columns already (engine/asynchronous.py): the dropped columns stay 0
    while clients are dropped."""
    out = tmp_path / "async"
    assert main(["--task", "synthetic", "--algo", "fedavg", "--rounds", "5", "--backend", "inline", "--quiet",
                 "--system", "mobile", "--aggregation", "async", "--concurrency", "10", "--set", "staleness=hinge",
                 "async_alpha=0.6", "async_rho=0.01", "max_staleness=1", "--out", str(out)]) == 0
    rows = pd.read_csv(out / "metrics.csv")
    assert rows["dropped"].sum() > 0 and rows["wasted_s"].iloc[-1] > 0
    assert (rows[list(DROPPED_COLUMNS)] == 0).all().all()


def test_a_checkpoint_with_other_totals_is_refused():
    from raycompo.system.dropped import DroppedCosts

    d = DroppedCosts()
    d.load(None)  # a checkpoint from before these columns: zeros
    assert d.state() == [0.0] * 4
    d.load([1, 2, 3, 4])
    assert d.columns()["dropped_samples"] == 3.0
    with pytest.raises(raycompo.errors.ConfigError, match="hold 3 values, not the 4"):
        d.load([1.0, 2.0, 3.0])
