"""The model and the loss of a task built from a user's data (`task_from_arrays`,
`task_from_clients`), and their checks on a small batch of that data.

Model: a built-in name from MODELS, called as MODELS[name](in_features, num_classes), or
a callable with no arguments returning a fresh `torch.nn.Module` (e.g.
`lambda: MyNet(784, 10)`). It is called in every process that builds the task, after the
run seeds torch, so the initial weights follow the run's seed; a module instance is
refused for that reason. The module maps a batch (N, ...) to logits (N, num_classes).

Loss: None is cross-entropy. A callable `loss(logits, y)` returns the mean loss (a scalar
tensor, differentiable by torch.func). If it takes a `reduction` keyword (as
`torch.nn.functional.cross_entropy` or `nll_loss` do), `loss(logits, y, reduction="none")`
gives the per-sample losses and the task keeps the 'sample_losses' capability; otherwise
the task drops it (algorithms that need per-sample losses then refuse the task).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch
from torch import nn

from raycompo.errors import ConfigError
from raycompo.models import MLP, LogisticRegression
from raycompo.settings import require

MODELS: dict[str, Callable[[int, int], nn.Module]] = {"logistic": LogisticRegression, "mlp": MLP}
"""Built-in model names -> constructors called with (in_features, num_classes)."""


def build_model(model: str | Callable[[], nn.Module], in_features: int, num_classes: int) -> nn.Module:
    """A fresh module from a built-in name or a no-argument factory."""
    if isinstance(model, str):
        if model not in MODELS:
            raise ConfigError(
                f"unknown model {model!r}; choose one of: {', '.join(MODELS)}, "
                "or pass a function that returns a torch.nn.Module"
            )
        return MODELS[model](in_features, num_classes)
    module = model()
    require(
        isinstance(module, nn.Module),
        f"the model factory returned {type(module).__name__}, not a torch.nn.Module",
    )
    return module


def check_model(model, x: torch.Tensor, num_classes: int) -> nn.Module:
    """Build the model once and check that it maps the batch x to (len(x), num_classes)
    logits; returns the module."""
    if isinstance(model, nn.Module):
        raise ConfigError(
            "model must be a built-in name or a function that builds the module "
            f"(e.g. lambda: {type(model).__name__}(...)), not a module instance: every "
            "process builds its own, initialized from the run's seed"
        )
    if not isinstance(model, str) and not callable(model):
        raise ConfigError(f"model must be one of {', '.join(MODELS)} or a callable, got {model!r}")
    module = build_model(model, int(x[0].numel()), num_classes)
    try:
        with torch.no_grad():
            out = module(x)
    except Exception as e:  # the user's module: any failure is a configuration problem
        raise ConfigError(f"the model fails on a batch of the data (shape {tuple(x.shape)}): {e}") from None
    require(
        isinstance(out, torch.Tensor) and tuple(out.shape) == (len(x), num_classes),
        f"the model must return logits of shape (batch, num_classes) = {(len(x), num_classes)}, "
        f"got {tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}",
    )
    return module


def reduction_aware(loss: Callable) -> bool:
    """Whether `loss` accepts a `reduction` keyword (or any keyword)."""
    try:
        params = inspect.signature(loss).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "reduction" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def check_loss(loss: Callable | None, logits: torch.Tensor, y: torch.Tensor) -> bool:
    """Check a custom loss on a batch: a finite scalar, and, if it is reduction-aware, one
    loss per sample with reduction='none'. Returns whether it is reduction-aware."""
    if loss is None:
        return True
    require(callable(loss), f"loss must be a callable loss(logits, y), got {loss!r}")
    try:
        value = loss(logits, y)
    except Exception as e:  # the user's function
        raise ConfigError(f"the loss fails on a batch (logits {tuple(logits.shape)}, labels {tuple(y.shape)}): {e}") from None
    require(
        isinstance(value, torch.Tensor) and value.dim() == 0,
        f"the loss must return the batch's mean loss as a scalar tensor, got "
        f"{tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__}",
    )
    if not reduction_aware(loss):
        return False
    per = loss(logits, y, reduction="none")
    require(
        isinstance(per, torch.Tensor) and tuple(per.shape) == (len(y),),
        f"loss(logits, y, reduction='none') must return one loss per sample, shape {(len(y),)}",
    )
    return True
