"""The 4-layer CNN of Finn et al. (2017): four blocks of [3x3 conv with `hidden` filters,
batch norm, ReLU, 2x2 max-pool], then a linear classifier.

Batch norm uses the statistics of the batch at hand (no running statistics), as in
MAML, so the whole model is a function of its flat parameter vector.
"""

from __future__ import annotations

import torch
from torch import nn


def conv_block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1),
        nn.BatchNorm2d(cout, track_running_stats=False),
        nn.ReLU(),
        nn.MaxPool2d(2),
    )


class CNN4(nn.Module):
    def __init__(self, in_channels: int, num_classes: int, image_size: int = 28, hidden: int = 64):
        super().__init__()
        self.features = nn.Sequential(
            conv_block(in_channels, hidden), conv_block(hidden, hidden), conv_block(hidden, hidden), conv_block(hidden, hidden)
        )
        side = image_size
        for _ in range(4):
            side //= 2
        self.classifier = nn.Linear(hidden * max(side, 1) ** 2, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))
