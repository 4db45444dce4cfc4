"""ResNet-20 for CIFAR (He et al. 2016, section 4.2): a 3x3 conv with 16 filters, three
stages of 3 basic blocks (16, 32, 64 filters; stride 2 at the start of stages 2 and 3),
global average pooling and a linear classifier; 0.27M parameters. Shortcuts are the
paper's option A (identity; on a stride-2 block, subsample by 2 and zero-pad channels),
so they have no parameters.

Batch norm uses the statistics of the batch at hand, in training and in evaluation
(`track_running_stats=False`): the model is then a function of its flat parameter vector
alone (FlatModel, what the federation averages); there are no running-statistics buffers
to average or to keep per client. Evaluation therefore normalizes each evaluation chunk
by its own statistics (the tasks evaluate in chunks of a few hundred images).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _bn(c: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(c, track_running_stats=False)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = _bn(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = _bn(cout)
        self.pad = cout - cin
        self.stride = stride

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1 and self.pad == 0:
            return x
        x = x[:, :, :: self.stride, :: self.stride]
        return F.pad(x, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet20(nn.Module):
    def __init__(self, num_classes: int = 10, in_channels: int = 3, blocks_per_stage: int = 3, width: int = 16):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, width, 3, padding=1, bias=False)
        self.bn = _bn(width)
        layers, cin = [], width
        for stage, cout in enumerate((width, 2 * width, 4 * width)):
            for b in range(blocks_per_stage):
                layers.append(BasicBlock(cin, cout, 2 if stage > 0 and b == 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn(self.conv(x)))
        out = self.layers(out)
        return self.fc(out.mean(dim=(2, 3)))
