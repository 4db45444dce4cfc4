"""GCIVR (Haddadpour et al. 2022) and the unconstrained parallel SGD, the baselines of the
FedDRO paper's fairness experiment, with FedDRO on the fairness tasks."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from raycompo.configuration.config import RunConfig
from raycompo.engine import run
from raycompo.engine.federation import Federation
from raycompo.errors import ConfigError
from raycompo.problems.global_composition import full_parts
from tests.fair_files import write_adult
from tests.helpers import assert_rows_close

TINY = {"n_clients": 4, "synth_train": 200, "synth_test": 80}


def synth(algo, rounds=3, **settings) -> RunConfig:
    return RunConfig(task="fair-synth", algo=algo, rounds=rounds, settings={**TINY, **settings}, backend="inline")


def test_gcivr_with_full_batches_is_gradient_descent_on_phi():
    # |b| = all local data: the SARAH corrections telescope, so every step between two
    # checkpoints uses the exact grad Phi(x^t), as MBSGD-CO does with full batches
    a = run(synth("gcivr", rounds=6, batch_size=None, full_every=1000, lr=0.5)).rows
    b = run(synth("mbsgd-co", rounds=6, batch_size=None, lr=0.5)).rows
    assert_rows_close(a, b, tol=2e-5)
    assert a[-1]["objective"] < a[0]["objective"] - 0.05
    # and the tracked inner value is g at the last point: y^t = g(x^t) exactly
    fed = Federation(synth("gcivr", rounds=4, batch_size=None, full_every=1000, lr=0.5))
    for _ in range(4):
        fed.run_round()
    est, x_t = fed.state["est"], fed.state["w_prev"]
    parts = [full_parts(fed.algorithm.problem, x_t, c.x, c.y) for c in fed.task.clients(list(range(4)))]
    torch.testing.assert_close(est["g"].double(), sum(p["g"] for p in parts) / 4, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(est["jac"].double(), sum(p["jac_g"] for p in parts) / 4, rtol=1e-4, atol=1e-6)


def test_gcivr_mini_batch_estimates_drift_until_the_next_checkpoint():
    # small batches: the estimate is no longer exact between checkpoints, and a checkpoint
    # (every 2 steps here) resets it to the full-data value
    fed = Federation(synth("gcivr", rounds=3, batch_size=4, full_every=2, lr=0.5))
    clients = fed.task.clients(list(range(4)))

    def exact_g(x):
        return sum(full_parts(fed.algorithm.problem, x, c.x, c.y, with_grad=False)["g"] for c in clients) / 4

    gaps = []
    for _ in range(3):  # steps t = 0 (checkpoint), 1 (correction), 2 (checkpoint)
        fed.run_round()
        gaps.append(float((fed.state["est"]["g"].double() - exact_g(fed.state["w_prev"])).abs().max()))
    assert gaps[0] < 1e-6 and gaps[2] < 1e-6 and gaps[1] > 1e-4


@pytest.mark.parametrize("seed", [0, 1])
def test_ignoring_the_constraints_leaves_a_larger_tpr_gap(seed):
    # fair-synth: the groups differ in positive rate and feature noise. Mean training
    # violation over the second half of a short run (checked on seeds 0-4: margins 0.05-0.17).
    settings = {"n_clients": 4, "synth_train": 1000, "synth_test": 800, "lr": 0.5, "batch_size": 64}
    out = {}
    for algo, extra in (("unconstrained", {}), ("feddro", {}), ("gcivr", {"full_every": 20})):
        cfg = RunConfig(task="fair-synth", algo=algo, rounds=40, eval_every=5, seed=seed, backend="inline",
                        settings={**settings, **extra})
        rows = [r for r in run(cfg).rows if r["round"] > 20 and "train_violation" in r]
        out[algo] = (sum(r["train_violation"] for r in rows) / len(rows), rows[-1]["train_acc"])
    assert out["unconstrained"][0] > max(out["feddro"][0], out["gcivr"][0]) + 0.02, out
    assert min(acc for _, acc in out.values()) > 0.65, out  # all of them learned


def test_fair_adult_runs_end_to_end_on_small_files(tmp_path):
    write_adult(tmp_path, repeat=4)  # 24 training, 8 test records
    rows = {}
    for algo in ("feddro", "gcivr", "unconstrained"):
        cfg = RunConfig(task="fair-adult", algo=algo, rounds=2, data_dir=str(tmp_path), backend="inline",
                        settings={"n_clients": 2, "protected": "sex", "batch_size": 4})
        result = run(cfg)
        assert result.status == "completed"
        rows[algo] = result.rows[-1]
    for row in rows.values():
        assert {"train_violation", "val_violation", "val_shortfall", "objective", "val_acc_worst"} <= set(row)
        assert not any(k.startswith("_") for k in row)  # the pooled counts are not columns
    assert rows["feddro"]["objective"] != rows["unconstrained"]["objective"]


@pytest.mark.slow
def test_ray_equals_inline_for_gcivr(ray_session):
    cfg = synth("gcivr", rounds=3, batch_size=8, full_every=2)
    inline = run(cfg)
    remote = run(dataclasses.replace(cfg, backend="ray", clients_per_actor=2, cpus_per_actor=0.5))
    assert inline.status == remote.status == "completed"
    assert_rows_close(inline.rows, remote.rows, tol=1e-6)
    assert "val_violation" in remote.rows[-1]


def test_settings_are_checked():
    with pytest.raises(ConfigError, match="full_every"):
        run(synth("gcivr", full_every=0))
    with pytest.raises(ConfigError, match="unknown setting.*full_every"):
        run(synth("unconstrained", full_every=5))
    with pytest.raises(ConfigError, match="fedavg needs a task with loss; task fair-synth has global_composition"):
        run(RunConfig(task="fair-synth", algo="fedavg", settings={}, backend="inline"))
