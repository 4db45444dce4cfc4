"""Runs with a simulated system (--system, raycompo/system/): what a user sees. Without it no
column changes; `uniform` changes no value and its clock is the formula of the ledger's
columns; the same rows inline and on Ray; a resumed run continues the same clock; O(m)
cohorts at 10^7 clients; clear errors for profiles that cannot run."""

from __future__ import annotations

import dataclasses
import json
import time
import tracemalloc

import pytest
import torch

import raycompo
from raycompo.configuration.config import RunConfig
from raycompo.engine import run
from raycompo.engine.federation import Federation, RoundCtx
from raycompo.errors import ConfigError
from raycompo.run import main
from raycompo.system import COLUMNS
from tests.helpers import assert_rows_close

FEDAVG = {"n_clients": 40, "clients_per_round": 6, "tau": 2, "max_samples": 60}


def fedavg(rounds=3, **kw):
    return RunConfig(task="synthetic", algo="fedavg", rounds=rounds, backend="inline", settings=FEDAVG, **kw)


def test_without_system_no_column_and_uniform_changes_no_value():
    plain = run(fedavg())
    uniform = run(fedavg(system="uniform"))
    assert not set(COLUMNS) & set(plain.rows[0])
    assert list(uniform.rows[0]) == list(plain.rows[0]) + list(COLUMNS)
    for a, b in zip(plain.rows, uniform.rows):  # the same cohorts (plain draws): every value equal
        assert {k: v for k, v in a.items() if k not in ("round_time", "wall_time")} == \
            {k: v for k, v in b.items() if k not in ("round_time", "wall_time", *COLUMNS)}
    assert [r["dropped"] for r in uniform.rows] == [0] * 4
    assert uniform.rows[-1]["sim_time"] > uniform.rows[1]["sim_time"] > 0


def test_uniform_clock_follows_the_ledger_feddro_barriers():
    """FedDRO uses every client and I + 1 exchanges a round; every member does the same work,
    so a round's time is (I + 1) * 2 latency + (bytes down + up) / bandwidth + work * 6 d
    / FLOP/s, per member: the ledger's per-round totals / K. The work is oracle calls / 2 (a
    plain gradient's 2 calls a point; tests/test_ledger_formulas.py checks FedDRO's calls
    against its paper)."""
    steps, K = 3, 4
    cfg = RunConfig(task="toy-co", algo="feddro", rounds=3, backend="inline", system="uniform",
                    settings={"n_clients": K, "sync_every": steps})
    rows = run(cfg).rows
    d = Federation(cfg, start=False).w.numel()
    for prev, row in zip(rows, rows[1:]):
        delta = {k: row[k] - prev[k] for k in ("exchanges", "samples", "oracle_calls", "bytes_down", "bytes_up",
                                            "sim_time")}
        assert delta["exchanges"] == steps + 1
        expect = ((steps + 1) * 2 * 0.05 + (delta["bytes_down"] + delta["bytes_up"]) / K / 1.25e6
                  + delta["oracle_calls"] / 2 / K * 6 * d / 1e10)
        assert delta["sim_time"] == pytest.approx(expect, rel=1e-9)


def test_mobile_over_selects_and_drops_and_reports_clients():
    cfg = fedavg(rounds=4, system="mobile")
    fed = Federation(cfg)
    everyone = list(range(40))
    try:
        rows, wasted = [fed.initial_row()], 0.0
        for _ in range(4):
            predicted = {c: fed.system.predict(c) for c in everyone}  # from the last round's work
            rows.append(fed.run_round())
            after = fed.client_columns(everyone)  # counts since the previous evaluation: this round's
            kept, dropped = ([c for c in everyone if after[c][k] > 0] for k in ("selected", "dropped"))
            # each dropped candidate worked until the round closed, at the last kept one's finish
            close = max(predicted[c] for c in kept)
            wasted += sum(min(predicted[c], close) for c in dropped)
        assert all(r["dropped"] == 2 for r in rows[1:])  # ceil(1.3 * 6) = 8 candidates, 6 kept
        assert rows[-1]["wasted_s"] == pytest.approx(wasted, rel=1e-12) and wasted > 0
        assert [r["sim_time"] for r in rows] == sorted(r["sim_time"] for r in rows)
        # per-client counts are since the previous evaluation: every round is evaluated here
        cols = fed.client_columns(list(range(40)))
        assert sum(c["selected"] for c in cols.values()) == 6
        assert sum(c["dropped"] for c in cols.values()) == 2
        assert all(c["online"] <= c["drawn"] for c in cols.values())
        assert {c["device"] for c in cols.values()} <= {"low", "mid", "high"}
        assert rows[-1]["wasted_s"] - rows[-2]["wasted_s"] == pytest.approx(sum(c["wasted_s"] for c in cols.values()))
    finally:
        fed.close()
    assert Federation(fedavg(), start=False).client_columns is None


