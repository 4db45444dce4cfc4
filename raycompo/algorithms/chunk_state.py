"""A chunk's client states as stacked rows (issue 41): one (k, ...) tensor per key.

A host reads a batched chunk's persistent states from its store with one indexed read per
key (`StateStore.get_many`, raycompo/engine/state_store.py) and hands the batched phase a
`ChunkState`; the phase reads a key's rows with `CohortBatch.stack_state` and returns its new
states with `CohortBatch.new_states`, a `ChunkState` again, which the host writes back with
one indexed write per key. No Python work per client on the way.

A `ChunkState` is also a sequence of the k clients' states as dicts (each made when asked),
so a batched phase written for a list of dicts runs unchanged on it (client by client).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch

State = dict[Any, Any]


class ChunkState(Sequence[State]):
    """k clients' states, each of the same keys of tensors: `tensors[key]` is (k, ...), row i
    client i's value. `present` (k,) bool, or None (all): clients that have a state; one
    without has the empty state {} (its rows are filler, never read: `stacked` gives them
    the default)."""

    def __init__(self, k: int, tensors: Mapping[Any, Any] | None = None, present: torch.Tensor | None = None):
        self.k = k
        self.tensors: dict[Any, Any] = dict(tensors or {})
        """{key: (k, ...) tensor}; a dict of them under a key that holds a dict of tensors
        in each state (the uplink's residuals, which the engine keeps apart from the phase)."""
        for key, t in self.tensors.items():
            for inner, rows in (t.items() if isinstance(t, dict) else ((None, t),)):
                if rows.shape[:1] != (k,):
                    raise ValueError(f"ChunkState: {key!r}{'' if inner is None else f'[{inner!r}]'} has shape "
                                     f"{tuple(rows.shape)}, not {k} rows")
        if present is not None and bool(present.all()):
            present = None
        self.present = present

    @classmethod
    def empty(cls, k: int) -> ChunkState:
        """k clients without a state yet."""
        return cls(k, {}, torch.zeros(k, dtype=torch.bool) if k else None)

    def __len__(self) -> int:
        return self.k

    def __getitem__(self, i):  # type: ignore[override]
        """Client i's state as a dict of its own tensors ({} for a client without one)."""
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.k))]
        if self.present is not None and not bool(self.present[i]):
            return {}
        return {key: {inner: rows[i].clone() for inner, rows in t.items()} if isinstance(t, dict) else t[i].clone()
                for key, t in self.tensors.items()}

    def __iter__(self) -> Iterator[State]:
        return (self[i] for i in range(self.k))

    def stacked(self, key: Any, default: torch.Tensor | None) -> torch.Tensor:
        """(k, ...): each client's value of `key`, `default` for a client that has none
        (None: every client must have it)."""
        t = self.tensors.get(key)
        if default is None:
            if t is None or self.present is not None:
                raise KeyError(f"not every client's state has {key!r}")
            return t
        return self.rows_or(key, default.unsqueeze(0).expand(self.k, *default.shape))[0]

    def rows_or(self, key: Any, fallback: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """((k, ...) each client's value of `key`, or its row of `fallback` (k, ...) where it
        has none; (k,) bool: which clients have it)."""
        t = self.tensors.get(key)
        if t is None:
            return fallback.clone(), torch.zeros(self.k, dtype=torch.bool)
        if self.present is None:
            return t, torch.ones(self.k, dtype=torch.bool)
        mask = self.present.to(t.device).view(-1, *([1] * (t.dim() - 1)))
        return torch.where(mask, t, fallback.to(t.dtype)), self.present.clone()

    def replace(self, values: Mapping[Any, torch.Tensor]) -> ChunkState | list[State]:
        """Each client's state with row i of `values[key]` under each key (as
        `{**state, key: value}` client by client). A ChunkState where every client then
        has the same keys (all had a state, or `values` covers all the keys); otherwise
        a list of dicts."""
        if self.present is None or list({**self.tensors, **values}) == list(values):  # same keys, same order
            return ChunkState(self.k, {**self.tensors, **values})
        return [{**st, **{key: v[i].clone() for key, v in values.items()}} for i, st in enumerate(self)]
