"""One-step MAML's inner map and its pull-back for many (model, task) rows at once
(vectorized cohorts of the Local-SCGD family, issue 18).

Row r is a model x_r (a client's current iterate) and one task of that client's
meta-batch, (support_r, query_r). `torch.func.vmap` runs `meta_batch_vjp`'s per-task
computations over the rows:

    y_r = x_r - lambda grad L(x_r; support_r)                          inner values
    z_r = J_f(x_r; support_r)^T grad g(y_hat_r; query_r)                pull-backs

with the same Hessian-vector products (none with `first_order`). The inner map is
evaluated again in `pull`, because the estimate y_hat_r at which the outer gradient is
taken depends on all rows' inner values (SCGD's u). Rows must share their support and
query shapes (the sinusoid tasks' K points do). Rounding differs from the per-task loop
of `meta_batch_vjp` at the 1e-7 level.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.func import grad, vjp, vmap

from raycompo.problems.maml import MAML
from raycompo.problems.oracle import add_rows, uncounted


def stack_sets(sets: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """R (inputs, targets) pairs of equal shapes as ((R, ...), (R, ...))."""
    return torch.stack([s[0] for s in sets]), torch.stack([s[1] for s in sets])


def inner_values(problem: MAML, x: torch.Tensor, support: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """(R, d): y_r = f(x_r; support_r). Its oracle calls are counted by `count_calls`."""
    with uncounted():
        return vmap(lambda w, a, b: problem.inner(w, (a, b)))(x, *support).detach()


def pull(problem: MAML, x: torch.Tensor, support: tuple[torch.Tensor, torch.Tensor],
         query: tuple[torch.Tensor, torch.Tensor], hats: torch.Tensor) -> torch.Tensor:
    """(R, d): z_r = J_f(x_r; support_r)^T grad g(hats_r; query_r). Its oracle calls are
    counted by `count_calls`."""

    def one(w: torch.Tensor, a: Any, b: Any, qa: Any, qb: Any, hat: torch.Tensor) -> torch.Tensor:
        v = grad(lambda z: problem.outer(z, (qa, qb)))(hat)
        _, pullback = vjp(lambda v_: problem.inner(v_, (a, b)), w)
        return pullback(v)[0]

    with uncounted():
        return vmap(one)(x, *support, *query, hats.detach()).detach()


def count_calls(problem: MAML, support: tuple[torch.Tensor, torch.Tensor], query: tuple[torch.Tensor, torch.Tensor],
                tasks_per_row: Sequence[int] | np.ndarray) -> None:
    """The oracle calls of one step of `meta_batch_vjp` per task, added to each of the k
    rows (clients) of the chunk, `tasks_per_row[i]` tasks each: the inner gradient on the
    support points (forward and backward, 2 K_s), the outer gradient on the query points
    (2 K_q) and, second order, the Hessian-vector product on the support points (K_s). What
    the per-task loop computes; `pull` evaluates the inner map again under vmap (SCGD's
    estimate needs every row's value first), not counted twice."""
    k_s, k_q = support[1].shape[1], query[1].shape[1]
    per_task = 2 * k_s + 2 * k_q + (0 if problem.first_order else k_s)
    add_rows(np.asarray(tasks_per_row, dtype=np.int64) * per_task)


def row_means(values: torch.Tensor, owner: torch.Tensor, k: int) -> torch.Tensor:
    """(k, ...): the mean of the rows each of k owners has (`owner` (R,) long)."""
    total = torch.zeros((k, *values.shape[1:]), dtype=values.dtype, device=values.device).index_add_(0, owner, values)
    count = torch.bincount(owner, minlength=k).to(values.dtype)
    return total / count.view(-1, *([1] * (values.dim() - 1)))
