"""A torch module seen as a function of one flat parameter vector.

The federation exchanges and averages flat vectors `w in R^d`; `forward(w, x)` runs the
module with `torch.func.functional_call`, so gradients, vector-Jacobian products and
Hessian-vector products with respect to `w` come from torch.func / autograd.

k models at once (`batched`, what vectorized cohorts run): a module's own
`batched_forward` where it has one (logistic regression, MLP); otherwise, for any module
whose state is parameters only (no buffers: batch norm with `track_running_stats=False`
qualifies, e.g. CNN4, ResNet-20, a user's conv net), `functional_call` under
`torch.func.vmap` over the clients' rows of w and their batches (`vmapped`). Under vmap a
batch-norm layer's statistics are each client's own (the vmapped dimension is the client;
the batch dimension inside it). Padded rows (a client with fewer real rows than the
chunk's batch, `Batch.mask`) would enter those statistics, so the vmap path takes each
client's real row count (`count`) and runs clients of equal counts as one vmap over their
real rows only (one group in the common case, every client with n_i >= the batch size);
its padded output rows are 0.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call, vmap


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
    def own_batched(self) -> bool:
        """Whether the module computes k models at once itself (`batched_forward`), with
        outputs per sample (no batch statistics): what a batched evaluation over several
        clients' data concatenated needs."""
        return getattr(self.module, "batched_forward", None) is not None and not self.buffers

    @property
    def vmapped(self) -> bool:
        """Whether k models run through the generic path: `functional_call` under
        `torch.func.vmap` (a module with no `batched_forward` and no buffers)."""
        return not self.own_batched and not self.buffers

    @property
    def batchable(self) -> bool:
        """Whether k models can run at once (`batched`), which the vectorized cohorts need
        (raycompo/configuration/vectorize.py): every module whose state is parameters only."""
        return not self.buffers

    def why_not_batchable(self) -> str | None:
        """Why `batched` cannot run this module (None: it can), completing "the model ... "."""
        if not self.buffers:
            return None
        names = ", ".join(list(self.buffers)[:3]) + (", ..." if len(self.buffers) > 3 else "")
        return (f"has buffers ({names}: e.g. batch norm's running statistics), which k clients' models "
                "cannot share; batch norm with track_running_stats=False has none")

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

    def batched(self, w: torch.Tensor, x: torch.Tensor, count: torch.Tensor | None = None) -> torch.Tensor:
        """k models on k batches: w (k, dim), x (k, B, ...) -> outputs (k, B, ...); client
        i's rows are `forward(w[i], x[i])` up to rounding. Parameters are views of w (each
        block of a row is contiguous), so autograd's gradient lands in w's layout. `count`
        (k,), each client's real rows (the first ones): the vmap path runs client i on
        x[i, :count_i] only (see the module doc), its other output rows 0; a module's own
        `batched_forward` has per-sample outputs and ignores it."""
        if self.own_batched:
            return self.module.batched_forward(self._rows(w), x)
        if self.buffers:
            raise ValueError(f"{type(self.module).__name__} {self.why_not_batchable()}")
        return self._vmap(w, x, count)

    def activation_numel(self, sample: torch.Tensor) -> int:
        """Values of every submodule's output per sample of the shape of `sample` (one
        input, without the batch dimension): about what a step of the vmap path keeps for its
        backward pass per sample, which sizes its chunks (engine/batched.py). Measured once
        per shape with forward hooks on a two-sample forward (batch norm needs more than one),
        without gradients."""
        key = tuple(sample.shape)
        cache = self.__dict__.setdefault("_activations", {})
        if key not in cache:
            total = [0]

            def hook(_module, _inputs, output):
                if isinstance(output, torch.Tensor):
                    total[0] += output.numel()

            handles = [m.register_forward_hook(hook) for m in self.module.modules() if m is not self.module]
            try:
                with torch.no_grad():
                    self.module(torch.zeros((2, *key), dtype=sample.dtype, device=next(self.module.parameters()).device))
            finally:
                for h in handles:
                    h.remove()
            cache[key] = total[0] // 2
        return cache[key]

    def _one(self, params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return functional_call(self.module, params, (x,))

    def _vmap(self, w: torch.Tensor, x: torch.Tensor, count: torch.Tensor | None) -> torch.Tensor:
        """`batched` through functional_call under vmap, clients grouped by real row count."""
        run = vmap(self._one)
        width = x.shape[1]
        counts = None if count is None else [int(c) for c in count.tolist()]
        if counts is None or all(c == width for c in counts):
            return run(self._rows(w), x)
        groups: dict[int, list[int]] = {}
        for i, c in enumerate(counts):
            if c > 0:  # a client with no rows keeps 0 outputs (a batch norm of nothing is undefined)
                groups.setdefault(c, []).append(i)
        pieces = {}
        for c, ids in groups.items():
            idx = torch.tensor(ids, device=w.device)
            pieces[c] = (idx, run(self._rows(w.index_select(0, idx)), x.index_select(0, idx)[:, :c]))
        some = next(iter(pieces.values()))[1]
        out = some.new_zeros((x.shape[0], width, *some.shape[2:]))
        for c, (idx, y) in pieces.items():
            out[idx, :c] = y  # an indexed write: autograd routes each group's gradient back
        return out

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
