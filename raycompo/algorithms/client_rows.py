"""Each member's contribution of an exchange, kept as the rows its chunks computed.

`ctx.map_each(phase, cohort, payload)` gives {client id: contribution}: a dict per member,
which a batched chunk has to cut out of its stacked (k, ...) answers one member at a time.
`ctx.map_rows(phase, cohort, payload)` gives the same contributions as a `ClientRows`:
the chunks' answers as they came, one part per chunk (and per host), so that a server
round that reads every member's value (DRFL's losses, FastDRO's pooled batch, PDSGD's
log masses) reads them with a fixed number of tensor operations, whatever the cohort's
size (issue 41):

    rows = ctx.map_rows("loss", u_set, {"w": w})
    v[u_set] = rows.stacked("loss", u_set)         # (len(u_set), ...) in u_set's order
    flat, lengths = rows.flat("l", clients)        # members' values of different lengths, end to end

A part holds, per key, a (k, ...) tensor (row i is member i's value), a `Shares` (the
members' values of different lengths end to end: FastDRO's per-sample losses where a client
holds fewer samples than the batch) or a list of k values (Python numbers, or tensors of
different shapes). `as_dict()` is `map_each`'s answer, made from the parts: the same values,
each member's tensors its own copy.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch

Part = tuple[list[int], dict[str, Any]]


class ClientRows(Mapping):
    """Members' contributions by client id (a read-only `Mapping` of `as_dict()`), stored as
    the parts of the chunks that computed them. Member ids are distinct."""

    def __init__(self, parts: list[Part] | None = None):
        self.parts: list[Part] = list(parts or [])
        self._dict: dict[int, dict[str, Any]] | None = None

    @classmethod
    def of(cls, result: ClientRows | dict[int, dict[str, Any]]) -> ClientRows:
        """`result` as a `ClientRows`: itself, or a {client id: contribution} dict (a
        client-by-client host's or a custom pool's answer) as one part per member."""
        if isinstance(result, ClientRows):
            return result
        return cls([([cid], {key: [value] for key, value in out.items()}) for cid, out in result.items()])

    @classmethod
    def merge(cls, results: list[Any]) -> ClientRows:
        """The parts of several answers (hosts, chunks), in order."""
        return cls([part for r in results for part in cls.of(r).parts])

    def add(self, ids: list[int], values: dict[str, Any]) -> None:
        """One chunk's answer: its members `ids` and, per key, a (k, ...) tensor, a `Shares`
        of those members in that order, or a list of k values."""
        for key, value in values.items():
            if isinstance(value, Shares) and not np.array_equal(value.clients, np.asarray(ids, dtype=np.int64)):
                raise ValueError(f"{key!r}: a contribution's Shares are the chunk's members in its order "
                                 f"({list(ids)[:5]}...), got {value.clients[:5].tolist()}...")
        self.parts.append((list(ids), values))
        self._dict = None

    # --- each member's own (map_each) ---------------------------------------------------
    def as_dict(self) -> dict[int, dict[str, Any]]:
        """{client id: {key: value}} in the parts' order: a member's tensors are copies of
        its rows (a row of the chunk's tensor is a view, which would pickle with the whole
        storage and change with it)."""
        out: dict[int, dict[str, Any]] = {}
        for ids, values in self.parts:
            for i, cid in enumerate(ids):
                out[cid] = {key: _own(value.entry(i) if isinstance(value, Shares) else value[i])
                            for key, value in values.items()}
        return out

    def __getitem__(self, cid: int) -> dict[str, Any]:
        return self._cached()[cid]

    def __iter__(self) -> Iterator[int]:
        return (cid for ids, _ in self.parts for cid in ids)

    def __len__(self) -> int:
        return sum(len(ids) for ids, _ in self.parts)

    def __contains__(self, cid: object) -> bool:  # the ids alone: no member's values copied
        return any(cid in ids for ids, _ in self.parts)

    def _cached(self) -> dict[int, dict[str, Any]]:
        if self._dict is None:
            self._dict = self.as_dict()
        return self._dict

    # --- every member's at once -----------------------------------------------------
    def ids(self) -> list[int]:
        """The members, in the parts' order."""
        return [cid for ids, _ in self.parts for cid in ids]

    def stacked(self, key: str, order: list[int] | None = None) -> torch.Tensor:
        """(len(order), ...): the value of `key` of each member in `order` as a row (an id
        may repeat; None: every member, in the parts' order). Values of one shape each; a part's list
        of tensors (or numbers) is stacked. A fixed number of operations per part."""
        blocks = [_block(values[key]) for _, values in self.parts]
        if not blocks:
            raise KeyError(f"no member answered, so no {key!r} to stack")
        stacked = blocks[0] if len(blocks) == 1 else torch.cat(blocks)
        perm = self._permutation(order)
        return stacked if perm is None else stacked.index_select(0, torch.from_numpy(perm).to(stacked.device))

    def flat(self, key: str, order: list[int] | None = None) -> tuple[torch.Tensor, list[int]]:
        """(values, lengths): each member's value of `key` flattened, end to end in the order
        of `order` (None: the parts' order), and each one's number of entries. For values
        of different lengths (e.g. FastDRO's per-client losses, one per sample). A fixed
        number of operations per part of (k, ...) rows."""
        pieces: list[torch.Tensor] = []
        lengths: list[int] = []
        for _, values in self.parts:
            value = values[key]
            if isinstance(value, Shares):  # already end to end
                pieces.append(value.values.reshape(-1))
                lengths.extend(value.lengths.tolist())
            elif isinstance(value, torch.Tensor):  # (k, ...) rows of one length
                k = value.shape[0]
                width = value.numel() // k if k else 0
                pieces.append(value.reshape(k * width))
                lengths.extend([width] * k)
            else:  # one value each
                items = [_tensor(v).reshape(-1) for v in value]
                pieces.extend(items)
                lengths.extend([len(v) for v in items])
        flat = pieces[0] if len(pieces) == 1 else torch.cat(pieces) if pieces else torch.zeros(0)
        perm = self._permutation(order)
        if perm is None:
            return flat, lengths
        # member j of `order` is member perm[j] of the parts: its entries, end to end
        size = np.asarray(lengths, dtype=np.int64)
        index = ranges((np.cumsum(size) - size)[perm], size[perm])
        return flat.index_select(0, torch.from_numpy(index).to(flat.device)), size[perm].tolist()

    def _permutation(self, order: list[int] | None) -> np.ndarray | None:
        """Positions (in the parts' order) of the members of `order` (a KeyError names one
        that did not answer), or None where `order` is the parts' order already (or None)."""
        if order is None:
            return None
        have = np.concatenate([np.asarray(ids, dtype=np.int64) for ids, _ in self.parts]) if self.parts else \
            np.zeros(0, dtype=np.int64)
        want = np.asarray(order, dtype=np.int64)
        return None if np.array_equal(have, want) else positions(have, want)


