"""The local-composition shape F_i(w) = g_i(f_i(w)) and its stochastic gradient.

ComFedL (Algorithm 1, line 13) estimates the gradient of F_i as

    u = grad g_i(f_i(w; B); B~)^T  J_{f_i}(w; B)

with an inner batch B from D_i and an outer batch B~ from D~_i. This is a
vector-Jacobian product: the Jacobian J (p x d) is never formed. For a MAML inner map
f(w) = w - lambda grad L(w) the same product contains the Hessian-vector product.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch


class LocalComposition(Protocol):
    """One client's F_i(w) = g_i(f_i(w)).

    `inner(w, batch)` is the mini-batch value f_i(w; B) in R^p (paper's y^i);
    `outer(y, batch1)` is g_i(y; B~), a scalar. `needs_outer_batch` says whether g_i
    has data of its own (the general two-batch form of Algorithm 1, lines 11-13) or is
    deterministic (line 10, e.g. g(y) = exp(y / gamma)).
    """

    needs_outer_batch: bool

    def inner(self, w: torch.Tensor, batch: Any) -> torch.Tensor: ...

    def outer(self, y: torch.Tensor, batch1: Any) -> torch.Tensor: ...

    # Optional: `outer_grad(y, batch1)`, grad g(y; B~) computed by the same operations, in the
    # same order, as autograd's backward pass through `outer` (so the same bits); it spares
    # building and walking g's graph every step (see `compositional_gradient`).


def compositional_gradient(
    problem: LocalComposition,
    w: torch.Tensor,
    batch: Any,
    batch1: Any = None,
    y_hat: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """u = J_f(w; B)^T grad g(y_hat; B~) and the inner value f(w; B).

    `y_hat` is the point where the outer gradient is taken: the mini-batch inner value
    itself (ComFedL, the default) or an algorithm's running estimate (SCGD's u).

    Eager autograd, one backward pass through the inner map with `grad_outputs=v`, v =
    grad g(y_hat) (the VJP; about half the cost of torch.func.vjp + grad per local step on
    small models). v comes from, cheapest first:

    * the problem's `outer_grad(y, batch1)` if it has one: grad g computed directly, by the
      very operations autograd would run on `outer`'s graph (hence the same bits), without
      building that graph (KLDRO: 20 us of a 145 us step on ComFedL's logistic model);
    * at y_hat = f(w; B) (the default), the same single backward pass of g(f(w; B); B~)
      through both maps, the engine handing v to the inner map: one autograd call;
    * otherwise a first autograd call for v at y_hat.

    All three give the same bits. Inner maps may use torch.func inside (MAML's
    w - lambda grad L(w)): the backward pass then carries the Hessian-vector product.
    """
    if not torch.is_grad_enabled():  # e.g. called under no_grad; the context costs ~5 us a step
        with torch.enable_grad():
            return compositional_gradient(problem, w, batch, batch1, y_hat)
    w_ = w.detach().requires_grad_(True)
    y = problem.inner(w_, batch)
    y_val = y.detach()
    outer_grad = getattr(problem, "outer_grad", None)
    if outer_grad is not None:  # on detached values: no graph
        v = outer_grad(y_val if y_hat is None else y_hat.detach(), batch1)
        (u,) = torch.autograd.grad(y, w_, grad_outputs=v)
    elif y_hat is None:
        (u,) = torch.autograd.grad(problem.outer(y, batch1), w_)
    else:
        at = y_hat.detach().requires_grad_(True)
        (v,) = torch.autograd.grad(problem.outer(at, batch1), at)
        (u,) = torch.autograd.grad(y, w_, grad_outputs=v)
    return u, y_val


def composite_value(problem: LocalComposition, w: torch.Tensor, batch: Any, batch1: Any = None) -> torch.Tensor:
    """g(f(w; B); B~), the plug-in value of F_i."""
    return problem.outer(problem.inner(w, batch), batch1)
