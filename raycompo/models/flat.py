"""A torch module seen as a function of one flat parameter vector.

The federation exchanges and averages flat vectors `w in R^d`; `forward(w, x)` runs the
module with `torch.func.functional_call`, so gradients, vector-Jacobian products and
Hessian-vector products with respect to `w` come from torch.func / autograd.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call


class FlatModel:
    """`module` as a function of a flat vector w: `model(w, x)` is the module's forward with
    its parameters taken from w (in `named_parameters` order); `flatten()` gives the
    module's own parameters as such a vector. A task's `self.model` is one."""

    def __init__(self, module: nn.Module):
        self.module = module
        params = dict(module.named_parameters())
        self.names = list(params)
        self.shapes = [p.shape for p in params.values()]
        self.numels = [p.numel() for p in params.values()]
        self.dim = sum(self.numels)
        # Buffers (e.g. batch-norm statistics) are not trained or averaged.
        self.buffers = dict(module.named_buffers())

    def flatten(self, module: nn.Module | None = None) -> torch.Tensor:
        m = module or self.module
        return torch.cat([p.detach().reshape(-1) for p in m.parameters()]).clone()

    def unflatten(self, w: torch.Tensor) -> dict[str, torch.Tensor]:
        chunks = w.split_with_sizes(self.numels)  # what torch.split(w, list) calls, minus its Python wrapper
        return {n: c.view(s) for n, c, s in zip(self.names, chunks, self.shapes)}

    def forward(self, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        params = self.unflatten(w)
        direct = getattr(self.module, "functional_forward", None)
        if direct is not None:  # a model's own functional form skips functional_call's swap
            return direct(params, x)
        if self.buffers:
            params = {**params, **{k: b.to(x.device) for k, b in self.buffers.items()}}
        return functional_call(self.module, params, (x,))

    __call__ = forward

    @property
    def batchable(self) -> bool:
        """Whether the module computes k models at once (`batched_forward`), which the
        vectorized cohorts need (raycompo/configuration/vectorize.py)."""
        return getattr(self.module, "batched_forward", None) is not None and not self.buffers

    def _rows(self, w: torch.Tensor) -> dict[str, torch.Tensor]:
        k = w.shape[0]
        chunks = w.split_with_sizes(self.numels, dim=1)
        return {n: c.view(k, *s) for n, c, s in zip(self.names, chunks, self.shapes)}

    @property
    def has_pullback(self) -> bool:
        """Whether the module backpropagates k models by hand (`batched_pullback`)."""
        return getattr(self.module, "batched_pullback", None) is not None and not self.buffers

    def batched_pullback(self, w: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, Pullback]:
        """(outputs (k, out, B), pullback): pullback(g) is the (k, dim) gradient of
        sum(g * outputs) with respect to w, without autograd (the module's own
        `batched_pullback`; each parameter's block written in place); `pullback.add_(g,
        alpha)` adds alpha times that gradient to w itself, in place."""
        outputs, pull = self.module.batched_pullback(self._rows(w), x)
        return outputs, Pullback(self, w, pull, getattr(self.module, "pullback_adds", False))

    def batched(self, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """k models on k batches: w (k, dim), x (k, B, ...) -> outputs (k, B, ...); client
        i's rows are `forward(w[i], x[i])` up to rounding. Parameters are views of w (each
        block of a row is contiguous), so autograd's gradient lands in w's layout."""
        return self.module.batched_forward(self._rows(w), x)

    def to(self, device: torch.device | str) -> FlatModel:
        self.module.to(device)
        self.buffers = dict(self.module.named_buffers())
        return self


class Pullback:
    """The backward pass of `FlatModel.batched_pullback` at the rows w it ran at."""

    def __init__(self, model: FlatModel, w: torch.Tensor, pull, adds: bool):
        self.model, self.w, self.pull, self.adds = model, w, pull, adds

    def __call__(self, g: torch.Tensor) -> torch.Tensor:
        """The (k, dim) gradient of sum(g * outputs) with respect to w, in a new tensor."""
        grad = torch.empty(self.w.shape, dtype=self.w.dtype, device=self.w.device)
        self.pull(g, self.model._rows(grad))
        return grad

    def add_(self, g: torch.Tensor, alpha: float) -> None:
        """w += alpha * gradient, in place: a local step's update with alpha = -lr. Fused
        into the gradient's products where the module can (`pullback_adds`: its pull takes
        an `alpha` and adds into the parameters it reads, e.g. one `baddbmm_`); otherwise
        the gradient, then one in-place add."""
        if self.adds:
            self.pull(g, self.model._rows(self.w), alpha)
        else:
            self.w.add_(self(g), alpha=alpha)