class Shares(Mapping):
    """Each client's own entry of one vector, end to end: a payload sent to all (FastDRO's
    weights q_i of the pooled batch, cut by client), or a batched phase's contribution whose
    members' values differ in length (FastDRO's per-sample losses where a client holds fewer
    samples than the batch: `Shares(cb.ids, values, lengths)`). `shares[cid]` is client cid's
    entry (a view of `values`); `cat(ids)` the entries of `ids` end to end, with a fixed
    number of operations. The ledger counts `values` (what a dict of the entries would
    count), each member its own length; the addressing, like a dict's keys, is not a value."""

    def __init__(self, clients: list[int], values: torch.Tensor, lengths: list[int]):
        if not isinstance(values, torch.Tensor) or values.dim() != 1:
            raise TypeError(f"Shares(clients, values, lengths): values is one 1-D tensor, the entries end to end; "
                            f"got {f'shape {tuple(values.shape)}' if isinstance(values, torch.Tensor) else type(values).__name__}")
        self.clients = np.asarray(clients, dtype=np.int64)
        self.values = values
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.starts = np.cumsum(self.lengths) - self.lengths
        if (self.lengths < 0).any():
            raise ValueError(f"Shares: a client's length is at least 0, got {self.lengths[self.lengths < 0][:5].tolist()}")
        if len(self.clients) != len(self.lengths) or int(self.lengths.sum()) != values.numel():
            raise ValueError(f"{len(self.clients)} clients, {len(self.lengths)} lengths summing to "
                             f"{int(self.lengths.sum())}, {values.numel()} values")

    def __getitem__(self, cid: int) -> torch.Tensor:
        return self.entry(int(positions(self.clients, np.asarray([cid], dtype=np.int64))[0]))

    def entry(self, i: int) -> torch.Tensor:
        """The entry of the i-th client of `clients` (a view of `values`)."""
        return self.values[int(self.starts[i]):int(self.starts[i] + self.lengths[i])]

    def rows(self, at: slice) -> Shares:
        """The clients of positions `at` (a slice of `clients`) and their entries: a
        population's chunk cut into its trials' rows."""
        lo, hi, _ = at.indices(len(self.clients))
        hi = max(lo, hi)
        start = int(self.starts[lo]) if lo < len(self.clients) else int(self.lengths.sum())
        stop = start + int(self.lengths[lo:hi].sum())
        return Shares(self.clients[lo:hi].tolist(), self.values[start:stop], self.lengths[lo:hi].tolist())

    def entries(self) -> list[torch.Tensor]:
        """Every client's entry, in the order of `clients` (views of `values`)."""
        return list(torch.split(self.values, self.lengths.tolist()))

    def __iter__(self) -> Iterator[int]:
        return iter(self.clients.tolist())

    def __len__(self) -> int:
        return len(self.clients)

    def cat(self, ids: list[int]) -> torch.Tensor:
        """The entries of clients `ids`, end to end in that order."""
        at = positions(self.clients, np.asarray(ids, dtype=np.int64))
        return self.values.index_select(0, torch.from_numpy(ranges(self.starts[at], self.lengths[at])).to(self.values.device))

    def to(self, device: torch.device | str, copy: bool = False) -> Shares:
        """The same entries with `values` on `device` (`copy`: a copy of its own even there)."""
        moved = Shares.__new__(Shares)
        moved.__dict__.update(self.__dict__, values=self.values.detach().to(device, copy=copy))
        return moved


