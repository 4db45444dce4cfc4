"""A small multilayer perceptron: flatten, one hidden layer with ReLU, linear classifier."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from raycompo.models.row_products import add_bmm_, bmm_into


class MLP(nn.Module):
    """x (N, ...) -> logits (N, num_classes) through `hidden` ReLU units (PyTorch's default
    initialization, seeded by the run through `Task.init_weights`)."""

    def __init__(self, in_features: int, num_classes: int, hidden: int = 64):
        super().__init__()
        self.hidden = nn.Linear(in_features, hidden)
        self.out = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(F.relu(self.hidden(x.flatten(1))))

    @staticmethod
    def functional_forward(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """forward() as a function of the parameters (FlatModel uses it directly)."""
        h = F.relu(F.linear(x.flatten(1), params["hidden.weight"], params["hidden.bias"]))
        return F.linear(h, params["out.weight"], params["out.bias"])

    @staticmethod
    def batched_forward(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """k clients' models at once: x (k, B, ...) -> logits (k, B, C), each layer one
        `baddbmm` in the (k, out, B) layout (see LogisticRegression.batched_forward)."""
        xt = x.flatten(2).transpose(1, 2)
        h = F.relu(torch.baddbmm(params["hidden.bias"].unsqueeze(2), params["hidden.weight"], xt))
        return torch.baddbmm(params["out.bias"].unsqueeze(2), params["out.weight"], h).transpose(1, 2)

    pullback_adds = True
    """`batched_pullback`'s pull takes an `alpha` (models/flat.py `Pullback.add_`)."""

    @staticmethod
    def batched_pullback(params: dict[str, torch.Tensor], x: torch.Tensor):
        """(logits (k, C, B), pullback) as LogisticRegression.batched_pullback, backpropagating
        by hand through the output layer, the ReLU and the hidden layer."""
        xt = x.flatten(2)
        h = F.relu(torch.baddbmm(params["hidden.bias"].unsqueeze(2), params["hidden.weight"], xt.transpose(1, 2)))
        logits = torch.baddbmm(params["out.bias"].unsqueeze(2), params["out.weight"], h)

        def pullback(g: torch.Tensor, out: dict[str, torch.Tensor], alpha: float | None = None) -> None:
            gh = torch.bmm(params["out.weight"].transpose(1, 2), g) * (h > 0)  # through the ReLU (read first)
            if alpha is None:
                bmm_into(out["out.weight"], g, h.transpose(1, 2))
                torch.sum(g, 2, out=out["out.bias"])
                bmm_into(out["hidden.weight"], gh, xt)
                torch.sum(gh, 2, out=out["hidden.bias"])
            else:  # out may be the parameters: every one was read above
                add_bmm_(out["out.weight"], g, h.transpose(1, 2), alpha)
                out["out.bias"].add_(g.sum(2), alpha=alpha)
                add_bmm_(out["hidden.weight"], gh, xt, alpha)
                out["hidden.bias"].add_(gh.sum(2), alpha=alpha)

        return logits, pullback
