"""Oracle calls: each evaluation of a task's function, gradient, Jacobian or Hessian-vector
product on one data point, counted where it is evaluated (issue 32).

The stochastic oracles of a task are its per-sample functions: `Task.loss`,
`Task.sample_losses` and their batched forms, and a global composition's `g_samples` /
`h_samples`. Each is wrapped (`Task.__init_subclass__`, `GlobalComposition.__init_subclass__`)
by `oracle`, which, while a host meters a client phase (`metering`), counts:

* a forward pass on n data points: n calls (n function values);
* a backward pass through it (a gradient, or a Jacobian of all d_g rows at once): n calls.
  A stochastic gradient by backpropagation is therefore two calls per point, its forward
  and its backward (the forward's value is computed whether or not the caller uses it);
* a second backward pass through that gradient (a Hessian-vector product, second-order
  MAML): n calls.

The backward passes are counted by an identity autograd node on the model input w (see
`_Counted`), so `torch.autograd.grad`, `torch.func.grad` / `vjp` / `jacrev` and their
compositions are counted the same way, and the values computed never change. A task's own
batched gradient methods (`batched_sample_grad`, `batched_loss_grad`,
`batched_loss_step_`, which may backpropagate by hand) count forward and backward, 2n per
client row. Calls nested inside an oracle call (a task's `loss` built on its
`sample_losses`) are not counted again.

Outside a metered phase (evaluation, global metrics, benchmarks) nothing is counted.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

_local = threading.local()


class OracleMeter:
    """The oracle calls of the member a host runs (`rows` None) or of each of the k rows of
    a batched chunk (`rows` k)."""

    def __init__(self, rows: int | None = None):
        self.rows = rows
        self.calls = np.zeros(1 if rows is None else rows, dtype=np.int64)
        """Calls so far, one entry per row (one entry for a single member); `per_row` as ints."""
        self.depth = 0
        """Oracle calls under way (a nested call is not counted again)."""
        self.row: int | None = None
        """In a chunk, the row a per-client call inside it is counted on (`on_row`)."""

    def add(self, n: int | Sequence[int] | np.ndarray) -> None:
        """Add n calls: an int for a single member (in a chunk: spread over its rows, the
        remainder on the first ones), or one count per row of a chunk (added at once: no
        Python work per row)."""
        if isinstance(n, int):
            if self.rows is None or self.rows == 1:
                self.calls[0] += n
            elif self.row is not None:
                self.calls[self.row] += n
            else:
                each, rest = divmod(n, self.rows)
                self.calls += each
                self.calls[:rest] += 1
            return
        counts = np.asarray(n if isinstance(n, (list, np.ndarray)) else list(n), dtype=np.int64)
        if self.rows is None:
            self.calls[0] += counts.sum()
        else:
            self.calls[:len(counts)] += counts[: self.rows]

    def per_row(self) -> list[int]:
        """The calls of each row (of the single member: one entry), as Python ints."""
        return self.calls.tolist()

    @property
    def total(self) -> int:
        return int(self.calls.sum())


def current() -> OracleMeter | None:
    """The meter of the client phase running in this thread (None: nothing is counted)."""
    return getattr(_local, "meter", None)


@contextmanager
def metering(rows: int | None = None) -> Iterator[OracleMeter]:
    """Count the oracle calls made inside the block (a host runs one member's phase, or one
    batched chunk of `rows` clients, inside it)."""
    previous = current()
    meter = OracleMeter(rows)
    _local.meter = meter
    try:
        yield meter
    finally:
        _local.meter = previous


@contextmanager
def on_row(i: int) -> Iterator[None]:
    """Inside a batched phase, count the per-client oracle calls of the block on row i of the
    chunk (e.g. q-FedAvg's F_k(w) on each client's full data)."""
    meter = current()
    if meter is None:
        yield
        return
    previous, meter.row = meter.row, i
    try:
        yield
    finally:
        meter.row = previous


@contextmanager
def uncounted() -> Iterator[None]:
    """Oracle calls inside the block are not counted (a batched computation that counts its
    rows itself with `add_rows`, e.g. under `torch.func.vmap`, where a call sees one row)."""
    meter = current()
    if meter is None:
        yield
        return
    meter.depth += 1
    try:
        yield
    finally:
        meter.depth -= 1


def add_rows(counts: Sequence[int] | np.ndarray) -> None:
    """Add oracle calls per row of the chunk being metered (nothing outside a metered phase)."""
    meter = current()
    if meter is not None:
        meter.add(counts if isinstance(counts, np.ndarray) else [int(c) for c in counts])


def points(batch: Any) -> int | list[int]:
    """Data points of a batch: per client row for a padded batch of k clients (its `rows`
    or `count`), else the length of its first tensor ((x, y) pairs, a tensor), else 1."""
    rows = getattr(batch, "rows", None)
    if rows is not None:
        return list(map(int, rows))
    count = getattr(batch, "count", None)
    if isinstance(count, torch.Tensor):
        return [int(c) for c in count.tolist()]
    if isinstance(batch, torch.Tensor):
        return len(batch) if batch.dim() else 1
    if isinstance(batch, (tuple, list)):
        for item in batch:
            if isinstance(item, torch.Tensor):
                return len(item) if item.dim() else 1
    return 1


class _Token:
    """One oracle call's count, shared by its backward nodes: each order of derivative is
    counted once however many times autograd or torch.func passes through its node."""

    __slots__ = ("meter", "n", "seen")

    def __init__(self, meter: OracleMeter, n: int | list[int]):
        self.meter, self.n, self.seen = meter, n, set()


class _Counted(torch.autograd.Function):
    """Identity on the model input; its backward counts a gradient (order 1) and passes the
    gradient through a node of order 2, whose backward counts a Hessian-vector product."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, token: _Token, order: int) -> torch.Tensor:  # type: ignore[override]
        return x.view_as(x)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        ctx.token, ctx.order = inputs[1], inputs[2]

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple:  # type: ignore[override]
        token = ctx.token
        if ctx.order not in token.seen:
            token.seen.add(ctx.order)
            token.meter.add(token.n)
        return (_Counted.apply(g, token, ctx.order + 1) if ctx.order < 2 else g), None, None


def oracle(fn: Callable[..., Any], gradient: bool = False) -> Callable[..., Any]:
    """Wrap an oracle method `fn(self, w, batch, ...)`: counted as the module docstring says.
    `gradient`: the method returns gradients itself (forward and backward, 2n per point)."""
    if getattr(fn, "__oracle__", False):
        return fn

    @functools.wraps(fn)
    def counted(self: Any, w: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
        meter = current()
        if meter is None or meter.depth:
            return fn(self, w, batch, *args, **kwargs)
        n = points(batch)
        meter.add(n)
        if gradient:
            meter.add(n)
        elif isinstance(w, torch.Tensor) and torch.is_grad_enabled() and w.requires_grad:
            w = _Counted.apply(w, _Token(meter, n), 1)
        meter.depth += 1
        try:
            return fn(self, w, batch, *args, **kwargs)
        finally:
            meter.depth -= 1

    counted.__oracle__ = True  # type: ignore[attr-defined]
    return counted


def wrap_oracles(cls: type, names: Sequence[str], gradients: Sequence[str] = ()) -> None:
    """Wrap the oracle methods `names` (and the gradient-returning `gradients`) that `cls`
    defines itself (inherited ones are wrapped where they are defined)."""
    for name in (*names, *gradients):
        fn = vars(cls).get(name)
        if callable(fn) and not getattr(fn, "__oracle__", False):
            setattr(cls, name, oracle(fn, gradient=name in gradients))
