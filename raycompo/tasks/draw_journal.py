"""A batched chunk's samples-read counting, kept for the whole chunk (issue 42).

`ClientData.count_draw` counts a mini-batch's points once per draw: a client remembers the
(seed, size, outer) of its last `DRAWS_KEPT` draws in a round and does not count one again.
`count_draws` does the same for a chunk's k clients at a step, which is still a Python
iteration per client per step: in a population of 8 trials x 100 clients it was a third of
the interpreter's time.

A `DrawJournal` counts the chunk instead: while it holds the chunk's data objects, a step's
draw is one entry (step, stream, size) with the k seeds and rows, counted once however often
the chunk asks for it; at `close` each client gets its entries' keys and points in one call.
It holds the clients only where that gives exactly `count_draw`'s counts:

* every data object is a plain `ClientData`, each once in the chunk, held by no other journal;
* none has remembered a draw this round yet (so none of the journal's keys can be known to it);
* a (step, stream) is drawn at one size only (two sizes can mean the same key for a client
  whose n_i is below both), and the journal keeps at most `DRAWS_KEPT` entries (beyond them a
  client forgets its oldest draws).

When the phase returns (`close`) each client gets its points; the keys stay owed to the
clients and are handed over only if one of them needs its remembered draws before its next
round (`materialize`), since a new round forgets them (`drop`). Anything else (a per-client
draw of one of its clients, a second size, a long round) first hands every client its entries
so far: from then on the chunk is counted client by client, as before. It assumes what the
engine does: one batched chunk over a client at a time, closed when its phase returns
(`CohortBatch.close`) before anything reads the client's `samples_read`. Seeds of distinct (step, stream) are distinct 62-bit
hashes, so the journal's key (step, stream, size) stands for the clients' (seed, size).
"""

from __future__ import annotations

import weakref
from itertools import repeat

from raycompo.tasks.base import DRAWS_KEPT, ClientData


class DrawJournal:
    """The draws counted for a chunk of `datas` (n_i = `totals`) not yet handed to them."""

    def __init__(self, datas: list[ClientData], totals: list[int]):
        self.datas = datas
        self.totals = totals
        self.sizes: dict[tuple[int, int], int | None] = {}
        """(step, stream) -> the size it was drawn at, in the order first counted."""
        self.seeds: list[list[int]] = []
        """Each entry's seed per client."""
        self.rows: list[list[int]] = []
        """Each entry's points read per client."""
        self.owed: list[weakref.ref[ClientData]] = []
        """After `close`, while keys are owed: the clients, held weakly (`datas` is then empty)."""
        self.holding = False

    @classmethod
    def claim(cls, datas: list[ClientData], totals: list[int]) -> DrawJournal | None:
        """A journal holding `datas`, or None where it could not count them exactly (see the
        module docstring): then they are counted client by client, and whatever an earlier
        chunk's journal still owes them is handed over first."""
        try:
            owed = {d._journal for d in datas} - {None}  # attribute reads only: no call per client
        except AttributeError:  # data of a kind of its own (meta-learning tasks'): it counts its own way
            return None
        if owed:  # an earlier chunk of this round: its keys are remembered now, so no claim
            for journal in owed:
                journal.materialize()
            return None
        # comprehensions and maps, not generators: no Python call per client
        if (not datas or {type(d) for d in datas} != {ClientData} or any(map(len, [d._drawn for d in datas]))
                or len(set(map(id, datas))) != len(datas)):
            return None
        journal = cls(datas, totals)
        for d in datas:
            d._journal = journal
        journal.holding = True
        return journal

    def count(self, step: int, stream: int, size: int | None, seeds: list[int], rows: list[int]) -> bool:
        """Count the chunk's draw of (step, stream) at `size` (seeds and points per client);
        False where it no longer holds the chunk (the caller counts client by client)."""
        if not self.holding:
            return False
        key = (step, stream)
        if key in self.sizes:
            if self.sizes[key] == size:
                return True  # drawn again (the same points): counted once
            self.materialize()
            return False
        if len(self.sizes) >= DRAWS_KEPT:
            self.materialize()
            return False
        self.sizes[key] = size
        self.seeds.append(seeds)
        self.rows.append(rows)
        return True

    def close(self) -> None:
        """The chunk's phase has returned: each client gets its points (`samples_read`, which
        the ledger reads next) and the journal stops counting. The draws' keys stay owed to
        the clients until one of them needs its remembered draws (`materialize`): a client's
        next round forgets them unread (`drop`), which is the usual end."""
        if not self.holding:
            return
        self.holding = False
        for d, n in zip(self.datas, map(sum, zip(*self.rows))):  # one map: no Python call per client
            d.samples_read += n
        self.rows = []
        if not self.sizes:
            self._release()
            return
        # The keys owed: the clients are held weakly from now on, so that a client the data
        # cache evicts (and its samples) is not kept alive by a chunk-mate it was drawn with.
        self.owed, self.datas = list(map(weakref.ref, self.datas)), []

    def materialize(self) -> None:
        """Hand each client still owed them its entries' keys (`_drawn`, in the order
        `count_draw` would have remembered them), after its points (`close`), and let the
        chunk go."""
        self.close()
        sizes = list(self.sizes.values())
        if sizes:
            totals = self.totals
            common = None
            if all(s is not None for s in sizes) and min(totals) > max(sizes):  # type: ignore[type-var]
                common = tuple(sizes)  # every client draws below its n_i: the same sizes for all
            for ref, column, total in zip(self.owed, zip(*self.seeds), totals):
                d = ref()
                if d is not None and d._journal is self:
                    keys = common if common is not None else [None if s is None or s >= total else s for s in sizes]
                    d._drawn.update(zip(zip(column, keys, repeat(False)), repeat(None)))
        self._release()

    def drop(self, data: ClientData) -> None:
        """`data` starts a new round: its owed keys are forgotten unread (its points are
        handed over first, and the whole chunk's keys too where the phase is still running)."""
        if self.holding:
            self.materialize()
        elif data._journal is self:
            data._journal = None

    def _release(self) -> None:
        for d in self.datas + [ref() for ref in self.owed]:
            if d is not None and d._journal is self:
                d._journal = None
        self.datas, self.owed, self.sizes, self.seeds, self.rows = [], [], {}, [], []


def forget(datas: list[ClientData]) -> None:
    """`datas` start a new round (the host's `new_rounds`): what journals owe them is forgotten
    unread, as `ClientData.new_round` forgets it client by client (`DrawJournal.drop`); a
    journal still holding them (its phase running: never, normally) hands everything over first."""
    journals = {d._journal for d in datas} - {None}
    if journals:
        for journal in journals:
            if journal.holding:
                journal.materialize()
        for d in datas:
            d._journal = None
