"""KL-regularized distributionally robust learning as a composition (ComFedL eq. (6)).

    min_w max_{r in simplex} sum_i r_i f_i(w) - gamma * KL(r || 1/n)
  = min_w gamma log(1/n sum_i exp(f_i(w) / gamma))           (eq. 5)
  ~ min_w 1/n sum_i exp(f_i(w) / gamma)                       (eq. 6, log is monotone)

so the inner value is the client's mean loss f_i(w; B) in R^1 and the outer function is
g(y) = exp(y / gamma), deterministic and the same on every client. The gradient
estimate is u = exp(f_B(w)/gamma) / gamma * grad f_B(w) (ComFedL section 3).

`center` c (ComFedL's `normalizer="lse"`) optimizes eq. (5) itself: its gradient is
1/n sum_i exp((f_i(w) - c)/gamma) grad f_i(w) with c = gamma log(1/n sum_j exp(f_j(w)/gamma)),
so with c held fixed for a round the outer function is g_c(y) = gamma exp((y - c)/gamma)
(g_c' = exp((y - c)/gamma)): the same direction as eq. (6)'s, scaled by
gamma exp(-c/gamma), which keeps the weights in (0, n] instead of exp(f/gamma)/gamma.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class KLDRO:
    loss: Callable[[torch.Tensor, Any], torch.Tensor]
    """Mean loss of the model w on a batch: the paper's f^i(w; xi) averaged over B."""
    gamma: float
    """gamma > 0, weight of the KL penalty; small gamma approaches the worst client."""

    center: float | None = None
    """None: eq. (6), g(y) = exp(y / gamma). A value c: g_c(y) = gamma exp((y - c) / gamma),
    the gradient form of eq. (5) at the round's log-sum-exp value c."""

    needs_outer_batch = False

    def inner(self, w: torch.Tensor, batch: Any) -> torch.Tensor:
        return self.loss(w, batch).reshape(1)

    def outer(self, y: torch.Tensor, batch1: Any = None) -> torch.Tensor:
        if self.center is None:
            return torch.exp(y / self.gamma).sum()
        return (self.gamma * torch.exp((y - self.center) / self.gamma)).sum()

    def outer_grad(self, y: torch.Tensor, batch1: Any = None) -> torch.Tensor:
        """grad g(y) by the operations autograd runs backward through `outer` (sum: ones;
        exp: grad * exp(.); the scalar product and quotient: * gamma, / gamma), in the same
        order: the same bits as autograd, without g's graph."""
        if self.center is None:
            return torch.exp(y / self.gamma) / self.gamma
        return (self.gamma * torch.exp((y - self.center) / self.gamma)) / self.gamma

    def robust_value(self, w: torch.Tensor, batch: Any, batch1: Any = None) -> torch.Tensor:
        """f_i(w; B), the value inside the exponential (a scalar)."""
        return self.loss(w, batch).reshape(())
