"""The one owner of clients' persistent state on one host (issue 12).

A client's state is a dict whose values are torch tensors, python int / float / bool /
None, or nested dicts of the same; keys are str, int or tuples of ints (e.g. Local-MOML's
per-task inner states {"u_task": {3: tensor}}). The empty dict is a valid state.

How it is kept, so that a host can own 10^5 - 10^6 states:

- **Layout + one buffer.** A state is split into its *layout* (nested keys, and for every
  leaf its kind, dtype and shape; bools, None and ints outside int64 are constants of the
  layout) and one byte row holding every tensor's bytes and every int (int64) / float
  (float64), each aligned to its item size. Layouts are interned: states of the same
  structure share one spec, and their rows live in that spec's arena (chunks growing from one row to a few MiB
  of uint8, rows reused through a free list). A state of two 60-float tensors costs its
  480 payload bytes plus about 21 bytes of index (numpy arrays indexed by client id).
- **Index by client id.** Client ids are the non-negative ints 0..n-1 of a population; the
  index is a few numpy arrays as long as the largest id seen (where the state is, its spec,
  its row or file slot, and its last-use tick). Very sparse huge ids waste index space.
- **Budget and spilling.** With `budget_bytes`, when the resident payload exceeds it the
  least recently used states (by get/put ticks; exact LRU order) are written to one spill
  file per store (memory-mapped, grown by doubling), in batches down to 15/16 of the
  budget so that choosing the victims is amortized.
  Spilled records have the fixed size of their spec's row, so freed slots are reused by
  later spills of the same layout: the file never exceeds the high-water mark of spilled
  states. `get` brings a spilled state back (it becomes the most recently used).
- **Stacked reads and writes.** `get_many(ids)` / `put_many(ids, tensors)` read and write a
  batched chunk's states as one (k, ...) tensor per key: a layout's rows are numpy arrays,
  so a fancy index of the chunk's rows (one per arena chunk they lie in) and one copy per
  key, with no Python work per client (issue 41); a dict of tensors in a state (the uplink's
  residuals) is a dict of (k, ...) tensors. Only where every state is in memory and of one
  layout of tensors and dicts of tensors; otherwise (spilled, mixed layouts, deeper nesting or
  scalar entries) the caller reads client by client. Both leave recency and the budget as `get` /
  `put` of each client in order would (the budget enforced once, after the chunk).
- **Ownership.** `put` copies the values in (detached; tensors may live on any device);
  `get` returns a fresh dict of fresh tensors (contiguous, requires_grad False, on the
  store's `device`, CPU by default) that the caller owns: mutating it never changes the
  store until the next `put`. Round trips are exact: same bytes, dtypes, shapes, nested
  structure, key types and scalar types. Nothing is pickled.

Not thread-safe (a host runs one client at a time).
"""

from __future__ import annotations

import mmap
import os
import struct
import tempfile
import weakref
from array import array
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch

State = dict[Any, Any]

# Leaf kinds in a layout.
_TENSOR, _INT, _FLOAT, _CONST, _DICT = 0, 1, 2, 3, 4
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1

# Where a client's state is.
_ABSENT, _MEMORY, _DISK = 0, 1, 2

_CHUNK_BYTES = 1 << 22  # arena chunk size (rows per chunk = this // row bytes)
_EVICT_TO = 15 / 16  # evict down to this fraction of the budget (amortizes spilling)


def _check_key(key: Any) -> None:
    if type(key) is str or type(key) is int:
        return
    if type(key) is tuple and all(type(k) is int for k in key):
        return
    raise TypeError(f"state keys must be str, int or tuples of ints; got {key!r} ({type(key).__name__})")


def _layout(state: dict) -> tuple:
    """The structure of a state: a hashable nested tuple (key, kind, ...) per entry."""
    out = []
    for k, v in state.items():
        _check_key(k)
        if isinstance(v, torch.Tensor):
            out.append((k, _TENSOR, v.dtype, tuple(v.shape)))
        elif type(v) is bool or v is None:
            out.append((k, _CONST, v))
        elif type(v) is int:
            out.append((k, _INT) if _I64_MIN <= v <= _I64_MAX else (k, _CONST, v))
        elif type(v) is float:
            out.append((k, _FLOAT))
        elif type(v) is dict:
            out.append((k, _DICT, _layout(v)))
        else:
            raise TypeError(
                f"state values must be tensors, int, float, bool, None or dicts of them; "
                f"got {type(v).__name__} under key {k!r}"
            )
    return tuple(out)


