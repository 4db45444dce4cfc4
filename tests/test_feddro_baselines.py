"""FedDRO section 6's parallel centralized baselines: FastDRO (Levy et al. 2020) and PDSGD
(primal-dual SGD), on the offline digits-ST task."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from raycompo.algorithms.fastdro import chi2_weights, cvar_weights
from raycompo.configuration.config import RunConfig, resolve
from raycompo.engine import run
from raycompo.engine.federation import Federation
from raycompo.errors import ConfigError
from tests.helpers import assert_rows_close

SMALL = {"n_clients": 4, "minority_keep": 5, "test_fraction": 0.3}


def digits(algo, rounds=2, backend="inline", eval_every=1, **settings):
    return RunConfig(task="feddro-digits-st", algo=algo, rounds=rounds, settings={**SMALL, **settings}, backend=backend,
                     eval_every=eval_every)


def test_fastdro_kl_is_the_plug_in_compositional_gradient():
    # Levy et al.'s batch estimator for the KL penalty = MBSGD-CO's plug-in gradient on
    # the pooled batch (same b_g draws)
    a = run(digits("fastdro", sync_every=2)).rows
    b = run(digits("mbsgd-co", sync_every=2)).rows
    assert_rows_close(a, b, tol=1e-6)
    assert a[-1]["objective"] < a[0]["objective"]


def test_chi2_weights():
    losses = torch.tensor([0.1, 0.5, 2.0, 3.0], dtype=torch.float64)
    n = len(losses)
    q = chi2_weights(losses, lam=100.0)  # large lam: no clamp, q = 1/n + (l - mean) / (lam n)
    torch.testing.assert_close(q, 1 / n + (losses - losses.mean()) / (100.0 * n))
    q = chi2_weights(losses, lam=1.0)  # the two low losses get weight 0 (q >= 0 binds)
    torch.testing.assert_close(q, torch.tensor([0.0, 0.0, 0.375, 0.625], dtype=torch.float64))


def test_cvar_weights():
    losses = torch.tensor([0.3, 2.0, 0.1, 1.0, 5.0])
    q = cvar_weights(losses, 0.3)  # alpha n = 1.5: the largest gets 1/1.5, the next 0.5/1.5
    torch.testing.assert_close(q, torch.tensor([0.0, 1 / 3, 0.0, 0.0, 2 / 3]))
    assert float(cvar_weights(losses, 1.0).sum()) == pytest.approx(1.0)


@pytest.mark.parametrize("algo,settings", [
    ("fastdro", {"geometry": "cvar", "cvar_alpha": 0.2}),
    ("fastdro", {"objective": "chi2-dro", "lam": 2.0}),
    ("pdsgd", {"dual_lr": 0.05}),
])
def test_baselines_reduce_the_objective(algo, settings):
    rows = run(digits(algo, rounds=6, eval_every=6, sync_every=2, **settings)).rows
    assert rows[-1]["objective"] < rows[0]["objective"] - 0.1
    assert rows[-1]["val_acc"] > rows[0]["val_acc"]


def test_pdsgd_first_step_is_the_gradient_of_phi_and_the_dual_moves_to_high_losses():
    # full batch, p uniform at the start: the first step is eta * grad Phi (at the zero
    # initial model all losses are equal, so Phi's softmax weights are uniform too)
    cfg = digits("pdsgd", rounds=1, batch_size=None, sync_every=1, lr=0.5, dual_lr=0.1)
    a, b = Federation(cfg), Federation(dataclasses.replace(cfg, algo="mbsgd-co", settings={**SMALL, "batch_size": None, "lr": 0.5}))
    a.run_round()
    b.run_round()
    torch.testing.assert_close(a.w, b.w, rtol=1e-5, atol=1e-6)
    # the dual step: log-weights (1 - eta_p lam) 0 + eta_p l_i (full batch: n/|b| = 1)
    a.run_round()
    st = a.client_state(0)["a"]
    c = a.task.clients([0])[0]
    with torch.no_grad():
        l0 = a.task.sample_losses(a.task.init_weights(), (c.x, c.y)).double()
        l1 = a.task.sample_losses(b.w, (c.x, c.y)).double()
    torch.testing.assert_close(st, 0.9 * (0.1 * l0) + 0.1 * l1, rtol=1e-4, atol=1e-6)


def test_baseline_settings_are_checked():
    with pytest.raises(ConfigError, match="objective kl"):
        resolve(digits("pdsgd", objective="chi2-dro"))
    with pytest.raises(ConfigError, match="geometry"):
        resolve(digits("fastdro", geometry="wasserstein"))
    with pytest.raises(ConfigError, match="no uncertainty set"):
        resolve(digits("fastdro", objective="chi2"))
    with pytest.raises(ConfigError, match="sample_losses|per-sample"):
        resolve(RunConfig(task="toy-co", algo="fastdro", backend="inline"))


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["pdsgd", "fastdro"])
def test_ray_equals_inline(ray_session, algo):
    a = run(digits(algo, rounds=2, sync_every=2)).rows
    b = run(digits(algo, rounds=2, sync_every=2, backend="ray")).rows
    assert_rows_close(a, b, tol=1e-6)
