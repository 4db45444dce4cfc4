"""Compression and client-level DP in runs (engine/transforms.py, issue 34): the ledger's
encoded bytes, the batched path equal to the per-client path, resume, budgets, bad settings,
and nothing changed without the options."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import raycompo
from raycompo.configuration.config import RunConfig, resolve
from raycompo.costs.exchange import BREAKDOWN_KEY
from raycompo.engine.federation import Federation
from raycompo.engine.ledger import COLUMNS
from raycompo.errors import ConfigError
from raycompo.run import main
from tests.helpers import SMALL_DRO, small_config

SYN = {"n_clients": 12, "min_samples": 2, "max_samples": 40, "clients_per_round": 7, "tau": 3}


def fed(algo: str = "fedavg", **cfg) -> Federation:
    return Federation(dataclasses.replace(small_config(algo, lr=0.1), **cfg))


def test_without_options_no_transform_and_the_same_columns():
    """Without --compress, --compress-down and --dp-*: no transform exists, what travels is
    counted at its dtype's size (nw: d float32 entries, n: an 8-byte number; the payload w:
    d float32 entries), there is no epsilon column, and the rows are those of a run given the
    options empty. A compressed key changes the bytes, never the values counted."""
    d, m = 7850, 4  # dro-mnist5k's logistic model (784 + 1) x 10; SMALL_DRO's 4 clients, all per round
    plain = fed()
    assert plain.transforms is None and plain.pool.host.uplink is None
    rows = plain.run_rounds(2)
    assert all("epsilon" not in r and all(c in r for c in COLUMNS) for r in rows)
    assert [r["bytes_up"] for r in rows] == [t * m * (4 * d + 8) for t in (1, 2)]
    assert [r["bytes_down"] for r in rows] == [t * m * 4 * d for t in (1, 2)]
    assert [r["values_up"] for r in rows] == [t * m * (d + 1) for t in (1, 2)]
    assert {(r["direction"], r["key"], r["bytes"]) for r in rows[0][BREAKDOWN_KEY] if r["round"] == 1} == {
        ("up", "nw", m * 4 * d), ("up", "n", m * 8), ("down", "w", m * 4 * d)}
    # the options given empty are no options: the same rows and model, bit for bit
    empty = fed(compress={}, compress_down={}, dp_clip=None, dp_noise=None)
    assert empty.transforms is None and empty.pool.host.uplink is None
    drop = ("round_time", "wall_time")
    assert [{k: v for k, v in r.items() if k not in drop} for r in empty.run_rounds(2)] == [
        {k: v for k, v in r.items() if k not in drop} for r in rows]
    assert torch.equal(empty.w, plain.w)
    # a compressed key: its encoded message in bytes_up, the same real values in values_up
    other = fed(compress={"nw": "qsgd:255"}).run_round()
    assert other["values_up"] == rows[0]["values_up"]
    assert other["bytes_up"] == m * (math.ceil((32 + d * (1 + 8)) / 8) + 8)


def test_bytes_up_count_the_encoded_messages():
    d = 7850  # dro-mnist5k's logistic model (784 + 1) x 10
    m = 4
    for method, per_member in (("topk:0.01", 78 * (32 + 13)), ("qsgd:4", 32 + d * 4), ("sign", d + 32),
                               ("randk:100", 100 * (32 + 13))):
        f = fed(compress={"nw": method})
        rows = f.run_rounds(2)
        # each member: nw's message (bits rounded up to bytes) and n as an 8-byte number
        assert rows[-1]["bytes_up"] == 2 * m * (math.ceil(per_member / 8) + 8), method
        assert rows[-1]["values_up"] == 2 * m * (d + 1)
        breakdown = rows[0][BREAKDOWN_KEY]  # round 1's per-key rows (costs.csv's)
        assert {(r["key"], r["bytes"]) for r in breakdown if r["direction"] == "up" and r["round"] == 1} == {
            ("nw", m * math.ceil(per_member / 8)), ("n", m * 8)}


def test_topk_with_error_feedback_keeps_residuals_in_client_state_and_trains():
    f = fed(compress={"*": "topk:0.05"})
    before = f.w.clone()
    f.run_rounds(3)
    states = f.pool.client_states()
    assert all(states[c]["_uplink"]["local:nw"].shape == (7850,) for c in range(4))
    assert not torch.equal(f.w, before) and torch.isfinite(f.w).all()
    # the model moves by at most k entries per client per round (top-k of the update)
    f2 = fed(compress={"*": "topk:5"})
    w0 = f2.w.clone()
    f2.run_round()
    assert int((f2.w != w0).sum()) <= 4 * 5


@pytest.mark.parametrize("method,sampler", [("topk:0.02", "keyed"), ("qsgd:4", "keyed"), ("randk:0.05", "keyed"),
                                            ("sign", "keyed"), ("qsgd:4", "randperm"), ("randk:0.05", "randperm")])
def test_batched_equals_per_client(method, sampler):
    """Under either sampler's draws (keyed: the compression's draws keyed per member too)."""
    def run(vectorize):
        f = Federation(RunConfig(task="synthetic", algo="fedavg", rounds=3, settings=SYN, backend="inline",
                                 vectorize=vectorize, compress={"*": method}, dp_clip=5.0, dp_noise=0.1,
                                 sampler=sampler))
        rows = f.run_rounds(3)
        return f, rows

    ref, ref_rows = run("off")
    vec, vec_rows = run("on")
    assert ref.pool.host.batched == set() and vec.pool.host.batched
    torch.testing.assert_close(vec.w, ref.w, rtol=1e-5, atol=1e-5)
    assert [r["bytes_up"] for r in vec_rows] == [r["bytes_up"] for r in ref_rows]
    assert [r["epsilon"] for r in vec_rows] == [r["epsilon"] for r in ref_rows]
    # the error-feedback residuals: each client's the same, and kept as stacked rows
    a, b = ref.pool.client_states(), vec.pool.client_states()
    assert a.keys() == b.keys()
    for cid in a:
        assert list(a[cid].get("_uplink", {})) == list(b[cid].get("_uplink", {}))
        for name, e in a[cid].get("_uplink", {}).items():
            torch.testing.assert_close(b[cid]["_uplink"][name], e, rtol=1e-5, atol=1e-5)
    if method != "qsgd:4":  # the methods with error feedback
        assert a and vec.pool.host.states.get_many(sorted(b)) is not None


def test_resume_is_exact_with_residuals_and_accountant():
    cfg = dict(compress={"*": "topk:0.05"}, dp_clip=1.0, dp_noise=1.0)
    whole = fed(**cfg)
    whole_rows = whole.run_rounds(4)
    first = fed(**cfg)
    first.run_rounds(2)
    ckpt = first.checkpoint()
    assert ckpt["transforms"]["accountant"] == [[1, 4, 1], [2, 4, 1]]
    second = fed(**cfg)
    second.restore(ckpt)
    rows = second.run_rounds(2)
    assert torch.equal(second.w, whole.w)
    for a, b in zip(rows, whole_rows[2:]):
        assert {c: a[c] for c in (*COLUMNS, "epsilon")} == {c: b[c] for c in (*COLUMNS, "epsilon")}


def test_dp_fedavg_clips_and_noises_with_a_fixed_denominator():
    # no noise, a tiny clip: the model moves by at most C / m * m = C per round in L2
    f = fed(dp_clip=0.01, dp_noise=0.0)
    w0 = f.w.clone()
    row = f.run_round()
    assert float((f.w - w0).norm()) <= 0.01 + 1e-6 and row["epsilon"] == math.inf
    # with noise, the epsilon column grows round by round
    rows = fed(dp_clip=1.0, dp_noise=2.0).run_rounds(3)
    eps = [r["epsilon"] for r in rows]
    assert 0 < eps[0] < eps[1] < eps[2] < math.inf


@pytest.mark.parametrize("algo,settings,exchanges", [
    ("fedavg", {"clients_per_round": 2}, 1),
    ("comfedl", {"clients_per_round": 2, "normalizer": "lse", "gamma": 10.0}, 2),  # f_i(w) for the centre, then models
])
def test_a_runs_epsilon_is_the_stated_mechanism_computed_by_the_library(algo, settings, exchanges):
    from tests.test_compression import stated_mechanism_epsilon

    rows = fed(algo, settings={**SMALL_DRO, "lr": 0.1, **settings}, dp_clip=0.5, dp_noise=1.5).run_rounds(2)
    assert len(rows) == 2 and not any(r["diverged"] for r in rows)
    expected = [stated_mechanism_epsilon(4, 2, 0.5, 1.5, 1e-5, [exchanges] * r) for r in (1, 2)]
    assert [r["epsilon"] for r in rows] == pytest.approx(expected, rel=1e-9)


def test_budget_epsilon_ends_the_run():
    res = raycompo.run("dro-mnist5k", "fedavg", rounds=20, settings={**SMALL_DRO, "lr": 0.1},
                       dp_clip=1.0, dp_noise=1.0, budget={"epsilon": 8})
    assert res.status == "completed"
    last = res.metrics.iloc[-1]
    assert last["epsilon"] >= 8 and res.metrics.iloc[-2]["epsilon"] < 8 and last["round"] < 20


def test_compress_down_counts_the_encoded_payload():
    f = fed(compress_down={"w": "qsgd:8"})
    row = f.run_round()
    d = 7850
    assert row["bytes_down"] == 4 * math.ceil((32 + d * (1 + 4)) / 8) and row["values_down"] == 4 * d


@pytest.mark.parametrize("cfg,match", [
    ({"compress": {"nw": "topk:0"}}, "K must be > 0"),
    ({"compress": {"nw": "qsgd:0"}}, "S must be an integer >= 1"),
    ({"compress": {"u": "sign"}}, "does not send 'u' up; its keys: nw"),
    ({"compress": {"n": "sign"}}, "does not send 'n' up"),  # a weight
    ({"dp_clip": 0.0}, "--dp-clip C must be > 0"),
    ({"dp_clip": 1.0, "dp_noise": -1.0}, "--dp-noise z must be >= 0"),
    ({"dp_clip": 1.0, "dp_delta": 1.0}, "--dp-delta must be in"),
    ({"budget": {"epsilon": 8}}, "budget epsilon needs client-level DP"),
])
def test_bad_settings_fail_at_resolution(cfg, match):
    with pytest.raises(ConfigError, match=match):
        resolve(dataclasses.replace(small_config("fedavg"), **cfg))


def test_dp_is_refused_for_an_algorithm_that_draws_its_own_cohorts(capsys):
    """DRFL draws its cohort with replacement by its mixing weights (`own_cohorts`): one client
    can be the whole cohort and add its clipped update once per draw, while the accountant
    assumes m distinct clients drawn uniformly without replacement. Refused before round 0,
    by the declared property, not by the algorithm's name."""
    from raycompo.algorithms.drfl import DRFL
    from raycompo.algorithms.fedavg import FedAvg

    with pytest.raises(ConfigError, match=r"--dp-clip / --dp-noise \(client-level DP\) with algorithm drfl: it draws its "
                                          r"own cohorts \(its cohort D is drawn with replacement.*m distinct clients "
                                          r"drawn uniformly without replacement"):
        raycompo.run("synthetic", "drfl", rounds=1, settings=SYN, dp_clip=1.0, dp_noise=1.0)
    base = ["--task", "synthetic", "--algo", "drfl", "--rounds", "1", "--backend", "inline", "--quiet",
            "--set", *[f"{k}={v}" for k, v in SYN.items()]]
    assert main([*base, "--dp-clip", "1", "--dp-noise", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "it draws its own cohorts" in err[0]

    class OwnDraw(FedAvg):  # any algorithm that declares its own draw
        name = "fedavg-own-draw"
        own_cohorts = "it draws its cohort by its own weights, with replacement"

    class EngineDraw(DRFL):
        name = "drfl-engine-draw"
        own_cohorts = None

    with pytest.raises(ConfigError, match="algorithm fedavg-own-draw: it draws its own cohorts"):
        resolve(RunConfig(task="synthetic", algo=OwnDraw, settings=SYN, backend="inline", dp_clip=1.0))
    resolve(RunConfig(task="synthetic", algo=EngineDraw, settings=SYN, backend="inline", dp_clip=1.0))
    resolve(RunConfig(task="synthetic", algo="drfl", settings=SYN, backend="inline", compress={"*": "topk:0.1"}))


def test_command_line(tmp_path, capsys):
    base = ["--task", "dro-mnist5k", "--algo", "fedavg", "--backend", "inline", "--quiet",
            "--set", *[f"{k}={v}" for k, v in SMALL_DRO.items()]]
    assert main([*base, "--rounds", "1", "--compress", "nw=topk:9000", "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "above the key's size 7850" in err[0]
    assert main([*base, "--rounds", "1", "--compress", "nw=sign", "--dp-clip", "1", "--dp-noise", "1",
                 "--out", str(tmp_path / "b")]) == 0
    header = (tmp_path / "b" / "metrics.csv").read_text().splitlines()[0].split(",")
    assert header[-1] == "epsilon"
    assert main(["--list"]) == 0
    assert "sends up (--compress KEY): local: nw (update of w (times n)), n (weight)" in capsys.readouterr().out


SYSTEM_FEDAVG = {"n_clients": 40, "clients_per_round": 6, "tau": 2, "max_samples": 60}


def synthetic(**kw) -> RunConfig:
    return RunConfig(task="synthetic", algo="fedavg", rounds=2, backend="inline", settings=SYSTEM_FEDAVG, **kw)


@pytest.mark.slow
def test_ray_equals_inline_with_compression_and_dp(ray_session):
    from raycompo.engine import run
    from tests.helpers import assert_rows_close

    cfg = synthetic(compress={"*": "qsgd:4"}, dp_clip=1.0, dp_noise=0.5)
    inline = run(cfg)
    remote = run(dataclasses.replace(cfg, backend="ray", clients_per_actor=20, cpus_per_actor=0.5))
    assert_rows_close(inline.rows, remote.rows, tol=1e-6)
    assert [r["bytes_up"] for r in inline.rows] == [r["bytes_up"] for r in remote.rows]
    assert [r["epsilon"] for r in inline.rows] == [r["epsilon"] for r in remote.rows]


def test_a_simulated_system_sees_the_smaller_uploads():
    from raycompo.engine import run

    plain = run(synthetic(system="mobile"))
    small = run(synthetic(system="mobile", compress={"*": "topk:0.01"}))
    assert small.rows[-1]["bytes_up"] < plain.rows[-1]["bytes_up"] / 10
    assert small.rows[-1]["sim_time"] < plain.rows[-1]["sim_time"]  # the same draws, shorter uploads


def test_plots_on_epsilon_and_bytes(tmp_path):
    import numpy as np
    import pandas as pd

    raycompo.run("dro-mnist5k", "fedavg", rounds=2, settings=SMALL_DRO, out=tmp_path / "dp" / "fedavg",
                 compress={"*": "topk:0.05"}, dp_clip=1.0, dp_noise=1.0)
    rows = pd.read_csv(tmp_path / "dp" / "fedavg" / "metrics.csv")
    for axis, columns in (("epsilon", ["epsilon"]), ("bytes", ["bytes_up", "bytes_down"])):
        fig = raycompo.plot(tmp_path / "dp", "val_acc", x=axis)
        line = fig.axes[0].get_lines()[0]
        np.testing.assert_allclose(np.asarray(line.get_xdata(), dtype=float), rows[columns].sum(axis=1).to_numpy())
    assert fig.axes[0].get_xlabel() == "bytes communicated (up + down)"
    raycompo.run("dro-mnist5k", "fedavg", rounds=1, settings=SMALL_DRO, out=tmp_path / "plain" / "fedavg")
    with pytest.raises(ConfigError, match="--dp-clip"):
        raycompo.plot(tmp_path / "plain", "val_acc", x="epsilon")


def test_a_sweep_space_sets_and_searches_compression_and_dp():
    from raycompo.tune.space import space_from_dict, split_transforms, validate

    space = space_from_dict({"task": "dro-mnist5k", "settings": {**SMALL_DRO, "dp_delta": 1e-4},
                             "algorithms": {"fedavg": {"compress": ["none", "*=topk:0.01", "nw=qsgd:4"],
                                                       "dp_clip": [0.5, 1.0], "dp_noise": 1.0, "lr": 0.1}}})
    configs = [space.run_config("fedavg", p) for p in space.grid("fedavg")]
    assert [c.compress for c in configs[::2]] == [{}, {"*": "topk:0.01"}, {"nw": "qsgd:4"}]
    assert {c.dp_clip for c in configs} == {0.5, 1.0} and all(c.dp_delta == 1e-4 and c.dp_noise == 1.0 for c in configs)
    assert all("compress" not in c.settings and c.settings["lr"] == 0.1 for c in configs)
    validate(space)  # every point resolves
    bad = space_from_dict({"task": "dro-mnist5k", "settings": SMALL_DRO, "algorithms": {"fedavg": {"compress": "u=sign"}}})
    with pytest.raises(ConfigError, match="does not send 'u' up"):
        validate(bad)
    with pytest.raises(ConfigError, match="expected 'KEY=METHOD"):
        split_transforms({"compress": "topk:0.1"})


def test_per_member_tensors_of_their_own_sizes_batched_as_per_client():
    """FastDRO's batched phase returns each client's per-sample losses as a list of tensors
    of their own sizes: transformed member by member, as the per-client path does."""
    settings = {"n_clients": 12, "min_samples": 2, "max_samples": 40, "sync_every": 3, "batch_size": 10,
                "lam": 2.0, "lr": 0.05}

    def run(vectorize):
        f = Federation(RunConfig(task="synthetic", algo="fastdro", rounds=2, settings=settings, backend="inline",
                                 vectorize=vectorize, compress={"*": "qsgd:8"}, dp_clip=10.0, dp_noise=0.01))
        return f, f.run_rounds(2)

    (ref, ref_rows), (vec, vec_rows) = run("off"), run("on")
    assert vec.pool.host.batched
    torch.testing.assert_close(vec.w, ref.w, rtol=1e-5, atol=1e-5)
    assert [r["bytes_up"] for r in vec_rows] == [r["bytes_up"] for r in ref_rows]


def test_the_compress_benchmark_prints_each_variant(capsys):
    from raycompo.bench.compress import main as bench

    assert bench(["--m", "4", "--rounds", "1", "--repeats", "1", "--variants", "none", "topk:0.01", "qsgd:4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("FedAvg, logistic-784, m = 4") and [ln.split()[0] for ln in lines[1:]] == [
        "none", "topk:0.01", "qsgd:4"]
    assert "1.00x" in lines[1]


def test_command_line_resume_continues_and_keeps_the_transforms(tmp_path, capsys):
    import pandas as pd

    base = ["--task", "dro-mnist5k", "--algo", "fedavg", "--backend", "inline", "--quiet",
            "--set", *[f"{k}={v}" for k, v in SMALL_DRO.items()], "lr=0.1",
            "--compress", "nw=topk:0.05", "--dp-clip", "1", "--dp-noise", "1"]
    assert main([*base, "--rounds", "4", "--out", str(tmp_path / "whole")]) == 0
    assert main([*base, "--rounds", "2", "--checkpoint-every", "1", "--out", str(tmp_path / "cut")]) == 0
    assert main(["--resume", str(tmp_path / "cut"), "--rounds", "4", "--quiet"]) == 0
    cols = ["round", "val_acc", "bytes_up", "epsilon"]
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "whole" / "metrics.csv")[cols],
                                  pd.read_csv(tmp_path / "cut" / "metrics.csv")[cols])
    capsys.readouterr()
    assert main(["--resume", str(tmp_path / "cut"), "--rounds", "5", "--quiet", "--compress", "nw=sign"]) == 2
    assert "cannot change --compress" in capsys.readouterr().err
