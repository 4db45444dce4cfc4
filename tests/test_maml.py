"""The MAML compositional gradient of a meta-batch against explicit Jacobians: the
vector-Jacobian product through the inner map y = x - lambda grad L_train(x) contains
the Hessian-vector product (true second order); first_order drops it."""

from __future__ import annotations

import torch
from torch import nn
from torch.func import grad, hessian, jacrev

from raycompo.models import FlatModel
from raycompo.problems.maml import MAML, meta_batch_gradient, meta_batch_vjp

torch.manual_seed(0)
NET = FlatModel(nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1)))  # d = 13


def mse(w, batch):
    x, y = batch
    return torch.mean((NET(w, x) - y) ** 2)


def tasks(n: int):
    g = torch.Generator().manual_seed(1)
    return [
        (
            (torch.randn(5, 2, generator=g), torch.randn(5, 1, generator=g)),
            (torch.randn(6, 2, generator=g), torch.randn(6, 1, generator=g)),
        )
        for _ in range(n)
    ]


def test_second_order_gradient_equals_explicit_jacobian():
    problem = MAML(mse, inner_lr=0.3)
    w = NET.flatten().requires_grad_(False)
    batch = tasks(3)
    y_hats = [w + 0.05 * torch.randn_like(w) for _ in batch]  # an inner-state estimate per task
    got = meta_batch_gradient(problem, w, batch, y_hats)
    want = torch.zeros_like(w)
    for (support, query), y_hat in zip(batch, y_hats):
        jac = jacrev(lambda v, s=support: problem.inner(v, s))(w)  # (d, d), explicit
        torch.testing.assert_close(
            jac, torch.eye(len(w)) - 0.3 * hessian(mse)(w, support), rtol=1e-4, atol=1e-5
        )
        want += jac.T @ grad(mse)(y_hat, query)
    torch.testing.assert_close(got, want / len(batch), rtol=1e-4, atol=1e-6)


def test_plug_in_point_is_the_maml_gradient():
    """No y_hat: the outer gradient at the task's own adapted parameters = grad of the
    MAML objective L_query(w - lambda grad L_support(w))."""
    problem = MAML(mse, inner_lr=0.3)
    w = NET.flatten()
    batch = tasks(2)
    want = torch.stack(
        [grad(lambda v, s=s, q=q: mse(v - 0.3 * grad(mse)(v, s), q))(w) for s, q in batch]
    ).mean(0)
    torch.testing.assert_close(meta_batch_gradient(problem, w, batch), want, rtol=1e-4, atol=1e-6)
    values, _ = meta_batch_vjp(problem, w, batch)
    torch.testing.assert_close(values[0], w - 0.3 * grad(mse)(w, batch[0][0]))


def test_first_order_drops_the_hessian():
    w = NET.flatten()
    batch = tasks(2)
    y_hats = [w.clone() for _ in batch]
    first = meta_batch_gradient(MAML(mse, 0.3, first_order=True), w, batch, y_hats)
    second = meta_batch_gradient(MAML(mse, 0.3), w, batch, y_hats)
    want = torch.stack([grad(mse)(w, q) for _, q in batch]).mean(0)  # J = I
    torch.testing.assert_close(first, want)
    assert (first - second).norm() > 1e-4  # the Hessian term is really there
