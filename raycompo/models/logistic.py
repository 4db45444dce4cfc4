"""Multinomial logistic regression (the model of ComFedL section 5.1)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


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