def _stacked_layout(tensors: dict, k: int) -> tuple[tuple, list[torch.Tensor]]:
    """The layout of one row of `tensors` ({key: (k, ...) tensor, or a dict of them}) and
    its tensors in the layout's (encoding) order, checked."""
    layout, leaves = [], []
    for key, t in tensors.items():
        _check_key(key)
        if type(t) is dict:
            inner, more = _stacked_layout(t, k)
            if any(entry[1] != _TENSOR for entry in inner):
                raise ValueError(f"put_many: {key!r} nests dicts more than one level deep")
            layout.append((key, _DICT, inner))
            leaves += more
            continue
        if not isinstance(t, torch.Tensor) or t.dim() < 1 or t.shape[0] != k:
            raise ValueError(f"put_many: {key!r} must be a tensor of {k} rows, got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
        layout.append((key, _TENSOR, t.dtype, tuple(t.shape[1:])))
        leaves.append(t)
    return tuple(layout), leaves


def _stacked_tree(tree: list, stacked: torch.Tensor, k: int) -> dict:
    """{key: (k, ...) tensor, or a dict of them} of a flat spec's compiled `tree`, read from
    the rows' bytes `stacked` (k, nbytes) uint8."""
    out: dict[Any, Any] = {}
    for entry in tree:
        if entry[1] == _DICT:
            out[entry[0]] = _stacked_tree(entry[2], stacked, k)
            continue
        key, _, off, n, dtype, shape, numel = entry
        t = stacked[:, off:off + n].contiguous().view(-1).view(dtype) if n else torch.empty(0, dtype=dtype)
        out[key] = t.view(k, *(shape if shape is not None else (numel,)))
    return out


class _Spec:
    """A compiled layout: byte offsets of every leaf in the row, and its decoder."""

    __slots__ = ("id", "layout", "nbytes", "tree", "tensors", "scalars", "rows_per_chunk", "log_rows", "chunks", "free", "next_row", "disk_free",
                 "flat")

    def __init__(self, sid: int, layout: tuple):
        self.id = sid
        self.layout = layout
        self.tensors: list[tuple[int, int]] = []  # (offset, nbytes) in encoding order
        self.scalars: list[tuple[int, int]] = []  # (offset, kind)
        off = 0

        def compile_(lay: tuple) -> list:
            nonlocal off
            node = []
            for entry in lay:
                k, kind = entry[0], entry[1]
                if kind == _TENSOR:
                    dtype, shape = entry[2], entry[3]
                    item = torch.empty((), dtype=dtype).element_size()
                    n = item * int(np.prod(shape, dtype=np.int64))
                    off = -(-off // item) * item
                    numel = n // item
                    node.append((k, _TENSOR, off, n, dtype, shape if shape != (numel,) else None, numel))
                    self.tensors.append((off, n))
                    off += n
                elif kind in (_INT, _FLOAT):
                    off = -(-off // 8) * 8
                    node.append((k, kind, off))
                    self.scalars.append((off, kind))
                    off += 8
                elif kind == _CONST:
                    node.append((k, _CONST, entry[2]))
                else:
                    node.append((k, _DICT, compile_(entry[2])))
            return node

        self.tree = compile_(layout)
        self.nbytes = off
        self.flat = all(entry[1] == _TENSOR or (entry[1] == _DICT and all(e[1] == _TENSOR for e in entry[2]))
                        for entry in layout)
        """Whether every entry is a tensor or a dict of tensors (the engine's uplink residuals):
        what `StateStore.get_many` stacks."""
        # Chunks grow 1, 2, 4, ... rows up to rows_per_chunk (a power of two, about
        # _CHUNK_BYTES), then stay that size: a rare layout costs a few rows, not MiBs.
        self.log_rows = max(0, (_CHUNK_BYTES // max(off, 1)).bit_length() - 1)
        self.rows_per_chunk = 1 << self.log_rows
        self.chunks: list[np.ndarray] = []  # uint8 [rows of that chunk, nbytes]
        self.free = array("q")  # free arena rows
        self.next_row = 0
        self.disk_free = array("q")  # free slots (byte offsets) in the spill file

    # --- arena rows ---------------------------------------------------------------------
    def alloc(self) -> int:
        if self.free:
            return self.free.pop()
        r = self.next_row
        j = self._where(r)[0]
        if j >= len(self.chunks):
            rows = 1 << j if j < self.log_rows else self.rows_per_chunk
            self.chunks.append(np.empty((rows, self.nbytes), dtype=np.uint8))
        self.next_row += 1
        return r

    def _where(self, r: int) -> tuple[int, int]:
        """(chunk, row in it) of arena row r."""
        big = self.rows_per_chunk
        if r < big - 1:  # chunk j < log_rows holds rows [2^j - 1, 2^(j+1) - 1)
            j = (r + 1).bit_length() - 1
            return j, r + 1 - (1 << j)
        q = r - (big - 1)
        return self.log_rows + q // big, q % big

    def row(self, r: int) -> np.ndarray:
        j, i = self._where(r)
        return self.chunks[j][i]

    def alloc_many(self, k: int) -> np.ndarray:
        """k arena rows at once (free ones first, in `alloc`'s order)."""
        reused = min(k, len(self.free))
        rows = np.empty(k, dtype=np.int64)
        if reused:
            rows[:reused] = np.frombuffer(self.free[len(self.free) - reused:], dtype=np.int64)[::-1]
            del self.free[len(self.free) - reused:]
        if reused < k:
            start = self.next_row
            self.next_row += k - reused
            rows[reused:] = np.arange(start, self.next_row, dtype=np.int64)
            while self._where(self.next_row - 1)[0] >= len(self.chunks):
                j = len(self.chunks)
                self.chunks.append(np.empty((1 << j if j < self.log_rows else self.rows_per_chunk, self.nbytes), dtype=np.uint8))
        return rows

    def _where_many(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`_where` of many rows: (chunk, row in it) of each."""
        big = self.rows_per_chunk
        small = rows < big - 1
        j = np.floor(np.log2(rows + 1)).astype(np.int64)  # exact: powers of two are exact in float64
        q = rows - (big - 1)
        chunk = np.where(small, j, self.log_rows + q // big)
        return chunk, np.where(small, rows + 1 - (np.int64(1) << j), q % big)

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        """The bytes of arena rows `rows`, (len(rows), nbytes) uint8: one fancy index per
        arena chunk they lie in."""
        out = np.empty((len(rows), self.nbytes), dtype=np.uint8)
        if self.nbytes and len(rows):
            chunk, at = self._where_many(rows)
            for j in np.unique(chunk).tolist():
                sel = chunk == j
                out[sel] = self.chunks[j][at[sel]]
        return out

    def write_rows(self, rows: np.ndarray, data: np.ndarray) -> None:
        """Write `data` (len(rows), nbytes) uint8 into arena rows `rows` (one fancy index
        per arena chunk)."""
        if self.nbytes and len(rows):
            chunk, at = self._where_many(rows)
            for j in np.unique(chunk).tolist():
                sel = chunk == j
                self.chunks[j][at[sel]] = data[sel]

    @property
    def allocated_bytes(self) -> int:
        return sum(c.nbytes for c in self.chunks)

    # --- encode / decode ----------------------------------------------------------------
    def encode_into(self, state: dict, row: np.ndarray) -> None:
        """Write `state`'s tensors and scalars into `row` (uint8 [nbytes])."""
        tensors: list[torch.Tensor] = []
        scalars: list[Any] = []
        _leaves(state, tensors, scalars)
        for (off, n), t in zip(self.tensors, tensors):
            if n:
                try:  # fast path: a CPU tensor numpy can view (no grad, conj bit, bfloat16)
                    a = t.numpy()
                except (RuntimeError, TypeError):
                    t = t.detach()
                    if t.is_complex():
                        t = t.resolve_conj()
                    a = t.cpu().contiguous().view(-1).view(torch.uint8).numpy()
                row[off : off + n] = np.ascontiguousarray(a.reshape(-1)).view(np.uint8)
        if scalars:
            for (off, kind), v in zip(self.scalars, scalars):
                (_I64 if kind == _INT else _F64).pack_into(row, off, v)

    def decode(self, buf: bytearray, device: torch.device | None) -> State:
        """A fresh state from `buf` (the row's bytes; the caller gives it away): its
        tensors share `buf` on the CPU, or one copy of it on `device`."""
        if device is not None and device.type != "cpu":
            return _decode(self.tree, buf, torch.frombuffer(buf, dtype=torch.uint8).to(device))
        return _decode(self.tree, buf, None)


def _leaves(state: dict, tensors: list, scalars: list) -> None:
    for v in state.values():
        if isinstance(v, torch.Tensor):
            tensors.append(v)
        elif type(v) is dict:
            _leaves(v, tensors, scalars)
        elif (type(v) is int and _I64_MIN <= v <= _I64_MAX) or type(v) is float:
            scalars.append(v)


def _decode(node: list, buf: bytearray, on_device: torch.Tensor | None) -> State:
    out: State = {}
    for entry in node:
        k, kind = entry[0], entry[1]
        if kind == _TENSOR:
            off, n, dtype, shape, numel = entry[2:]
            if on_device is not None:
                t = on_device[off : off + n].view(dtype)
            elif numel:
                t = torch.frombuffer(buf, dtype=dtype, count=numel, offset=off)
            else:
                t = torch.empty(0, dtype=dtype)
            out[k] = t if shape is None else t.view(shape)
        elif kind == _INT:
            out[k] = _I64.unpack_from(buf, entry[2])[0]
        elif kind == _FLOAT:
            out[k] = _F64.unpack_from(buf, entry[2])[0]
        elif kind == _CONST:
            out[k] = entry[2]
        else:
            out[k] = _decode(entry[2], buf, on_device)
    return out


class StateStore:
    """Clients' persistent states on one host, in memory up to `budget_bytes` of payload
    (None: no limit), the least recently used spilled to a file in `spill_dir` (default:
    the system's temporary directory) past it. `device`: where `get`'s tensors are put
    (default CPU). See the module docstring for the layout and the guarantees."""

    def __init__(self, budget_bytes: int | None = None, spill_dir: str | None = None, device: torch.device | str | None = None):
        if budget_bytes is not None and budget_bytes < 0:
            raise ValueError(f"budget_bytes must be >= 0 or None, got {budget_bytes}")
        self.budget_bytes = budget_bytes
        self.spill_dir = spill_dir
        self.device = torch.device(device) if device is not None else None
        self._specs: list[_Spec] = []
        self._spec_ids: dict[tuple, int] = {}
        cap = 1024
        self._where = np.zeros(cap, dtype=np.int8)
        self._spec = np.zeros(cap, dtype=np.int32)
        self._loc = np.zeros(cap, dtype=np.int64)  # arena row, or byte offset in the spill file
        self._tick = np.zeros(cap, dtype=np.int64)
        self._clock = 0
        self._count = 0
        self._resident = 0
        self._memory_bytes = 0
        self._spilled = 0
        self._spilled_bytes = 0
        self._file_end = 0  # bytes of the spill file in use (records and free slots)
        self._fd: int | None = None
        self._path: str | None = None
        self._map: mmap.mmap | None = None  # the spill file, mapped
        self._disk: np.ndarray | None = None  # uint8 view of the mapping
        self._finalizer: weakref.finalize | None = None

    # --- mapping API ------------------------------------------------------------------------
    def get(self, cid: int) -> State | None:
        """A fresh copy of client `cid`'s state (None if it has none); it becomes the most
        recently used, and is brought back into memory if it was spilled."""
        if cid < 0 or cid >= len(self._where):
            return None
        where = self._where[cid]
        if where == _ABSENT:
            return None
        spec = self._specs[self._spec[cid]]
        self._clock += 1
        self._tick[cid] = self._clock
        if where == _MEMORY:
            return spec.decode(bytearray(spec.row(int(self._loc[cid]))), self.device)
        # spilled: read it, free its slot, make it resident (may spill older ones)
        buf = self._read(spec, int(self._loc[cid]))
        self._release_disk(cid, spec)
        self._place(cid, spec, buf)
        return spec.decode(buf, self.device)

    def put(self, cid: int, state: State) -> None:
        """Store a copy of `state` as client `cid`'s state (the most recently used)."""
        if type(state) is not dict:
            raise TypeError(f"a state is a dict, got {type(state).__name__}")
        cid = int(cid)
        if cid < 0:
            raise ValueError(f"client ids are non-negative ints, got {cid}")
        spec = self._intern(_layout(state))
        self._grow(cid)
        self._drop(cid)
        row_index = spec.alloc()
        spec.encode_into(state, spec.row(row_index))
        self._where[cid], self._spec[cid], self._loc[cid] = _MEMORY, spec.id, row_index
        self._clock += 1
        self._tick[cid] = self._clock
        self._count += 1
        self._resident += 1
        self._memory_bytes += spec.nbytes
        self._enforce_budget()

    def get_many(self, ids: list[int]) -> tuple[dict[Any, Any], np.ndarray] | None:
        """The states of `ids` (distinct) stacked: ({key: (k, ...) tensor on the store's
        device}, present (k,) bool), a client without a state a row of zeros that `present`
        marks False; read with one fancy index of the layout's rows (per arena chunk they lie
        in) and one copy per key. Each present client becomes the most recently used, as
        `get(cid)` for each of `ids` in order would make it. None (nothing read, recency
        unchanged) where the states are not all in memory of one layout of tensors and dicts
        of tensors (spilled, mixed, deeper nesting or scalar entries): then read them client
        by client. A dict of tensors in the states is a dict of (k, ...) tensors."""
        idx = np.asarray(ids, dtype=np.int64).reshape(-1)
        k = len(idx)
        where = np.zeros(k, dtype=np.int8)
        inside = (idx >= 0) & (idx < len(self._where))
        where[inside] = self._where[idx[inside]]
        if (where == _DISK).any():
            return None
        present = where == _MEMORY
        mine = idx[present]
        if not len(mine):
            return {}, present
        sids = self._spec[mine]
        if (sids != sids[0]).any():
            return None
        spec = self._specs[int(sids[0])]
        if not spec.flat:
            return None
        data = spec.read_rows(self._loc[mine])
        self._tick[mine] = np.arange(self._clock + 1, self._clock + 1 + len(mine), dtype=np.int64)
        self._clock += len(mine)
        if len(mine) < k:
            full = np.zeros((k, spec.nbytes), dtype=np.uint8)
            full[present] = data
            data = full
        stacked = torch.from_numpy(data)
        if self.device is not None and self.device.type != "cpu":
            stacked = stacked.to(self.device)
        return _stacked_tree(spec.tree, stacked, k), present

    def put_many(self, ids: list[int], tensors: dict[Any, Any]) -> None:
        """Store client ids[i]'s state as {key: tensors[key][i]} for every i (ids distinct;
        tensors (k, ...), on any device, or dicts of them): what `put(ids[i], ...)` for each i in order
        stores, written with one copy per key and one fancy index of the layout's rows
        (per arena chunk). The budget is enforced once, after all of them."""
        idx = np.asarray(ids, dtype=np.int64).reshape(-1)
        k = len(idx)
        layout, leaves = _stacked_layout(tensors, k)
        if not k:
            return
        if (idx < 0).any():
            raise ValueError(f"client ids are non-negative ints, got {int(idx[idx < 0][0])}")
        if len(np.unique(idx)) != k:
            raise ValueError("put_many: client ids must be distinct")
        spec = self._intern(layout)
        self._grow(int(idx.max()))
        self._drop_many(idx)
        data = torch.zeros((k, spec.nbytes), dtype=torch.uint8)
        for (off, n), t in zip(spec.tensors, leaves):
            if n:
                t = t.detach()
                if t.is_complex():
                    t = t.resolve_conj()
                data[:, off:off + n] = t.reshape(k, -1).contiguous().view(torch.uint8).cpu()
        rows = spec.alloc_many(k)
        spec.write_rows(rows, data.numpy())
        self._where[idx], self._spec[idx], self._loc[idx] = _MEMORY, spec.id, rows
        self._tick[idx] = np.arange(self._clock + 1, self._clock + 1 + k, dtype=np.int64)
        self._clock += k
        self._count += k
        self._resident += k
        self._memory_bytes += spec.nbytes * k
        self._enforce_budget()

    def _drop_many(self, idx: np.ndarray) -> None:
        """`_drop` of each of idx (within the index): spilled ones one by one, those in
        memory per layout."""
        where = self._where[idx]
        for cid in idx[where == _DISK].tolist():
            self._drop(cid)
        mem = idx[where == _MEMORY]
        if not len(mem):
            return
        sids = self._spec[mem]
        for sid in np.unique(sids).tolist():
            spec = self._specs[sid]
            rows = self._loc[mem[sids == sid]]
            spec.free.extend(rows.tolist())
            self._resident -= len(rows)
            self._memory_bytes -= spec.nbytes * len(rows)
        self._where[mem] = _ABSENT
        self._count -= len(mem)

    def __contains__(self, cid: object) -> bool:
        if not isinstance(cid, (int, np.integer)) or isinstance(cid, bool):
            return False
        return 0 <= cid < len(self._where) and self._where[cid] != _ABSENT

    def __len__(self) -> int:
        return self._count

    def ids(self) -> list[int]:
        """Client ids with a state, ascending."""
        return np.flatnonzero(self._where != _ABSENT).tolist()

    def items(self, ids: Iterable[int] | None = None) -> Iterator[tuple[int, State]]:
        """(cid, fresh state) for every client (or `ids`), ascending; spilled states are read
        from disk without being brought back, and recency is left unchanged."""
        for cid in self.ids() if ids is None else ids:
            state = self._peek(cid)
            if state is not None:
                yield cid, state

    def snapshot(self, ids: Iterable[int] | None = None) -> dict[int, State]:
        """{cid: state} with CPU tensors (for a checkpoint); recency and residency unchanged."""
        out = {}
        for cid in self.ids() if ids is None else ids:
            state = self._peek(cid, torch.device("cpu"))
            if state is not None:
                out[int(cid)] = state
        return out

    def load(self, states: dict[int, State]) -> None:
        """Insert or replace the given states (restore from a checkpoint)."""
        for cid, state in states.items():
            self.put(cid, state)

    def discard(self, cid: int) -> None:
        """Forget client `cid`'s state (no error if it has none)."""
        if cid in self:
            self._drop(cid)

    def clear(self) -> None:
        """Forget every state; the spill file is truncated, the arenas released."""
        self._specs.clear()
        self._spec_ids.clear()
        self._where[:] = _ABSENT
        self._count = self._resident = self._spilled = 0
        self._memory_bytes = self._spilled_bytes = 0
        self._file_end = 0
        if self._fd is not None:
            self._unmap()
            os.ftruncate(self._fd, 0)

    def close(self) -> None:
        """clear() and remove the spill file. The store stays usable (a new file is made
        on the next spill)."""
        self.clear()
        self._unmap()
        if self._finalizer is not None:
            self._finalizer()
        self._fd = self._path = self._finalizer = None

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- stats ----------------------------------------------------------------------------
    @property
    def memory_bytes(self) -> int:
        """Payload bytes of the states held in memory (what the budget bounds)."""
        return self._memory_bytes

    @property
    def allocated_bytes(self) -> int:
        """Bytes held by the arenas (payload plus free rows) and the index arrays."""
        index = sum(a.nbytes for a in (self._where, self._spec, self._loc, self._tick))
        return sum(s.allocated_bytes for s in self._specs) + index

    @property
    def spilled_bytes(self) -> int:
        """Payload bytes of the states on disk."""
        return self._spilled_bytes

    @property
    def spilled_clients(self) -> int:
        return self._spilled

    @property
    def file_bytes(self) -> int:
        """Bytes of the spill file in use (live records plus reusable free slots); the file
        itself is allocated ahead, up to twice that (at least 1 MiB)."""
        return self._file_end

    @property
    def spill_path(self) -> str | None:
        return self._path

    # --- internals ---------------------------------------------------------------------------
    def _intern(self, layout: tuple) -> _Spec:
        sid = self._spec_ids.get(layout)
        if sid is None:
            sid = len(self._specs)
            self._specs.append(_Spec(sid, layout))
            self._spec_ids[layout] = sid
        return self._specs[sid]

    def _grow(self, cid: int) -> None:
        n = len(self._where)
        if cid < n:
            return
        new = max(cid + 1, n * 2)
        for name in ("_where", "_spec", "_loc", "_tick"):
            old = getattr(self, name)
            arr = np.zeros(new, dtype=old.dtype)
            arr[:n] = old
            setattr(self, name, arr)

    def _drop(self, cid: int) -> None:
        """Remove cid's current state (if any) from memory or disk."""
        where = self._where[cid]
        if where == _ABSENT:
            return
        spec = self._specs[self._spec[cid]]
        if where == _MEMORY:
            spec.free.append(int(self._loc[cid]))
            self._resident -= 1
            self._memory_bytes -= spec.nbytes
        else:
            self._release_disk(cid, spec)
        self._where[cid] = _ABSENT
        self._count -= 1

    def _release_disk(self, cid: int, spec: _Spec) -> None:
        """Free cid's slot in the spill file (the caller sets where it is now)."""
        if spec.nbytes:
            spec.disk_free.append(int(self._loc[cid]))
        self._spilled -= 1
        self._spilled_bytes -= spec.nbytes

    def _place(self, cid: int, spec: _Spec, buf: bytearray) -> None:
        """Make cid resident with the bytes `buf` (it was just released from disk)."""
        r = spec.alloc()
        if spec.nbytes:
            spec.row(r)[:] = np.frombuffer(buf, dtype=np.uint8)
        self._where[cid], self._loc[cid] = _MEMORY, r
        self._resident += 1
        self._memory_bytes += spec.nbytes
        self._enforce_budget()

    def _peek(self, cid: int, device: torch.device | None = None) -> State | None:
        if not (0 <= cid < len(self._where)) or self._where[cid] == _ABSENT:
            return None
        spec = self._specs[self._spec[cid]]
        if self._where[cid] == _MEMORY:
            buf = bytearray(spec.row(int(self._loc[cid])))
        else:
            buf = self._read(spec, int(self._loc[cid]))
        return spec.decode(buf, device if device is not None else self.device)

    def _read(self, spec: _Spec, offset: int) -> bytearray:
        if spec.nbytes == 0:
            return bytearray()
        return bytearray(self._disk[offset : offset + spec.nbytes])

    def _reserve(self, end: int) -> None:
        """Make the spill file (and its mapping) at least `end` bytes long. Blocks are
        allocated up front (posix_fallocate), so a full disk is an OSError here, never a
        SIGBUS when the kernel writes the mapping back."""
        size = 0 if self._map is None else len(self._map)
        if end <= size:
            return
        new = max(end, 2 * size, 1 << 20)
        os.posix_fallocate(self._fd, size, new - size)
        self._unmap()
        self._map = mmap.mmap(self._fd, new)
        self._disk = np.frombuffer(self._map, dtype=np.uint8)

    def _unmap(self) -> None:
        self._disk = None
        if self._map is not None:
            self._map.close()
            self._map = None

    def _open(self) -> None:
        d = self.spill_dir if self.spill_dir is not None else tempfile.gettempdir()
        os.makedirs(d, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix="raycompo-states-", suffix=".bin", dir=d)
        self._fd, self._path = fd, path
        self._finalizer = weakref.finalize(self, _remove, fd, path)

    def _enforce_budget(self) -> None:
        budget = self.budget_bytes
        if budget is None or self._memory_bytes <= budget:
            return
        target = int(budget * _EVICT_TO)
        need = self._memory_bytes - target
        resident = np.flatnonzero(self._where == _MEMORY)
        order = resident[np.argsort(self._tick[resident], kind="stable")]
        sizes = np.array([s.nbytes for s in self._specs], dtype=np.int64)[self._spec[order]]
        k = int(np.searchsorted(np.cumsum(sizes), need)) + 1
        self._spill(order[:k].tolist())

    def _spill(self, victims: list[int]) -> None:
        if self._fd is None:
            self._open()
        specs = self._specs
        self._reserve(self._file_end + sum(specs[self._spec[c]].nbytes for c in victims))
        disk = self._disk
        for cid in victims:
            spec = specs[self._spec[cid]]
            r = int(self._loc[cid])
            n = spec.nbytes
            if n:
                if spec.disk_free:  # reuse a freed slot of this layout
                    off = spec.disk_free.pop()
                else:
                    off = self._file_end
                    self._file_end += n
                disk[off : off + n] = spec.row(r)
            else:
                off = 0
            spec.free.append(r)
            self._where[cid], self._loc[cid] = _DISK, off
            self._resident -= 1
            self._memory_bytes -= spec.nbytes
            self._spilled += 1
            self._spilled_bytes += spec.nbytes

    def __repr__(self) -> str:
        return (
            f"StateStore({self._count} states, {self._memory_bytes} B in memory, "
            f"{self._spilled} spilled ({self._spilled_bytes} B), budget={self.budget_bytes})"
        )


def _remove(fd: int, path: str) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
    try:
        os.remove(path)
    except OSError:
        pass
