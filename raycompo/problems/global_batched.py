"""FedDRO's per-client parts for k clients at once (vectorized cohorts, issue 18).

For a DRO objective on per-sample losses (`LossComposition`: phi_i = G(l_i), psi_i =
H(l_i), elementwise), client i's parts on its mini-batch b_i are

    g_i   = 1/|b_i| sum_{s in b_i} G(l_s(x_i))                        (d_g = 1)
    J_i   = 1/|b_i| sum_s G'(l_s(x_i)) grad l_s(x_i)                  the Jacobian of g_i
    gh_i  = 1/|b_i| sum_s H'(l_s(x_i)) grad l_s(x_i)                  grad h_i

so one forward pass of the task's batched per-sample losses (k, B) and one pullback
weighed by G'(l) mask / n_i (`Task.batched_sample_grad`) give all k Jacobians; G' and H'
come from autograd on the (k, B) losses alone. Padded rows (clients smaller than the
batch) weigh 0 through the batch's mask. Rounding differs from the per-client
`g_value_and_jacobian` (a batched product and a masked mean), about 1e-7 relative.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from raycompo.problems.global_composition import GlobalComposition, LossComposition


def masked_mean(values: torch.Tensor, batch: Any) -> torch.Tensor:
    """(k, B) -> (k,): each client's mean over its batch's real rows."""
    return (values * batch.mask).sum(1) / batch.count


def real_rows(losses: torch.Tensor, batch: Any) -> torch.Tensor:
    """The losses with padded rows set to 0: fn(l) of a padded row may overflow (KL's
    exp(l / lam)), and inf times a 0 mask would be NaN."""
    return torch.where(batch.mask > 0, losses, torch.zeros_like(losses))


def value_and_derivative(fn: Callable[[torch.Tensor], torch.Tensor], losses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """fn(l) and fn'(l) for an elementwise fn of the (k, B) losses."""
    with torch.enable_grad():
        l_ = losses.detach().requires_grad_(True)
        v = fn(l_)
        (d,) = torch.autograd.grad(v.sum(), l_)
    return v.detach(), d


def mean_and_grad(task: Any, fn: Callable[[torch.Tensor], torch.Tensor], w: torch.Tensor, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """((k,) each client's masked mean of fn(l_s), (k, dim) its gradient at its row of w)."""
    means: list[torch.Tensor] = []

    def weigh(losses: torch.Tensor) -> torch.Tensor:
        v, d = value_and_derivative(fn, real_rows(losses, batch))
        means.append(masked_mean(v, batch))
        return d * batch.mask / batch.count.unsqueeze(1)

    grads, _ = task.batched_sample_grad(w, batch, weigh)
    return means[0], grads


def g_values(task: Any, problem: LossComposition, w: torch.Tensor, batch: Any) -> torch.Tensor:
    """(k, d_g): each client's g_i(w_i; b_i), no gradient (FedDRO's correction g(x_k^{t-1}))."""
    with torch.no_grad():
        return masked_mean(problem.g_of_loss(real_rows(task.batched_sample_losses(w, batch), batch)), batch).unsqueeze(1)


def local_parts(task: Any, problem: LossComposition, w: torch.Tensor, b_g: Any,
                b_h: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """`GlobalCOAlgorithm.local_parts` for k clients: (g (k, d_g), J (k, d_g, dim), grad h (k, dim) or None)."""
    g, jac = mean_and_grad(task, problem.g_of_loss, w, b_g)
    gh = mean_and_grad(task, problem.h_of_loss, w, b_h)[1] if b_h is not None else None
    return g.unsqueeze(1), jac.unsqueeze(1), gh


def direction(problem: GlobalComposition, jac: torch.Tensor, y: torch.Tensor, gh: torch.Tensor | None) -> torch.Tensor:
    """Eq. (7) for k clients: grad h_i + J_i^T grad f(y_i), (k, dim), with one y (d_g,)
    shared by all or one per client (k, d_g). A population's per-row lam takes y per row."""
    if problem.per_row and y.dim() == 1:
        y = y.unsqueeze(0).expand(jac.shape[0], -1)
    gf = (problem.grad_f(y) if y.dim() == 1 else problem.grad_f_rows(y)).to(jac.dtype)
    d = (jac * (gf.view(1, -1, 1) if gf.dim() == 1 else gf.unsqueeze(2))).sum(1)
    return d if gh is None else d + gh


def full_parts(task: Any, problem: LossComposition, w: torch.Tensor, whole: Any, with_grad: bool = True) -> dict[str, torch.Tensor]:
    """`global_composition.full_parts` for k clients on their whole data (`whole`, padded):
    {"g": (k, d_g), "h": (k,), "jac_g": (k, d_g, dim), "grad_h": (k, dim)} in float64, the
    last two only with `with_grad`. One forward pass (and one pullback per term) for the chunk."""
    if with_grad:
        g, jac = mean_and_grad(task, problem.g_of_loss, w, whole)
        h, gh = mean_and_grad(task, problem.h_of_loss, w, whole) if problem.has_h else (g.new_zeros(g.shape), torch.zeros_like(w))
        out = {"g": g.unsqueeze(1), "h": h, "jac_g": jac.unsqueeze(1), "grad_h": gh}
    else:
        with torch.no_grad():
            losses = real_rows(task.batched_sample_losses(w, whole), whole)
            g = masked_mean(problem.g_of_loss(losses), whole)
            h = masked_mean(problem.h_of_loss(losses), whole) if problem.has_h else g.new_zeros(g.shape)
        out = {"g": g.unsqueeze(1), "h": h}
    return {k: v.detach().to(torch.float64) for k, v in out.items()}
