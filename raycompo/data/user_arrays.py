"""A user's arrays (numpy or torch) checked and turned into tensors, with a fingerprint.

Features become float32 tensors of shape (samples, ...), labels int64 tensors of shape
(samples,); both are copies, so later changes to the caller's arrays do not reach a task.
Every problem is a ConfigError that names the array (`what`) and what is wrong with it.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from raycompo.errors import ConfigError
from raycompo.settings import require


def _numpy(a, what: str) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        return a.detach().cpu().numpy()
    try:
        return np.asarray(a)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{what} is not an array: {e}") from None


def as_features(x, what: str = "x") -> torch.Tensor:
    """Features as a float32 tensor (samples, ...): numeric, at least 2-D, all finite."""
    a = _numpy(x, what)
    require(
        a.dtype.kind in "biuf",
        f"{what} must hold numbers (got dtype {a.dtype}); convert it with .astype('float32')",
    )
    require(
        a.ndim >= 2,
        f"{what} must have shape (samples, features...), got shape {a.shape}; "
        "reshape a single feature with x.reshape(-1, 1)",
    )
    t = torch.tensor(a, dtype=torch.float32)
    bad = ~torch.isfinite(t).flatten(1).all(1)
    if bad.any():
        rows = bad.nonzero().flatten()
        raise ConfigError(
            f"{what}: {len(rows)} sample(s) hold NaN or infinite values (e.g. row {int(rows[0])}); "
            "clean or impute them first"
        )
    return t


def as_labels(y, what: str = "y") -> torch.Tensor:
    """Labels as an int64 tensor (samples,): a 1-D array of non-negative integers."""
    a = _numpy(y, what)
    require(
        a.dtype.kind in "biu",
        f"{what} must hold integer class labels 0..C-1 (got dtype {a.dtype}); "
        "convert it with .astype('int64'), or encode string classes first",
    )
    require(a.ndim == 1, f"{what} must be one-dimensional (samples,), got shape {a.shape}")
    t = torch.tensor(a.astype(np.int64))
    if len(t) and int(t.min()) < 0:
        raise ConfigError(f"{what}: a label is negative (the smallest is {int(t.min())}); labels must be 0..C-1")
    return t


def checked_pair(x, y, what: str, x_name: str, y_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(features, labels) of one data set `what` (e.g. 'the data (x, y)'), of equal lengths
    and not empty; `x_name` / `y_name` name each array as the caller knows it ('x',
    "client 3's features") in the messages."""
    xt, yt = as_features(x, x_name), as_labels(y, y_name)
    require(
        len(xt) == len(yt),
        f"{what} holds {len(xt)} samples of features but {len(yt)} labels; give one label per sample",
    )
    require(len(yt) > 0, f"{what} holds no samples")
    return xt, yt


def check_label_range(y: torch.Tensor, num_classes: int, what: str) -> None:
    """Every label below num_classes."""
    if len(y) and int(y.max()) >= num_classes:
        raise ConfigError(
            f"{what}: the largest label is {int(y.max())}, but num_classes is {num_classes}; "
            f"labels must be 0..{num_classes - 1} (raise num_classes or fix the labels)"
        )


def data_sha256(*tensors: torch.Tensor) -> str:
    """sha256 over the tensors in order: each one's dtype, shape and bytes (C order)."""
    h = hashlib.sha256()
    for t in tensors:
        a = np.ascontiguousarray(t.detach().cpu().numpy())
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()
