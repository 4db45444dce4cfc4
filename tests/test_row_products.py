"""`bmm_into` and `add_bmm_` (models/row_products.py) write a batched product into a view of
rows of a flat parameter tensor: torch's own path bit for bit outside `buffered_products`,
equal to float rounding inside it, and never touching the rest of the rows."""

from __future__ import annotations

import threading

import pytest
import torch

from raycompo.models.row_products import (
    SMALL_ROWS,
    _buffered,
    add_bmm_,
    bmm_into,
    buffered_products,
)


def products(flat: torch.Tensor, c: int, d: int, a: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(flat after add_bmm_ into its weight view, flat after bmm_into it)."""
    k = len(flat)
    added, written = flat.clone(), flat.clone()
    add_bmm_(added[:, :c * d].view(k, c, d), a, x, -0.0137)
    bmm_into(written[:, :c * d].view(k, c, d), a, x)
    return added, written


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("k, c, d, b", [(7, 3, 5, 4), (800, 10, 60, 10), (33, 10, 100, 32), (5, 10, 784, 32),
                                        (800, 3, 60, 10), (1, 1, 1, 1)])
def test_row_products_are_torch_s_and_buffered_ones_equal_them_to_rounding(dtype, k, c, d, b):
    torch.manual_seed(k + d)
    flat = torch.randn(k, c * d + c + 3, dtype=dtype)  # the weight, then a bias and more parameters
    a, x = torch.randn(k, c, b, dtype=dtype), torch.randn(k, b, d, dtype=dtype)
    theirs_added, theirs_written = flat.clone(), flat.clone()
    theirs_added[:, :c * d].view(k, c, d).baddbmm_(a, x, alpha=-0.0137)
    torch.bmm(a, x, out=theirs_written[:, :c * d].view(k, c, d))

    added, written = products(flat, c, d, a, x)
    assert torch.equal(added, theirs_added) and torch.equal(written, theirs_written)  # outside: bit for bit
    with buffered_products():
        view = flat[:, :c * d].view(k, c, d)
        assert _buffered(view) == (c * d <= SMALL_ROWS and not view.is_contiguous())
        added, written = products(flat, c, d, a, x)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(added, theirs_added, rtol=tol, atol=tol)
    torch.testing.assert_close(written, theirs_written, rtol=tol, atol=tol)
    assert torch.equal(added[:, c * d:], flat[:, c * d:]) and torch.equal(written[:, c * d:], flat[:, c * d:])


def test_buffering_is_per_thread_and_only_for_small_strided_weights():
    small = torch.zeros(4, 10 * 60 + 10)[:, :600].view(4, 10, 60)
    assert not _buffered(small)
    seen = []
    with buffered_products():
        assert _buffered(small)
        assert not _buffered(torch.zeros(4, 10, 60))  # contiguous: nothing to gain
        assert not _buffered(torch.zeros(4, 7850)[:, :7840].view(4, 10, 784))  # large: the copies cost more
        other = threading.Thread(target=lambda: seen.append(_buffered(small)))
        other.start()
        other.join(timeout=30)
    assert seen == [False] and not _buffered(small)


def test_a_dtype_mismatch_is_refused_as_torch_refuses_it():
    flat = torch.zeros(4, 610)
    a, x = torch.randn(4, 10, 3, dtype=torch.float64), torch.randn(4, 3, 60, dtype=torch.float64)
    with buffered_products():
        assert not _buffered(flat[:, :600].view(4, 10, 60), a, x)
        with pytest.raises(RuntimeError):
            add_bmm_(flat[:, :600].view(4, 10, 60), a, x, 0.1)
