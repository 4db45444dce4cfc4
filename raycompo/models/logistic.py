"""Multinomial logistic regression (the model of ComFedL section 5.1)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from raycompo.models.row_products import add_bmm_, bmm_into


class LogisticRegression(nn.Module):
    """Multinomial logistic regression on flattened inputs, weights initialized to zero."""

    def __init__(self, in_features: int, num_classes: int):
        super().__init__()
        self.linear = nn.Linear(in_features, num_classes)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.flatten(1))

    @staticmethod
    def functional_forward(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """forward() as a function of the parameters (FlatModel uses it directly)."""
        return F.linear(x.flatten(1), params["linear.weight"], params["linear.bias"])

    @staticmethod
    def batched_forward(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """k clients' models at once: weight (k, C, d), bias (k, C), x (k, B, ...) ->
        logits (k, B, C). Computed as W x^T (k, C, B) with one `baddbmm`: that layout runs
        the forward and autograd's weight gradient (dlogits^T x) at 3-4x the speed of
        x W^T on small batches, and transposing the result is a view."""
        xt = x.flatten(2).transpose(1, 2)
        return torch.baddbmm(params["linear.bias"].unsqueeze(2), params["linear.weight"], xt).transpose(1, 2)

    pullback_adds = True
    """`batched_pullback`'s pull takes an `alpha`: the update of a local step fused into the
    weight gradient's product (models/flat.py `Pullback.add_`)."""

    @staticmethod
    def batched_pullback(params: dict[str, torch.Tensor], x: torch.Tensor):
        """(logits (k, C, B), pullback): pullback(g, out) writes the gradients of
        sum(g * logits) into `out` (views of the parameters' shapes, k first): the weight's
        is g x (one `bmm`), the bias's the sum of g over the batch. No autograd graph.
        pullback(g, out, alpha) adds alpha times them to `out` instead (which may be the
        parameters themselves): one `baddbmm_`, no gradient tensor."""
        xt = x.flatten(2)
        logits = torch.baddbmm(params["linear.bias"].unsqueeze(2), params["linear.weight"], xt.transpose(1, 2))

        def pullback(g: torch.Tensor, out: dict[str, torch.Tensor], alpha: float | None = None) -> None:
            if alpha is None:
                bmm_into(out["linear.weight"], g, xt)
                torch.sum(g, 2, out=out["linear.bias"])
            else:
                add_bmm_(out["linear.weight"], g, xt, alpha)
                out["linear.bias"].add_(g.sum(2), alpha=alpha)

        return logits, pullback
