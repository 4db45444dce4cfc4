"""The host's stacked data slab (issue 41): the materialized clients' training samples as
rows of one `DataSlab` (raycompo/tasks/slab.py), so that a batched chunk gathers all its
clients' mini-batches with one `index_select` of x and one of y, and nothing is copied per
round.

A client placed in the slab gets its rows appended after the last ones handed out; its
`ClientData.x` / `.y` become views of them (`ClientData.slab`, a `SlabPlace`). A dropped
client leaves a hole; when the holes exceed the live rows (half the rows in use), or an
append does not fit, the live clients are copied into a new slab (twice their rows, at
least) and their views re-pointed. Rows handed out are never written again: a
`ClientData` dropped from the cache but still held (a context of this round) keeps
reading its own, unchanged, rows of the old slab.

Placed: clients of (x, y) samples only, with the slab's sample shape and dtypes (the
first client placed decides them) and no `outer` data set; any other client keeps its
own tensors (and `CohortBatch` gathers it as before).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from raycompo.tasks.base import ClientData
from raycompo.tasks.slab import PAD, DataSlab, SlabPlace

MIN_ROWS = 1024
"""Rows of the first slab, at least."""


class SlabRows:
    """Rows of a growing `DataSlab` handed to clients (`place`) and given back (`release`)."""

    def __init__(self) -> None:
        self.slab: DataSlab | None = None
        self.used = PAD + 1
        """Rows handed out so far (the zero row included): the next client starts here."""
        self.live: dict[int, ClientData] = {}
        """The placed clients by id, in the current slab."""
        self.live_rows = 0
        self.compactions = 0
        """Times the live clients were copied into a new slab (growth included)."""

    def fits(self, c: ClientData) -> bool:
        """Whether client data `c` can live in the slab (see the module doc)."""
        x, y = getattr(c, "x", None), getattr(c, "y", None)
        if type(c) is not ClientData or c.outer is not None:
            return False
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            return False
        if x.dim() < 1 or y.dim() != 1 or len(x) != len(y) or len(y) == 0 or x.requires_grad:
            return False
        s = self.slab
        return s is None or (x.dtype == s.x.dtype and y.dtype == s.y.dtype and x.shape[1:] == s.x.shape[1:]
                             and x.device == s.x.device and y.device == s.y.device)

    def place(self, cid: int, c: ClientData) -> ClientData:
        """Client cid's data with x, y copied into the slab and viewed from it (a new
        ClientData: the loader's object is left as it was); `c` itself where it does not fit."""
        if not self.fits(c):
            return c
        n = len(c.y)
        if self.slab is None or self.used + n > len(self.slab.y):
            self._rebuild(extra=n, like=c)
        slab = self.slab
        assert slab is not None
        off = self.used
        slab.x[off:off + n].copy_(c.x)
        slab.y[off:off + n].copy_(c.y)
        self.used += n
        x, y = slab.x[off:off + n], slab.y[off:off + n]
        placed = replace(c, x=x, y=y, slab=SlabPlace(slab, off, x, y))
        self.release(cid)
        self.live[cid] = placed
        self.live_rows += n
        return placed

    def release(self, cid: int) -> None:
        """Client cid leaves the slab (its rows become a hole); compacted when the holes
        exceed the live rows."""
        c = self.live.pop(cid, None)
        if c is None:
            return
        self.live_rows -= len(c.y)
        holes = self.used - 1 - self.live_rows
        if holes > max(self.live_rows, MIN_ROWS):
            self._rebuild(extra=0)

    def clear(self) -> None:
        self.live.clear()
        self.slab, self.used, self.live_rows = None, PAD + 1, 0

    def _rebuild(self, extra: int, like: ClientData | None = None) -> None:
        """A new slab of at least twice the live rows plus `extra`, the live clients copied
        into it (in their order) and re-pointed; the old slab is left to whoever holds it."""
        old = self.slab
        ref = old.x if old is not None else like.x  # type: ignore[union-attr]
        ref_y = old.y if old is not None else like.y  # type: ignore[union-attr]
        rows = max(MIN_ROWS, 2 * (self.live_rows + extra) + 1)
        x = torch.empty((rows, *ref.shape[1:]), dtype=ref.dtype, device=ref.device)
        y = torch.empty((rows,), dtype=ref_y.dtype, device=ref_y.device)
        x[PAD].zero_()
        y[PAD].zero_()
        slab = DataSlab(x, y)
        off = PAD + 1
        for c in self.live.values():
            n = len(c.y)
            x[off:off + n].copy_(c.x)
            y[off:off + n].copy_(c.y)
            c.x, c.y = x[off:off + n], y[off:off + n]
            c.slab = SlabPlace(slab, off, c.x, c.y)
            off += n
        self.slab, self.used = slab, off
        if old is not None:
            self.compactions += 1
