"""Batched matrix products written into rows of a flat parameter tensor, optionally through
a contiguous buffer (`buffered_products`).

A batched model's weight (k, C, d) is a view of the first C d columns of its rows (k, P) in
`FlatModel`'s layout, so its matrices are P apart rather than C d. On the CPU, torch's
`bmm(out=)` and `baddbmm_` into such a view take a path with a fixed cost per matrix: for
small weights (10 x 60, 800 rows) about 4x the product into a contiguous tensor. Computed
into a contiguous buffer and copied into the view they are 1.8-3.8x faster, but torch then
runs another kernel, whose sums round differently in the last bit for some shapes
(tests/test_row_products.py). So a run keeps torch's own path, bit for bit as every run so
far, and a population (engine/population.py), whose trials equal their runs alone to float
rounding anyway, computes its chunks' products buffered. For large weights
(C d > `SMALL_ROWS`) the copies cost more than they save, and a GPU's strided batched products
take any stride: there the view is written directly in either case.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch

SMALL_ROWS = 2048
"""Weights of at most this many entries (C d) per row go through a contiguous buffer on the
CPU under `buffered_products` (measured: 1.8-3.8x faster at 600-2,000 entries; about even at
4,000; slower at 7,840)."""

_local = threading.local()


@contextmanager
def buffered_products() -> Iterator[None]:
    """Within it (in this thread), `bmm_into` and `add_bmm_` into a small strided weight go
    through a contiguous buffer: faster, equal to torch's own path to float rounding."""
    before = getattr(_local, "on", False)
    _local.on = True
    try:
        yield
    finally:
        _local.on = before


def _buffered(out: torch.Tensor, *inputs: torch.Tensor) -> bool:
    """Whether a product into `out` goes through a buffer: under `buffered_products`, on the
    CPU, into a strided small weight, of inputs of its dtype (otherwise torch's own path,
    which also refuses a mismatched dtype, as the buffer's copy would not)."""
    return (getattr(_local, "on", False) and out.device.type == "cpu" and not out.is_contiguous()
            and out[0].numel() <= SMALL_ROWS and all(t.dtype == out.dtype for t in inputs))


def bmm_into(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """out = a @ b, batched (`torch.bmm(a, b, out=out)`)."""
    if _buffered(out, a, b):
        out.copy_(torch.bmm(a, b))
    else:
        torch.bmm(a, b, out=out)


def add_bmm_(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, alpha: float) -> None:
    """out += alpha a @ b, batched (`out.baddbmm_(a, b, alpha=alpha)`)."""
    if _buffered(out, a, b):
        buffer = out.contiguous()
        buffer.baddbmm_(a, b, alpha=alpha)
        out.copy_(buffer)
    else:
        out.baddbmm_(a, b, alpha=alpha)
