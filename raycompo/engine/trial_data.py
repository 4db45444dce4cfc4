"""A trial's view of client data shared by the trials of one seed in a population
(engine/population.py): the same samples (the same tensors, the same slab rows, so a chunk
of several trials' rows still gathers from one slab), with each trial's own counters of
samples read and of draws remembered (`ClientData.samples_read`, `_drawn`), so that each
trial's costs are its own whether its clients run beside the other trials' or apart."""

from __future__ import annotations

import copy
from dataclasses import fields
from typing import Any

from raycompo.tasks.base import ClientData


def sharable(data: Any) -> bool:
    """Whether data objects of this kind can be viewed per trial (plain `ClientData`s: their
    only mutable state is the counters that `private` copies afresh)."""
    return isinstance(data, ClientData)


COUNTERS = ("samples_read", "_drawn", "_journal")
"""The fields of a `ClientData` that each trial keeps its own of (`_journal`: the batched
chunk counting its draws, tasks/draw_journal.py)."""


def refresh(own: ClientData, base: ClientData) -> None:
    """`own` reads `base`'s samples again (the shared slab re-pointed them: a compaction), its
    counters kept."""
    for f in fields(base):
        if f.name not in COUNTERS:
            setattr(own, f.name, getattr(base, f.name))


def private(data: ClientData) -> ClientData:
    """A shallow copy of `data` with counters of its own (its samples read go on from the
    shared object's; its remembered draws start empty)."""
    own = copy.copy(data)
    own._drawn = {}
    own._journal = None
    return own


class TrialData:
    """`ClientDataCache`'s interface over a `shared` cache: each client's data as this trial's
    private copy (`private`), made again when the shared cache has rebuilt the client, and
    re-pointed (`refresh`) when the shared slab has moved its rows."""

    def __init__(self, shared: Any):
        self.shared = shared
        self._own: dict[int, tuple[ClientData, ClientData]] = {}

    def __getattr__(self, name: str) -> Any:  # rows, sizes, max_clients, loads, ...: the shared cache's
        return getattr(self.shared, name)

    def _mine(self, cid: int, base: ClientData) -> ClientData:
        kept = self._own.get(cid)
        if kept is None or kept[0] is not base:
            kept = self._own[cid] = (base, private(base))
        elif kept[1].x is not base.x:  # the shared slab moved the client's rows
            refresh(kept[1], base)
        return kept[1]

    def get(self, cid: int) -> ClientData:
        return self._mine(cid, self.shared.get(cid))

    __getitem__ = get

    def get_many(self, ids: list[int]) -> list[ClientData]:
        mine = [self._mine(cid, base) for cid, base in zip(ids, self.shared.get_many(ids))]
        if len(self._own) > 2 * max(len(self.shared), len(ids)):  # the shared cache evicted: forget those
            self._own = {cid: kept for cid, kept in self._own.items() if cid in self.shared}
        return mine

    def __contains__(self, cid: object) -> bool:
        return cid in self.shared

    def __len__(self) -> int:
        return len(self.shared)

    def discard(self, cid: int) -> None:
        self._own.pop(cid, None)
        self.shared.discard(cid)

    def clear(self) -> None:
        self._own.clear()
        self.shared.clear()
