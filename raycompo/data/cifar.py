"""CIFAR-10 / CIFAR-100 through torchvision (python-pickle batches).

Images come back as float32 (N, 3, 32, 32) in [0, 1] (normalization is the task's
choice); labels as int64.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from raycompo.data.store import load_or_download

Arrays = tuple[torch.Tensor, torch.Tensor]


def _to_tensors(data: np.ndarray, targets) -> Arrays:
    x = torch.as_tensor(np.asarray(data), dtype=torch.float32).permute(0, 3, 1, 2).contiguous() / 255.0
    return x, torch.as_tensor(np.asarray(targets), dtype=torch.int64)


def load_cifar(num_classes: int = 10, data_dir: str | Path | None = None, offline: str | None = None) -> tuple[Arrays, Arrays]:
    """(train, test) of CIFAR-10 or CIFAR-100 from `data_dir` (downloaded if absent)."""
    from torchvision.datasets import CIFAR10, CIFAR100

    cls = {10: CIFAR10, 100: CIFAR100}[num_classes]

    def make(root: str, download: bool):
        return cls(root, train=True, download=download), cls(root, train=False, download=download)

    kwargs = {"offline": offline} if offline else {}
    train, test = load_or_download(f"CIFAR-{num_classes}", data_dir, make, **kwargs)
    return _to_tensors(train.data, train.targets), _to_tensors(test.data, test.targets)