def test_ray_equals_inline_with_mobile(ray_session):
    cfg = fedavg(rounds=2, system="mobile", eval_every=2)
    inline = run(cfg)
    remote = run(dataclasses.replace(cfg, backend="ray", clients_per_actor=20, cpus_per_actor=0.5))
    assert inline.status == remote.status == "completed"
    assert_rows_close(inline.rows, remote.rows, tol=1e-6)
    assert [r["sim_time"] for r in inline.rows] == pytest.approx([r["sim_time"] for r in remote.rows], rel=1e-9)
    assert inline.rows[-1]["sim_time"] > 0


def test_resume_continues_the_same_clock(tmp_path):
    straight = run(fedavg(rounds=4, system="mobile"), out=str(tmp_path / "a"))
    cfg = fedavg(rounds=2, system="mobile")
    run(cfg, out=str(tmp_path / "b"), checkpoint_every=2)
    resumed = raycompo.resume(tmp_path / "b", rounds=4)
    assert_rows_close(straight.rows, resumed.rows, tol=1e-12)
    assert [r["sim_time"] for r in resumed.rows] == [r["sim_time"] for r in straight.rows]
    config = json.loads((tmp_path / "b" / "config.json").read_text())
    assert config["system"] == "mobile" and config["system_profile"]["selection"]["over_selection"] == 1.3
    with pytest.raises(ConfigError, match="cannot change --system uniform"):
        raycompo.runfolder.results.resumed_config(tmp_path / "b", rounds=5, changes={"system": "uniform"})


def test_ten_million_clients_cohort_without_length_n_structures(monkeypatch):
    cfg = RunConfig(task="synthetic", algo="fedavg", backend="inline", system="mobile",
                    settings={"n_clients": 10**7, "clients_per_round": 100})
    fed = Federation(cfg, start=False)
    monkeypatch.setattr(torch, "randperm", lambda *a, **k: pytest.fail("randperm over the population"))
    tracemalloc.start()
    t0 = time.perf_counter()
    for r in range(3):
        fed.system.begin_round(r + 1)
        cohort = RoundCtx(fed, r, counted=True).sample(100)
        fed.system.end_round()
        assert len(cohort) == 100 == len(set(cohort)) and cohort == sorted(cohort) and cohort[-1] < 10**7
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20e6, peak  # a list of 10^7 ids alone is 80 MB
    assert seconds < 30  # O(m): ~0.1 s a draw here; an O(n) scan at ~1 us per client would be ~10 s each
    assert fed.system.availability.population is None


