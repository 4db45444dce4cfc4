"""A stacked data slab (issue 41): several clients' training samples as one tensor, so a
chunk of clients' mini-batches is gathered with one `index_select` of x and one of y,
whatever the number of clients.

`DataSlab.x` is (rows, ...) and `DataSlab.y` (rows,); a client in the slab trains on rows
[offset, offset + n_i), and its `ClientData.x` / `.y` are views of them (everything that
reads a client's data is unchanged). Row `PAD` (0) is all zeros: the padding target of a
gather (a padded row reads zeros, label 0, with no zeroing of its own). Who fills a slab
(the engine's `ClientDataCache`) never writes a row it has handed out: a slab only grows
into rows not yet given, and compaction copies the live clients into a new slab.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

PAD = 0
"""The slab's zero row: the index a gather reads for a padding row."""


@dataclass(eq=False)
class DataSlab:
    """Stacked training samples of several clients: x (rows, ...), y (rows,); row PAD zero."""

    x: torch.Tensor
    y: torch.Tensor


class SlabPlace(NamedTuple):
    """Where a client's training data live in a slab: rows [offset, offset + n_i) of
    `slab`, viewed as `x` and `y` (the very tensors its `ClientData.x` / `.y` were set to)."""

    slab: DataSlab
    offset: int
    x: torch.Tensor
    y: torch.Tensor


def common_slab(data: list) -> tuple[DataSlab, list[int]] | None:
    """The one slab that holds every client of `data` (ClientData) and each one's offset in
    it; None where a client is not in a slab, is in another one, or its x / y are no longer
    the slab's views (replaced since it was placed). No call per client: identities only."""
    if not data:
        return None
    try:
        places = [c.slab for c in data]
    except AttributeError:  # data of another kind (no slab field)
        return None
    first = places[0]
    if first is None:
        return None
    slab = first.slab
    if any([p is None or p.slab is not slab or p.x is not c.x or p.y is not c.y for p, c in zip(places, data)]):
        return None
    offsets = [p.offset for p in places]
    return slab, offsets
