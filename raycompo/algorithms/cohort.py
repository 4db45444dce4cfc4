"""A cohort's clients as one batched computation (vectorized cohorts, issue 18).

A batched client phase, declared with `@batched_phase("name")`, runs a chunk of k clients
of a host at once: `(cb, states, payload) -> (contributions, new_states)`, where `cb` is
a `CohortBatch`, `states` the k clients' persistent states (a list, in `cb.ids` order),
every contribution value a tensor whose first dimension is the client (k, ...) or a list
of k Python numbers (where the per-client phase returns a number), and `new_states` a
list of k states. It must compute, client by client, what the per-client
phase of the same name computes:

* models are stacked rows, W (k, dim); the task's `batched_losses(W, batch)` gives the
  k mean losses and one backward pass gives the k gradients (the clients are independent,
  so the gradient of the sum of their losses is the stack of their gradients);
* mini-batches are drawn client by client from the very generators the per-client path
  uses (`ClientData.batch(c.rng(t, stream), b)`: the same indices), then gathered into one
  padded (k, B, ...) buffer with a 0/1 mask for clients with fewer than b samples.

Why not bit-exact: a batched matrix product and a masked mean round differently from k
separate ones (float32, about 1e-7 relative per step); results agree with the per-client
path to 1e-5 (tests/test_vectorize.py checks several rounds of every batched algorithm).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from raycompo.algorithms.base import ClientContext, State
from raycompo.tasks.base import ClientData


@dataclass
class Batch:
    """k clients' mini-batches, padded to the largest: x (k, B, ...), y (k, B), mask (k, B)
    (1 for a client's real rows, 0 for padding) and count (k,) (real rows per client)."""

    x: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor
    count: torch.Tensor
    picks: list[torch.Tensor | None] | None = None
    """Each client's drawn sample indices, in batch order (None: all its samples, in order)."""


def picks_to(picks: list[torch.Tensor | None], device: torch.device) -> list[torch.Tensor | None]:
    """Drawn indices (CPU tensors of equal length; None: a client's whole data) on the
    device of the clients' data, in one copy for the whole chunk: on a GPU, one
    host-to-device transfer a step instead of one per client. On the CPU, as they are."""
    drawn = [p for p in picks if p is not None]
    if not drawn or drawn[0].device == device:
        return picks
    moved = iter(torch.stack(drawn).to(device).unbind(0))
    return [None if p is None else next(moved) for p in picks]


BatchedFn = TypeVar("BatchedFn", bound=Callable[..., Any])


def batched_phase(name: str) -> Callable[[BatchedFn], BatchedFn]:
    """Declare a method as the batched form of client phase `name` (see the module doc).
    A batched phase is not inherited: a subclass that changes what a phase computes must
    not run its parent's batched form, so it declares its own (or runs per client)."""

    def mark(fn: BatchedFn) -> BatchedFn:
        fn.__batched_phase__ = name  # type: ignore[attr-defined]
        return fn

    return mark


class CohortBatch:
    """What a batched phase sees: k clients' contexts (their data and seeded streams), the
    task, and reusable buffers for their mini-batches."""

    def __init__(self, clients: list[ClientContext], task: Any, device: torch.device):
        self.clients = clients
        self.task = task
        self.device = device
        self.ids = [c.client_id for c in clients]
        self.k = len(clients)
        self._buffers: dict[tuple, tuple[Batch, list[torch.Tensor], list[torch.Tensor]]] = {}
        self._rows: dict[tuple, list[int]] = {}

    @property
    def data(self) -> list[ClientData]:
        return [c.data for c in self.clients]

    def num_samples(self) -> torch.Tensor:
        """(k,) float64: each client's number of training samples n_i."""
        return torch.tensor([float(c.data.num_samples) for c in self.clients], dtype=torch.float64, device=self.device)

    def batch(self, step: int, size: int | None, stream: int = 0) -> Batch:
        """Each client's mini-batch of local step `step`: the samples
        `ClientData.batch(c.rng(step, stream), size)` draws (all of them, in order, when
        size is None or >= n_i), padded. The returned tensors are this stream's buffers:
        valid until the next draw on the same stream."""
        picks: list[torch.Tensor | None] = []
        rows = []
        for c in self.clients:
            n = len(c.data.y)
            if size is None or size >= n:
                picks.append(None)  # the full local data, in order (no draw: as `_sample`)
                rows.append(n)
            else:
                picks.append(torch.randperm(n, generator=c.rng(step, stream))[:size])
                rows.append(size)
        width = max(rows)
        buf, xs, ys = self._buffer(stream, width)
        on_device = picks_to(picks, self.clients[0].data.x.device)
        for c, p, n, bx, by in zip(self.clients, on_device, rows, xs, ys):
            x, y = c.data.x, c.data.y
            if n < width:
                bx, by = bx[:n], by[:n]
            if p is None:
                bx.copy_(x)
                by.copy_(y)
            else:
                torch.index_select(x, 0, p, out=bx)
                torch.index_select(y, 0, p, out=by)
        buf.picks = picks
        for c, n in zip(self.clients, rows):  # samples read, for the engine's ledger
            c.data.samples_read += n
        if self._rows.get((stream, width)) != rows:  # mark each client's real rows
            self._rows[(stream, width)] = rows
            buf.count.copy_(torch.tensor(rows, dtype=buf.count.dtype))
            buf.mask.copy_(torch.arange(width, device=self.device).unsqueeze(0) < buf.count.unsqueeze(1))
        return buf

    def _buffer(self, stream: int, width: int) -> tuple[Batch, list[torch.Tensor], list[torch.Tensor]]:
        """The reused batch of (stream, width), and each client's row views of x and y."""
        key = (stream, width)
        found = self._buffers.get(key)
        if found is None:
            x0, y0 = self.clients[0].data.x, self.clients[0].data.y
            x = torch.zeros((self.k, width, *x0.shape[1:]), dtype=x0.dtype, device=self.device)
            y = torch.zeros((self.k, width), dtype=y0.dtype, device=self.device)
            mask = torch.ones((self.k, width), dtype=x0.dtype if x0.is_floating_point() else torch.float32, device=self.device)
            count = torch.full((self.k,), float(width), dtype=mask.dtype, device=self.device)
            buf = Batch(x, y, mask, count)
            found = self._buffers[key] = (buf, list(x.unbind(0)), list(y.unbind(0)))
        return found

    def losses(self, w: torch.Tensor, batch: Batch) -> torch.Tensor:
        """(k,): each client's mean loss of its row of w on its batch."""
        return self.task.batched_losses(w, batch)

    def loss_grad(self, w: torch.Tensor, batch: Batch, scale: Callable[[torch.Tensor], torch.Tensor] | None = None):
        """(gradients (k, dim), losses (k,)): each client's gradient of its mean loss at its
        row of w, multiplied by `scale(losses)` (k,) when given (a composition's outer
        derivative at the inner value, e.g. ComFedL's exp(f/gamma)/gamma), as the
        per-client backward pass with `grad_outputs` does."""
        return self.task.batched_loss_grad(w, batch, scale)

    def local_sgd(self, w: torch.Tensor, steps: int, lr: float, batch_size: int | None,
                  direction: Callable[[torch.Tensor, Batch, int], torch.Tensor], snapshot_at: int | None = None,
                  stream: int = 0):
        """`algorithms.base.local_sgd` for k clients: w (k, dim) <- w - lr * direction(w, batch, t)."""
        snap = w if snapshot_at == 0 else None
        for t in range(steps):
            w = w - lr * direction(w, self.batch(t, batch_size, stream), t)
            if snapshot_at is not None and t + 1 == snapshot_at:
                snap = w
        return (w, snap) if snapshot_at is not None else w

    def broadcast(self, w: torch.Tensor) -> torch.Tensor:
        """One model (dim,) as k rows (a view, no copy)."""
        return w.unsqueeze(0).expand(self.k, -1)

    @staticmethod
    def rows(t: torch.Tensor) -> list[torch.Tensor]:
        """A stacked (k, ...) tensor as k tensors of their own (a client's state must not
        keep the whole chunk's storage alive)."""
        return [r.clone() for r in t]

    def stack_state(self, states: list[State], key: str, default: torch.Tensor) -> torch.Tensor:
        """(k, ...): each client's `state[key]`, or `default` where it has none yet."""
        return torch.stack([s.get(key, default) for s in states])
