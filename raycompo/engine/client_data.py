"""Lazy client data for a host (issue 12): a client's data is materialized the first time
it is needed, from the task's `clients(ids)` (which builds it from (seed, client id)),
and at most `max_clients` are kept, the least recently used dropped first. A dropped
client is simply rebuilt when it is sampled again, so data must be a pure function of
(settings, seed, client id), as `Task.clients` guarantees.

With `slab` (a host's choice where local steps run batched), the materialized clients'
training samples are rows of one stacked slab (engine/data_slab.py): a client's x and y are
views of it, and a batched chunk gathers all its clients' mini-batches at once
(`CohortBatch`), with nothing copied per round. The slab is a copy: where the task keeps
its whole partition in memory (`Task.clients`), the training samples are held twice.

Recency is a use tick per client (a dict), so that a batched chunk marks all its clients
used with one `dict.update` (`get_many`), not one call per client; the least recently
used are found (numpy) only when more than `max_clients` are held.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import torch

from raycompo.engine.data_slab import SlabRows
from raycompo.tasks.base import ClientData


class ClientDataCache:
    """`load(ids)` returns the ClientData of `ids` (any order of client_id is accepted;
    each returned item is matched by its `client_id`). `max_clients`: how many stay
    materialized (None: all that were ever loaded). `device`: where they are moved.
    `slab`: keep the clients' training samples in one stacked slab (`rows`; see the module
    doc), or each client's in its own tensors (False)."""

    def __init__(
        self,
        load: Callable[[list[int]], list[ClientData]],
        max_clients: int | None = None,
        device: torch.device | str | None = None,
        slab: bool = True,
    ):
        if max_clients is not None and max_clients < 1:
            raise ValueError(f"max_clients must be >= 1 or None, got {max_clients}")
        self._load = load
        self.max_clients = max_clients
        self.device = torch.device(device) if device is not None else None
        self._cache: dict[int, ClientData] = {}
        self._used: dict[int, int] = {}  # client -> tick of its last use
        self._clock = 0
        self.sizes: dict[int, int | None] = {}
        """n_i (`num_samples`; None: it has none) of each materialized client, read once when it is built."""
        self.rows: SlabRows | None = SlabRows() if slab else None
        """The slab's bookkeeping (None: no slab)."""
        self.loads = 0
        """Calls made to `load` (for tests and statistics)."""
        self.loaded = 0
        """Clients materialized so far, counting reloads of dropped ones."""

    def get(self, cid: int) -> ClientData:
        """Client `cid`'s data, materialized if needed; it becomes the most recently used."""
        c = self._cache.get(cid)
        if c is None:
            return self._fetch([cid])[cid]
        self._clock += 1
        self._used[cid] = self._clock
        return c

    def get_many(self, ids: list[int]) -> list[ClientData]:
        """`get(cid)` for each of `ids` (distinct), in order: the missing ones built in one
        `load` call, all of them marked used (in that order) at once. With more ids than
        `max_clients`, the last `max_clients` of them stay."""
        cache = self._cache
        missing = [i for i in ids if i not in cache]
        if missing:
            got = self._fetch(missing, evict=False)
            out = [cache[i] if i in cache else got[i] for i in ids]
        else:
            out = [cache[i] for i in ids]
        self._mark(ids)
        self._evict()
        return out

    __getitem__ = get

    def prefetch(self, ids: Iterable[int]) -> None:
        """Materialize the clients `ids` that are not yet, in one `load` call, and mark all
        of them most recently used (in the given order). With more ids than `max_clients`,
        the last `max_clients` of them stay."""
        ids = list(dict.fromkeys(int(i) for i in ids))
        missing = [i for i in ids if i not in self._cache]
        if missing:
            self._fetch(missing, evict=False)
        self._mark(ids)
        self._evict()

    def _mark(self, ids: list[int]) -> None:
        """Mark `ids` used now, in order (the last the most recent)."""
        start = self._clock + 1
        self._clock += len(ids)
        self._used.update(zip(ids, range(start, self._clock + 1)))

    def _fetch(self, ids: list[int], evict: bool = True) -> dict[int, ClientData]:
        got = self._load(list(ids))
        self.loads += 1
        by_id = {int(c.client_id): c for c in got}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise RuntimeError(f"client data loader returned no data for clients {missing[:10]}")
        out = {}
        for i in ids:
            c = by_id[i]
            if self.device is not None:
                c = c.to(self.device)
            if self.rows is not None:
                c = self.rows.place(i, c)
            out[i] = c
            self._cache[i] = c
            self.sizes[i] = getattr(c, "num_samples", None)
            self.loaded += 1
        self._mark(ids)
        if evict:
            self._evict()
        return out

    def _evict(self) -> None:
        """Drop the least recently used clients beyond `max_clients`."""
        if self.max_clients is None or len(self._cache) <= self.max_clients:
            return
        keys = np.fromiter(self._cache, dtype=np.int64, count=len(self._cache))
        ticks = np.fromiter(map(self._used.__getitem__, self._cache), dtype=np.int64, count=len(self._cache))
        excess = len(keys) - self.max_clients
        for cid in keys[np.argpartition(ticks, excess - 1)[:excess]].tolist():
            self.discard(cid)

    def __contains__(self, cid: object) -> bool:
        """Whether `cid` is materialized now."""
        return cid in self._cache

    def __len__(self) -> int:
        return len(self._cache)

    @property
    def materialized(self) -> int:
        """Clients held now."""
        return len(self._cache)

    def ids(self) -> list[int]:
        """Materialized clients, least recently used first."""
        return sorted(self._cache, key=self._used.__getitem__)

    def discard(self, cid: int) -> None:
        """Drop client `cid`'s data (rebuilt if used again)."""
        self._cache.pop(cid, None)
        if self.rows is not None:
            self.rows.release(cid)
        self._used.pop(cid, None)
        self.sizes.pop(cid, None)

    def clear(self) -> None:
        """Drop every client's data."""
        self._cache.clear()
        if self.rows is not None:
            self.rows.clear()
        self._used.clear()
        self.sizes.clear()
