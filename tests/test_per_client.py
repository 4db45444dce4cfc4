"""Who pays: clients.csv (every evaluated client's metrics) and the spread columns of
metrics.csv (raycompo/watch/per_client.py, raycompo/runfolder/clients_file.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from raycompo.engine.federation import Federation
from raycompo.engine.runner import run
from raycompo.errors import ConfigError
from raycompo.runfolder.clients_file import read_clients
from raycompo.watch.per_client import CLIENTS_KEY
from tests.helpers import SMALL_DRO, small_config

SIZES = {0: SMALL_DRO["big_client_size"], 1: SMALL_DRO["small_client_size"], 2: SMALL_DRO["small_client_size"],
         3: SMALL_DRO["small_client_size"]}
"""Each client's number of training samples in the small dro-mnist5k federation."""
CFG = small_config("comfedl", rounds=4, gamma=1.0, clients_per_round=3)


def test_spread_columns_are_numpy_of_the_clients_file(tmp_path):
    result = run(CFG, out=str(tmp_path))
    clients, metrics = read_clients(tmp_path), pd.read_csv(tmp_path / "metrics.csv")
    assert list(clients.columns) == ["round", "client", "metric", "value", "n_samples"]
    assert sorted(clients["round"].unique()) == list(range(5))  # every round evaluates (eval_every 1)
    checked = 0
    for _, row in metrics.iterrows():
        at = clients[clients["round"] == row["round"]]
        for metric in ("train_loss", "val_loss", "val_acc", "train_acc"):
            v = at[at["metric"] == metric].sort_values("client")["value"].to_numpy()
            assert len(v) == 4
            assert row[metric] == pytest.approx(v.mean(), rel=1e-12)
            assert row[f"{metric}_std"] == pytest.approx(np.std(v), rel=1e-12, abs=1e-15)
            for q in (10, 50, 90):
                assert row[f"{metric}_p{q}"] == pytest.approx(np.percentile(v, q), rel=1e-12)
            worst = v.min() if metric.endswith("acc") else v.max()
            assert row[f"{metric}_worst"] == pytest.approx(worst, rel=1e-12)
            checked += 1
    assert checked == 5 * 4
    assert metrics["val_acc_std"].iloc[-1] > 0  # the clients do differ: the spread is not trivially 0
    # n_i: each client's number of training samples, on every one of its rows
    assert dict(zip(clients["client"], clients["n_samples"])) == SIZES
    pd.testing.assert_frame_equal(result.clients, clients)


def test_evaluated_clients_only_and_same_frame_without_a_folder(tmp_path):
    cfg = dataclasses.replace(CFG, eval_clients=2, eval_every=2)
    with_folder, in_memory = run(cfg, out=str(tmp_path)), run(cfg)
    clients = with_folder.clients
    assert sorted(clients["round"].unique()) == [0, 2, 4]  # evaluated rounds only
    per_round = clients.groupby("round")["client"].nunique()
    assert (per_round == 2).all()  # the eval_clients drawn, not all 4
    rows = pd.read_csv(tmp_path / "metrics.csv")
    for r in (0, 2, 4):  # the row's mean is over exactly the clients in the file
        v = clients[(clients["round"] == r) & (clients["metric"] == "val_acc")]["value"]
        assert rows.loc[rows["round"] == r, "val_acc"].item() == pytest.approx(v.mean(), rel=1e-12)
    assert rows.loc[rows["round"] == 1, "val_acc_std"].isna().all()  # no evaluation, no spread
    pd.testing.assert_frame_equal(in_memory.clients, clients, check_dtype=False)


def test_resume_neither_duplicates_nor_loses_client_rows(tmp_path):
    whole = run(dataclasses.replace(CFG, rounds=6), out=str(tmp_path / "whole")).clients
    part = tmp_path / "part"
    run(CFG, out=str(part), checkpoint_every=2)  # 4 rounds, checkpoint at round 4
    # as if a later attempt wrote round 5's per-client rows, and the start of a line, then died
    with open(part / "clients.csv", "a") as f:
        f.write("5,0,train_loss,9.0,60\n5,0,val_loss,9.0,60\n5,1,val_")
    resumed = run(dataclasses.replace(CFG, rounds=6), out=str(part), resume=True).clients
    key = ["round", "client", "metric"]
    assert not resumed.duplicated(key).any()
    assert sorted(resumed["round"].unique()) == list(range(7))
    pd.testing.assert_frame_equal(resumed[key], whole[key])
    np.testing.assert_allclose(resumed["value"], whole["value"], rtol=1e-6, atol=1e-9)


