"""First-order gradients go through eager autograd (`algorithms.base.grad_of`), not
torch.func.grad (issue 18, part 2): the results are bitwise those of the torch.func path,
and the hot path never imports torch._dynamo."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from raycompo.algorithms import base, comfedl, fastdro, pdsgd, personalized, unconstrained
from raycompo.configuration.config import RunConfig
from raycompo.engine.federation import Federation
from tests.damaml_common import tiny_config
from tests.helpers import small_config

USERS = (base, fastdro, pdsgd, unconstrained)
"""The modules whose client phases call `grad_of` (loss_grad: fedavg, ditto, qfedavg, drfl)."""


def func_grad(fn, w, *args, has_aux=False):
    """The former path, kept here only to compare with."""
    if has_aux:
        g, aux = torch.func.grad(fn, has_aux=True)(w, *args)
        return g.detach(), aux
    return torch.func.grad(fn)(w, *args).detach()


def two_pass_compositional_gradient(problem, w, batch, batch1=None, y_hat=None):
    """The former ComFedL gradient, kept here only to compare with: v = grad g first, then
    the inner map's VJP (two autograd calls where the engine now makes one)."""
    with torch.enable_grad():
        w_ = w.detach().requires_grad_(True)
        y = problem.inner(w_, batch)
        at = (y if y_hat is None else y_hat).detach().requires_grad_(True)
        (v,) = torch.autograd.grad(problem.outer(at, batch1), at)
        (u,) = torch.autograd.grad(y, w_, grad_outputs=v)
    return u, y.detach()


def digits(algo: str, **settings) -> RunConfig:
    s = {"n_clients": 4, "minority_keep": 5, "test_fraction": 0.3, "sync_every": 2, **settings}
    return RunConfig(task="feddro-digits-st", algo=algo, rounds=3, eval_every=1, settings=s, backend="inline")


CONFIGS = {
    "fedavg": small_config("fedavg", lr=0.1),
    "ditto": small_config("ditto", lr=0.1, clients_per_round=3),
    "qfedavg": small_config("qfedavg", q=1.0, lr=0.1),
    "drfl": small_config("drfl", clients_per_round=2),
    "fastdro": digits("fastdro"),
    "pdsgd": digits("pdsgd"),
    "unconstrained": digits("unconstrained"),
}


def trajectory(cfg: RunConfig):
    fed = Federation(cfg)
    try:
        rows = [fed.initial_row(), *fed.run_rounds(cfg.rounds)]
        states = {k: fed.client_state(k) for k in range(fed.n_clients)}
        return fed.w.clone(), rows, states
    finally:
        fed.close()


def strip(rows):
    return [{k: v for k, v in r.items() if k not in ("round_time", "wall_time")} for r in rows]


def same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b


@pytest.mark.parametrize("algo", sorted(CONFIGS))
def test_autograd_path_is_bitwise_the_torch_func_path(algo, monkeypatch):
    w_new, rows_new, states_new = trajectory(CONFIGS[algo])
    for mod in USERS:
        monkeypatch.setattr(mod, "grad_of", func_grad)
    w_old, rows_old, states_old = trajectory(CONFIGS[algo])
    assert torch.equal(w_new, w_old)
    assert strip(rows_new) == strip(rows_old)
    assert len(rows_new) == CONFIGS[algo].rounds + 1
    assert same(states_new, states_old)


COMPOSITIONAL = {
    "comfedl": small_config("comfedl", lr=0.05, gamma=2.0),
    "comfedl-lse": small_config("comfedl", lr=0.05, gamma=0.5, normalizer="lse", clients_per_round=3),
    "comfedl-maml": tiny_config("comfedl-maml", rho=0.6),
    "tr-maml": tiny_config("tr-maml", rho=0.8),
}


@pytest.mark.parametrize("name", sorted(COMPOSITIONAL))
def test_one_pass_compositional_gradient_is_bitwise_the_two_pass_one(name, monkeypatch):
    w_new, rows_new, states_new = trajectory(COMPOSITIONAL[name])
    for mod in (comfedl, personalized):
        monkeypatch.setattr(mod, "compositional_gradient", two_pass_compositional_gradient)
    w_old, rows_old, states_old = trajectory(COMPOSITIONAL[name])
    assert torch.equal(w_new, w_old)
    assert strip(rows_new) == strip(rows_old)
    assert same(states_new, states_old)


def test_grad_of_matches_torch_func_on_nested_torch_func():
    # fn using torch.func inside (a MAML-like inner step): autograd carries the second order
    x = torch.randn(5, 3)

    def inner_loss(w):
        return ((x @ w).tanh() ** 2).mean()

    def outer(w):
        return inner_loss(w - 0.1 * torch.func.grad(inner_loss)(w))

    w = torch.randn(3)
    torch.testing.assert_close(base.grad_of(outer, w), torch.func.grad(outer)(w), rtol=1e-6, atol=1e-7)


@pytest.mark.slow
def test_inline_rounds_do_not_import_dynamo():
    code = textwrap.dedent("""
        import sys
        import torch
        from raycompo.engine.federation import Federation
        from tests.helpers import small_config
        for algo in ("fedavg", "comfedl", "ditto", "qfedavg", "drfl"):
            fed = Federation(small_config(algo, rounds=2))
            fed.run_rounds(2)
            fed.evaluate()
            fed.close()
        assert "torch._dynamo" not in sys.modules, sorted(m for m in sys.modules if "dynamo" in m)[:5]
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("gamma,center", [(1.0, None), (0.3, None), (2.0, None), (0.5, 1.7), (3.0, -0.2)])
def test_kldro_outer_grad_is_bitwise_autograds(dtype, gamma, center):
    from raycompo.problems import KLDRO

    problem = KLDRO(lambda w, b: w.sum(), gamma, center=center)
    for y in torch.linspace(-3, 4, 41, dtype=dtype).reshape(-1, 1):
        at = y.clone().requires_grad_(True)
        (v,) = torch.autograd.grad(problem.outer(at), at)
        assert torch.equal(problem.outer_grad(y), v), (y, v, problem.outer_grad(y))


def test_gradients_under_no_grad():
    from raycompo.problems import KLDRO, compositional_gradient

    x = torch.randn(6, 3)
    problem = KLDRO(lambda w, b: ((b @ w).tanh() ** 2).mean(), 0.7)
    w = torch.randn(3)
    g, (u, y) = base.grad_of(problem.loss, w, x), compositional_gradient(problem, w, x)
    with torch.no_grad():
        assert torch.equal(base.grad_of(problem.loss, w, x), g)
        u2, y2 = compositional_gradient(problem, w, x)
    assert torch.equal(u2, u) and torch.equal(y2, y) and not u.requires_grad