def positions(have: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Where each id of `want` is in `have` (distinct ids); a KeyError names ids not there."""
    if not len(want):
        return np.zeros(0, dtype=np.int64)
    if not len(have):
        raise KeyError(f"no answer from client(s) {want[:5].tolist()}")
    sorter = np.argsort(have, kind="stable")
    at = sorter[np.searchsorted(have, want, sorter=sorter).clip(max=len(have) - 1)]
    if not np.array_equal(have[at], want):
        ids, counts = np.unique(have, return_counts=True)
        twice = f"; client(s) {ids[counts > 1][:5].tolist()} appear more than once there" if (counts > 1).any() else ""
        raise KeyError(f"no answer from client(s) {want[have[at] != want][:5].tolist()}: not among the "
                       f"{len(have)} held ({have[:5].tolist()}...: the members that answered, or a Shares' "
                       f"clients){twice}")
    return at


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices start_j, ..., start_j + length_j - 1 of every j, end to end."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]) if len(ends) else 0)


def _block(value: Any) -> torch.Tensor:
    """A part's value of one key as (k, ...) rows."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, Shares):
        if len(set(value.lengths.tolist())) > 1:
            raise ValueError("the members' values are of different lengths: read them with flat(), not stacked()")
        return value.values.view(len(value), int(value.lengths[0]) if len(value) else 0)
    return torch.stack([_tensor(v) for v in value])


def _tensor(value: Any) -> torch.Tensor:
    """A member's value as a tensor: a Python number in float64 (as `float()` read it)."""
    return value if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=torch.float64)


def _own(value: Any) -> Any:
    """A member's value as `Host.map` returns it: a tensor of its own on the CPU, anything else as it is."""
    return value.detach().to("cpu", copy=True) if isinstance(value, torch.Tensor) else value
