"""ComFedL's `normalizer="lse"`: eq. (5) (log-sum-exp) instead of eq. (6); stable at the
paper's gamma."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from raycompo.configuration.config import RunConfig, resolve
from raycompo.engine import run
from raycompo.engine.federation import Federation, RoundCtx
from raycompo.errors import ConfigError
from tests.helpers import small_config


def client_batches(cfg):
    task = resolve(cfg).make_task()
    return task, [(c.x, c.y) for c in task.clients(list(range(task.n_clients)))]


def test_tau1_full_batch_is_gradient_descent_on_log_sum_exp():
    lr, gamma, steps = 0.05, 0.2, 3
    cfg = small_config("comfedl", rounds=steps, lr=lr, gamma=gamma, tau=1, batch_size=None, normalizer="lse")
    fed = Federation(cfg)
    task, batches = client_batches(cfg)

    def lse(w):  # eq. (5): gamma log(1/n sum_i exp(f_i(w) / gamma))
        f = torch.stack([F.cross_entropy(task.model(w, x), y) for x, y in batches])
        return gamma * (torch.logsumexp(f / gamma, 0) - math.log(len(batches)))

    w = task.init_weights().clone()
    for _ in range(steps):
        w = w.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(lse(w), w)
        w = (w - lr * g).detach()
        fed.run_round()
        torch.testing.assert_close(fed.w, w, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(w, task.init_weights())


def test_one_client_step_is_the_plain_gradient():
    # one client (cohort of 1), tau = 1, full batch: c = f(w), weight exp(0) = 1
    cfg = small_config("comfedl", rounds=1, lr=0.1, gamma=0.2, tau=1, batch_size=None, normalizer="lse",
                       clients_per_round=1)
    fed = Federation(cfg)
    task, batches = client_batches(cfg)
    (cid,) = RoundCtx(fed, 0).sample(1)  # the cohort of round 0
    w0 = fed.w.clone()
    fed.run_round()
    w = w0.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(F.cross_entropy(task.model(w, batches[cid][0]), batches[cid][1]), w)
    torch.testing.assert_close(fed.w, w0 - 0.1 * g, rtol=1e-5, atol=1e-6)


def test_direction_is_parallel_to_the_default():
    # every client, tau = 1, full batch: the lse step is eq. (6)'s times gamma exp(-c/gamma)
    gamma = 0.5
    steps = {}
    for normalizer in ("none", "lse"):
        fed = Federation(small_config("comfedl", rounds=1, lr=0.01, gamma=gamma, tau=1, batch_size=None,
                                      normalizer=normalizer))
        w0 = fed.w.clone()
        fed.run_round()
        steps[normalizer] = (w0 - fed.w).double()
    a, b = steps["none"], steps["lse"]
    cos = float(a @ b / (a.norm() * b.norm()))
    assert cos > 1 - 1e-6
    ratio = float(b.norm() / a.norm())
    # at the initial model every loss is ln 10, so c = ln 10 and the ratio is gamma / 10^(1/gamma)
    assert ratio == pytest.approx(gamma * math.exp(-math.log(10) / gamma), rel=1e-3)


def test_paper_gamma_diverges_by_default_and_not_with_lse():
    # dro-mnist5k with the paper's settings (lr 0.01, gamma 0.2, tau 5, batch 32)
    base = RunConfig(task="dro-mnist5k", algo="comfedl", rounds=3, backend="inline")
    default = run(base)
    assert default.status == "diverged"
    lse = run(RunConfig(task="dro-mnist5k", algo="comfedl", rounds=3, backend="inline",
                        settings={"normalizer": "lse"}))
    assert lse.status == "completed"
    rows = lse.rows
    assert all(math.isfinite(r["train_loss"]) for r in rows if "train_loss" in r)
    assert rows[-1]["val_acc"] > rows[0]["val_acc"] + 0.2  # it learns


def test_damaml_journal_settings_with_lse():
    settings = {"train_per_client": 40, "val_per_client": 20, "hidden": 4, "batch_size": 8}
    out = {}
    for normalizer in ("none", "lse"):
        out[normalizer] = run(RunConfig(task="damaml-mnist5k", algo="comfedl-damaml", rounds=2, backend="inline",
                                        settings={**settings, "normalizer": normalizer}))
    assert out["none"].status == "diverged"  # journal lr 0.1, gamma 0.5: exp(f/gamma)/gamma ~ 270
    assert out["lse"].status == "completed"
    assert out["lse"].rows[-1]["val_loss"] < out["lse"].rows[0]["val_loss"]


@pytest.mark.parametrize("algo", ["comfedl", "comfedl-damaml"])
def test_bad_normalizer_is_rejected(algo):
    task = "dro-mnist5k" if algo == "comfedl" else "damaml-mnist5k"
    with pytest.raises(ConfigError, match="normalizer"):
        resolve(RunConfig(task=task, algo=algo, settings={"normalizer": "softmax"}, backend="inline"))


def test_lse_ray_equals_inline(ray_session):
    from tests.helpers import assert_rows_close

    cfg = small_config("comfedl", rounds=2, normalizer="lse", clients_per_round=3)
    a = run(cfg).rows
    b = run(RunConfig(**{**cfg.to_dict(), "backend": "ray", "clients_per_actor": 2, "cpus_per_actor": 0.5})).rows
    assert_rows_close(a, b, tol=1e-6)