def test_profiles_that_cannot_run_are_clear_errors(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("client,start_s,end_s\n0,0,10\n99,0,10\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"availability: {{kind: trace, path: {trace}}}\n")
    with pytest.raises(ConfigError, match="client 99 does not exist"):
        run(fedavg(system=str(bad)))
    slow = tmp_path / "slow.yaml"
    slow.write_text("selection: {over_selection: 2, deadline_s: 0.001, max_attempts: 2}\n")
    with pytest.raises(ConfigError, match="abandoned 2 times in a row"):
        run(fedavg(system=str(slow)))
    gone = tmp_path / "gone.yaml"
    few = tmp_path / "few.csv"
    few.write_text("client,start_s,end_s\n" + "".join(f"{c},0,0.05\n" for c in range(40)))
    gone.write_text(f"availability: {{kind: trace, path: {few.name}}}\n")
    with pytest.raises(ConfigError, match="only 0 are ever online"):
        run(fedavg(rounds=5, system=str(gone)))
    with pytest.raises(ConfigError, match="unknown system profile 'phone'"):
        raycompo.run("synthetic", "fedavg", rounds=1, settings=FEDAVG, system="phone")


def test_command_line(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["--task", "synthetic", "--algo", "fedavg", "--rounds", "2", "--backend", "inline", "--quiet",
                 "--set", "n_clients=40", "clients_per_round=6", "tau=2", "max_samples=60",
                 "--system", "mobile", "--out", str(out)])
    assert code == 0
    header = (out / "metrics.csv").read_text().splitlines()[0].split(",")
    assert header[-len(COLUMNS):] == list(COLUMNS)
    assert main(["--task", "synthetic", "--algo", "fedavg", "--rounds", "1", "--backend", "inline", "--quiet",
                 "--system", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml does not exist" in capsys.readouterr().err
    assert main(["--list"]) == 0
    listed = capsys.readouterr().out.split("system profiles", 1)[1]
    assert all(f"\n  {name}  " in listed for name in ("uniform", "mobile", "mobile-sync", "mobile-fastest"))


def test_example_profile_from_the_command_line(tmp_path):
    """examples/my_system.yaml (a device table, a daily trace, over-selection and a deadline),
    run the way its comment shows."""
    out = tmp_path / "run"
    assert main(["--task", "synthetic", "--algo", "fedavg", "--rounds", "3", "--backend", "inline", "--quiet",
                 "--set", "n_clients=8", "clients_per_round=3", "--system", "examples/my_system.yaml",
                 "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["system"].endswith("examples/my_system.yaml") and config["system_profile"]["name"] == "my-system"
    rows = [line.split(",") for line in (out / "metrics.csv").read_text().splitlines()]
    sim = [float(r[rows[0].index("sim_time")]) for r in rows[1:]]
    assert sim == sorted(sim) and sim[-1] > 0
    assert all(int(r[rows[0].index("dropped")]) == 1 for r in rows[2:])  # ceil(1.3 * 3) = 4 candidates, 3 kept


def test_reproduction_runs_carry_their_system(tmp_path):
    """The claim system-drop-vs-wait: each variant's runs use its profile, and commands.sh's
    line for a run parses back to the same RunConfig (so it re-runs the same system)."""
    import shlex

    from raycompo.reproduce import CLAIMS
    from raycompo.reproduce.runner import command, plan
    from raycompo.run import build_parser, config_from_args

    jobs = plan(CLAIMS["system-drop-vs-wait"], tmp_path, seeds=1)
    assert {j.variant.label: j.cfg.system for j in jobs}["fedavg-drop"] == "mobile-fastest"
    for j in jobs:
        argv = shlex.split(command(j))[3:]
        assert f"--system {j.cfg.system}" in command(j)
        assert config_from_args(build_parser().parse_args(argv)) == dataclasses.replace(j.cfg)


def test_deterministic_per_seed():
    a = run(fedavg(rounds=2, system="mobile"))
    b = run(fedavg(rounds=2, system="mobile"))
    c = run(dataclasses.replace(fedavg(rounds=2, system="mobile"), seed=1))
    assert [r["sim_time"] for r in a.rows] == [r["sim_time"] for r in b.rows]
    assert a.rows[-1]["sim_time"] != c.rows[-1]["sim_time"]  # other devices, other cohorts


def test_the_driver_needs_no_access_to_the_profiles_files(tmp_path):
    """A trace and a device table are read once at resolution and travel with the run (a
    driver actor on another node never opens them)."""
    from raycompo.configuration.config import resolve

    (tmp_path / "d.csv").write_text("flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s\n1e9,1e5,1e6,0.1\n")
    (tmp_path / "t.csv").write_text("client,start_s,end_s\n" + "".join(f"{c},0,1000\n" for c in range(40)))
    (tmp_path / "p.yaml").write_text("devices: {csv: d.csv}\navailability: {kind: trace, path: t.csv}\n")
    resolved = resolve(fedavg(rounds=1, system=str(tmp_path / "p.yaml")).canonical())
    for name in ("d.csv", "t.csv", "p.yaml"):
        (tmp_path / name).unlink()
    fed = Federation(resolved)
    try:
        row = fed.run_round()
    finally:
        fed.close()
    assert row["sim_time"] == pytest.approx(0.2 + row["bytes_down"] / 6 / 1e6 + row["bytes_up"] / 6 / 1e5
                                            + row["samples"] / 6 * 6 * fed.w.numel() / 1e9)


def test_resume_refuses_a_profile_whose_files_changed(tmp_path):
    (tmp_path / "d.csv").write_text("flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s\n1e9,1e5,1e6,0.1\n")
    (tmp_path / "p.yaml").write_text("devices: {csv: d.csv}\n")
    out = tmp_path / "run"
    run(fedavg(rounds=2, system=str(tmp_path / "p.yaml")), out=str(out), checkpoint_every=2)
    (tmp_path / "d.csv").write_text("flops,uplink_bytes_per_s,downlink_bytes_per_s,latency_s\n2e9,1e5,1e6,0.1\n")
    with pytest.raises(ConfigError, match="system profile changed since it started .the device CSV .* was edited"):
        raycompo.resume(out, rounds=3)


def test_batched_path_gives_the_same_clock():
    """--vectorize on is an execution strategy: the same exchanges, hence the same clock."""
    per_client = run(fedavg(rounds=2, system="mobile", vectorize="off"))
    batched = run(fedavg(rounds=2, system="mobile", vectorize="on"))
    assert [r["sim_time"] for r in batched.rows] == pytest.approx([r["sim_time"] for r in per_client.rows], rel=1e-12)
    assert [r["dropped"] for r in batched.rows] == [r["dropped"] for r in per_client.rows]


def test_a_sim_time_budget_ends_the_run_at_the_first_round_reaching_it():
    full = run(fedavg(rounds=6, system="mobile"))
    limit = (full.rows[3]["sim_time"] + full.rows[4]["sim_time"]) / 2  # reached in round 4
    cut = run(dataclasses.replace(fedavg(rounds=6, system="mobile"), budget={"sim_time": limit}))
    assert cut.status == "completed" and cut.rows[-1]["round"] == 4
    assert [r["sim_time"] for r in cut.rows] == [r["sim_time"] for r in full.rows[:5]]


def test_python_api_takes_a_name_or_a_path_and_refuses_other_types(tmp_path):
    from pathlib import Path

    (tmp_path / "p.yaml").write_text("selection: {over_selection: 1.5}\n")
    r = raycompo.run("synthetic", "fedavg", rounds=1, settings=FEDAVG, system=Path(tmp_path / "p.yaml"))
    assert r.rows[-1]["dropped"] == 3 and r.config["system"] == str(tmp_path / "p.yaml")
    with pytest.raises(ConfigError, match=r"raycompo.run: system must be a path .* got 5 \(an int\)"):
        raycompo.run("synthetic", "fedavg", rounds=1, settings=FEDAVG, system=5)


def test_clients_file_carries_each_clients_device_and_counters(tmp_path):
    import pandas as pd

    run(fedavg(rounds=2, system="mobile"), out=str(tmp_path / "run"))
    clients = pd.read_csv(tmp_path / "run" / "clients.csv")
    assert {"device", "flops", "s_per_sample", "drawn", "online", "selected", "dropped", "wasted_s"} <= set(clients)
    last = clients[(clients["round"] == 2) & (clients["metric"] == clients["metric"].iloc[0])]
    # each round is evaluated: its rows count that round's events
    assert len(last) == 40 and last["selected"].sum() == 6 and last["dropped"].sum() == 2
    assert set(last["device"]) <= {"low", "mid", "high"}
