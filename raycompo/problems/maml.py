"""One-step MAML as a composition (ComFedL section 1.1, problems (7) and (10)).

    inner map   y = f^i(w) = w - lambda * grad L_train(w; xi)      (R^d -> R^d)
    outer       g^i(y) = L_test(y; zeta)                           (MAML, problem 7)
           or   g^i(y) = exp(L_test(y; zeta) / gamma)              (DAMAML, problem 10)

The compositional gradient J_f(w)^T grad g(y) = (I - lambda H_train(w)) grad g(y) is a
vector-Jacobian product through the inner map, so it contains the Hessian-vector product
H_train(w) v (true second order, via torch.func). `first_order=True` drops the Hessian
term (FO-MAML): J_f is taken as the identity.

A batch for these problems is a pair (support, query) for the task; `inner` uses the
support set, `outer` the query set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.func import grad, vjp

Loss = Callable[[torch.Tensor, Any], torch.Tensor]


@dataclass
class MAML:
    loss: Loss
    """Task loss L(w; batch) of the model w (mean over the batch)."""
    inner_lr: float
    """Inner (adaptation) learning rate lambda (eta in ComFedL's problem (7))."""
    gamma: float | None = None
    """None: MAML, g = L_test. A value: DAMAML, g = exp(L_test / gamma) (problem 10)."""
    first_order: bool = False
    """Drop the Hessian term of the inner map's Jacobian (first-order MAML)."""
    center: float | None = None
    """DAMAML only. None: g = exp(L_test / gamma) (problem 10). A value c:
    g_c = gamma exp((L_test - c) / gamma), the gradient form of the log-sum-exp problem
    (9)/(5) at the round's value c (see raycompo.problems.dro)."""

    needs_outer_batch = True

    def inner(self, w: torch.Tensor, support: Any) -> torch.Tensor:
        g = grad(self.loss)(w, support)
        if self.first_order:
            g = g.detach()
        return w - self.inner_lr * g

    def outer(self, y: torch.Tensor, query: Any) -> torch.Tensor:
        value = self.loss(y, query)
        if self.gamma is None:
            return value
        if self.center is None:
            return torch.exp(value / self.gamma)
        return self.gamma * torch.exp((value - self.center) / self.gamma)

    def robust_value(self, w: torch.Tensor, support: Any, query: Any) -> torch.Tensor:
        """L_test(w - lambda grad L_train(w; support); query), the value inside DAMAML's
        exponential (a scalar)."""
        return self.loss(self.inner(w, support), query).reshape(())


def adapt(loss: Loss, w: torch.Tensor, support: Any, inner_lr: float, steps: int = 1) -> torch.Tensor:
    """`steps` plain gradient steps on the support set (test-time adaptation)."""
    for _ in range(steps):
        w = w - inner_lr * grad(loss)(w, support)
    return w.detach()


def meta_batch_vjp(
    problem: MAML, w: torch.Tensor, tasks: Sequence[tuple[Any, Any]]
) -> tuple[list[torch.Tensor], Callable[[Sequence[torch.Tensor]], torch.Tensor]]:
    """The inner values y_j = f(w; support_j) of a meta-batch of tasks (support, query),
    and `pull(y_hats)` = 1/B sum_j J_f(w; support_j)^T grad g(y_hat_j; query_j).

    Splitting the two lets an algorithm update its inner-state estimate from the y_j
    before choosing where the outer gradients are taken (SCGD evaluates them at the
    new estimate u_{t+1}, Local-SCGDM Algorithm 1 line 8). The pull-backs contain the
    Hessian-vector products of the inner maps (none with `first_order`).
    """
    values, pullbacks = [], []
    for support, _ in tasks:
        y, pullback = vjp(lambda v, s=support: problem.inner(v, s), w)
        values.append(y.detach())
        pullbacks.append(pullback)

    def pull(y_hats: Sequence[torch.Tensor]) -> torch.Tensor:
        total = torch.zeros_like(w)
        for (_, query), y_hat, pullback in zip(tasks, y_hats, pullbacks):
            v = grad(lambda z, q=query: problem.outer(z, q))(y_hat.detach())
            total = total + pullback(v)[0]
        return total / len(tasks)

    return values, pull


def meta_batch_gradient(
    problem: MAML,
    w: torch.Tensor,
    tasks: Sequence[tuple[Any, Any]],
    y_hats: Sequence[torch.Tensor | None] | None = None,
) -> torch.Tensor:
    """Mean over a meta-batch of tasks (support, query) of each task's compositional
    gradient J_f(w; support)^T grad g(y_hat; query). `y_hats[j]` None (or no y_hats):
    the plug-in point f(w; support_j) itself, i.e. the plain (biased) MAML gradient."""
    values, pull = meta_batch_vjp(problem, w, tasks)
    hats = list(y_hats) if y_hats is not None else [None] * len(tasks)
    return pull([y if h is None else h for y, h in zip(values, hats)])