def test_a_damaged_clients_file_is_a_clear_error_on_resume(tmp_path):
    run(CFG, out=str(tmp_path), checkpoint_every=2)
    (tmp_path / "clients.csv").write_text("what,is,this\n1,2,3\n")
    with pytest.raises(ConfigError, match="clients.csv"):
        run(dataclasses.replace(CFG, rounds=6), out=str(tmp_path), resume=True)


def test_client_columns_of_a_simulated_system_join_the_rows(tmp_path):
    fed = Federation(CFG)
    try:
        fed.client_columns = lambda ids: {c: {"device": f"phone-{c % 2}", "online": c / 4} for c in ids}
        frame = fed.initial_row()[CLIENTS_KEY].frame()
    finally:
        fed.close()
    assert list(frame.columns) == ["round", "client", "metric", "value", "n_samples", "device", "online"]
    assert len(frame) == 4 * 4  # 4 clients x 4 metrics
    for c, at in frame.groupby("client"):
        assert set(at["device"]) == {f"phone-{c % 2}"} and set(at["online"]) == {c / 4}


def test_batched_evaluation_gives_the_same_clients_file():
    reference = run(dataclasses.replace(CFG, rounds=1, vectorize="off")).clients
    batched = run(dataclasses.replace(CFG, rounds=1, vectorize="on")).clients
    pd.testing.assert_frame_equal(batched.drop(columns="value"), reference.drop(columns="value"))
    np.testing.assert_allclose(batched["value"], reference["value"], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_ray_clients_file_equals_inline(ray_session, tmp_path):
    cfg = dataclasses.replace(CFG, rounds=2)
    inline = run(cfg, out=str(tmp_path / "inline")).clients
    on_ray = run(dataclasses.replace(cfg, backend="ray", clients_per_actor=2, cpus_per_actor=0.5),
                 out=str(tmp_path / "ray")).clients
    pd.testing.assert_frame_equal(on_ray.drop(columns="value"), inline.drop(columns="value"))
    np.testing.assert_allclose(on_ray["value"], inline["value"], rtol=1e-6, atol=1e-6)


def test_records_compare_by_value_and_a_cut_last_line_is_dropped_when_read(tmp_path):
    feds = [Federation(CFG), Federation(CFG)]
    try:
        a, b = (f.initial_row()[CLIENTS_KEY] for f in feds)
    finally:
        for f in feds:
            f.close()
    assert a == b  # same seed, same values: rows holding records compare with ==
    b.metrics["val_acc"] = b.metrics["val_acc"] + 0.5
    assert a != b
    run(dataclasses.replace(CFG, rounds=1), out=str(tmp_path))
    whole = read_clients(tmp_path)
    with open(tmp_path / "clients.csv", "a") as f:
        f.write("2,0,val_acc,0.")  # a kill during a write
    pd.testing.assert_frame_equal(read_clients(tmp_path), whole)


def test_a_simulated_systems_columns_in_clients_csv_and_sim_time_plotted(tmp_path):
    import raycompo

    result = run(dataclasses.replace(CFG, rounds=2, system="mobile"), out=str(tmp_path / "run"))
    clients = result.clients
    base = ["round", "client", "metric", "value", "n_samples"]
    assert list(clients.columns[:5]) == base and "device" in clients.columns  # Federation.client_columns
    assert (clients.groupby("client")["device"].nunique() == 1).all()  # a client keeps its device
    # the columns at round r are the system's, as Federation.client_columns gives them then
    fed = Federation(dataclasses.replace(CFG, rounds=2, system="mobile"))
    try:
        expected = fed.client_columns([0, 1, 2, 3])
    finally:
        fed.close()
    at0 = clients[(clients["round"] == 0) & (clients["metric"] == "val_acc")].set_index("client")
    for c, cols in expected.items():
        assert at0.loc[c, "device"] == cols["device"]
    x = raycompo.plot(tmp_path, "val_acc", x="sim_time").axes[0].get_lines()[0].get_xdata()
    np.testing.assert_allclose(x, result.metrics["sim_time"].to_numpy())
