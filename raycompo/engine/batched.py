"""A host's clients run as batched chunks (vectorized cohorts; the plan is raycompo/configuration/vectorize.py,
what a batched phase computes is raycompo/algorithms/cohort.py).

`run_batched` splits a host's share of a cohort into chunks that fit `vectorize_memory_mb`
(and, on a CPU, where a client's step is large, the cache: `STEP_CACHE_BYTES`),
runs the algorithm's batched phase on each chunk, stores the returned states and either
sums the contributions (float64, weighted by multiplicity, as `Host.map` does client by
client) or returns them client by client.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from raycompo.algorithms.chunk_state import ChunkState, State
from raycompo.algorithms.client_rows import ClientRows, Shares
from raycompo.algorithms.cohort import CohortBatch
from raycompo.compression.uplink import RESIDUALS, Kept, split_residuals, with_residuals
from raycompo.engine.ledger import MemberCosts, MemberSizes, count_values, samples_read_many
from raycompo.problems.oracle import metering
from raycompo.watch.per_client import EVALUATE, N_SAMPLES_KEY, n_samples

FLOATS_PER_MODEL = 8
"""Model-sized float tensors alive per client in a batched step: the rows of w, their
copy with requires_grad, the gradient, the update's temporaries, a state (momentum, a
personal model) and a returned contribution."""


GATHER_SHARE = 0.25
"""Share of `vectorize_memory_mb` that a chunk's gathered batches of several local steps may
take (`CohortBatch.gather_bytes`); the chunks are cut from the rest (`clients_per_chunk`)."""


MODELS_PER_TASK = 6
"""Model-sized tensors a MAML row (one task of a client's meta-batch) keeps in the vmap of
the Local-SCGD family: its iterate, inner value, estimate, gradient and Hessian-vector
product, and the pulled-back gradient (problems/maml_batched.py)."""


STEP_CACHE_BYTES = 4 * 2**20
"""On a CPU, a chunk's one local step (its clients' rows of w and one step's batch) is kept
within about this many bytes where that leaves `MIN_CACHE_CHUNK` to `MAX_CACHE_CHUNK`
clients a chunk:
the batch a step gathers is then still in the cache when the step's two products (the
forward and the fused update) read it, and the rows of w stay there from step to step.
The logistic-784 bench's clients (131 KB a step each) run 25 a chunk and per-step gathers
instead of 100 with five steps gathered ahead; the numbers are the same (each client's
products and draws do not depend on its chunk)."""

MIN_CACHE_CHUNK = 16
"""The fewest clients a chunk is cut to for `STEP_CACHE_BYTES`: with fewer, the chunk's
Python and call overheads would cost more than the cache saves (a larger model, e.g. an
MLP, keeps its memory-bound chunks)."""

MAX_CACHE_CHUNK = 64
"""The most: where more clients' steps fit the cache, a client's step is small (e.g. the
synthetic workload's 5 KB) and its products are bound by call overheads, not memory; the
chunks stay whole and gather many steps ahead (fewer `index_select` calls), which measured
faster (synthetic, m = 1000: 0.85-0.9x with the cut)."""


def cache_chunk(dim: int, row_numel: int, width: int, element_size: int = 4) -> int | None:
    """Clients per chunk whose one local step fits `STEP_CACHE_BYTES` (see there); None
    where that is not from `MIN_CACHE_CHUNK` to `MAX_CACHE_CHUNK` clients (no cut)."""
    per_client = element_size * (dim + width * row_numel)
    k = int(STEP_CACHE_BYTES // max(per_client, 1))
    return k if MIN_CACHE_CHUNK <= k <= MAX_CACHE_CHUNK else None


def chunk_size(dim: int, row_numel: int, width: int, budget_bytes: float, element_size: int = 4,
               activations: int = 0) -> int:
    """Clients per chunk: as many as fit the budget (at least 1). Per client: the model
    floats above plus the batch buffer and the activations (about 3 copies of a batch),
    and for a model run through vmap its layers' outputs per sample (`activations`,
    `FlatModel.activation_numel`), kept for the backward pass and their gradients (2 copies)."""
    per_client = element_size * (FLOATS_PER_MODEL * dim + width * (3 * row_numel + 2 * activations)) + 512
    return max(1, int(budget_bytes // per_client))


def clients_per_chunk(host: Any, cid: int) -> int:
    """`chunk_size` for a host's model and batch, from client `cid`'s data (a task's clients
    share their samples' shape)."""
    data = host.clients.get(cid)
    batch_size = getattr(host.algorithm.s, "batch_size", None)
    width = max(1, data.num_samples if batch_size is None else min(batch_size, data.num_samples))
    dim = host.task.model.dim
    if not hasattr(data, "x"):  # a meta-learning client: `width` tasks, each a vmap row of model-sized tensors
        per_client = 4 * (FLOATS_PER_MODEL + MODELS_PER_TASK * width) * dim + 512
        return max(1, int(host.batched_budget_bytes // per_client))
    row = data.x[0].numel() if len(data.x) else 1
    model = host.task.model
    acts = model.activation_numel(data.x[0]) if len(data.x) and getattr(model, "vmapped", False) else 0
    size = chunk_size(dim, row, width, host.batched_budget_bytes * (1 - GATHER_SHARE), activations=acts)
    cached = cache_chunk(dim, row, width) if torch.device(host.device).type == "cpu" else None
    return size if cached is None else min(size, cached)


def gather_bytes(host: Any, phase: str, items: list[tuple[int, int]]) -> int:
    """`CohortBatch.gather_bytes` of a host's chunks: a share of its budget
    (`GATHER_SHARE`), and on a CPU, where the chunks are cut for the cache
    (`cache_chunk`), at most `STEP_CACHE_BYTES`: a step's batch gathered just before it runs."""
    share = int(host.batched_budget_bytes * GATHER_SHARE)
    if phase == "evaluate" or torch.device(host.device).type != "cpu":
        return share
    data = host.clients.get(items[0][0])
    if not hasattr(data, "x"):
        return share
    batch_size = getattr(host.algorithm.s, "batch_size", None)
    width = max(1, data.num_samples if batch_size is None else min(batch_size, data.num_samples))
    row = data.x[0].numel() if len(data.x) else 1
    return share if cache_chunk(host.task.model.dim, row, width) is None else min(share, STEP_CACHE_BYTES)


def evaluation_bytes(data: Any) -> int:
    """Memory of one client in a batched evaluation: its training and validation rows
    concatenated, and about 3 copies of their outputs (logits, losses, hits)."""
    rows = len(data.y) + len(data.y_val)
    row = data.x[0].numel() if len(data.x) else 1
    return 4 * rows * (row + 3 * 16) + 512


def chunks(host: Any, phase: str, items: list[tuple[int, int]]) -> Iterator[list[tuple[int, int]]]:
    """A host's share cut into chunks within its budget: of equal size for the training
    phases (`clients_per_chunk`), client by client by data size for `evaluate`. Lazily:
    a chunk is cut just before it runs, so the clients it builds are still in the host's
    data cache when they run."""
    if phase != "evaluate":
        size = clients_per_chunk(host, items[0][0])
        size = -(-len(items) // -(-len(items) // size))  # as many chunks, of nearly equal sizes
        for i in range(0, len(items), size):
            yield items[i:i + size]
        return
    chunk: list[tuple[int, int]] = []
    used = 0
    for item in items:
        need = evaluation_bytes(host.clients.get(item[0]))
        if chunk and used + need > host.batched_budget_bytes:
            yield chunk
            chunk, used = [], 0
        chunk.append(item)
        used += need
    if chunk:
        yield chunk


def run_batched(host: Any, phase: str, round_: int, items: list[tuple[int, int]], payload: dict[str, Any],
                reduce: bool, costs: MemberCosts | None = None, dispatch: int = 0) -> dict[Any, Any]:
    """`Host.map` for a phase with a batched form: chunks of clients, one batched call each.
    `costs`: where each member's samples read and contribution size are added; `dispatch`:
    the members' repeat number at this model version (`ClientCtx.dispatch`)."""
    fn = getattr(host.algorithm, host.algorithm.batched_phases[phase])
    result: Any = {} if reduce else ClientRows()
    if not items:
        return result
    gathered = gather_bytes(host, phase, items)
    uplink = getattr(host, "uplink", None) if costs is not None else None  # a server round's exchanges only
    for chunk in chunks(host, phase, items):
        # The chunk's contexts, states and bookkeeping are built and written back with a
        # constant number of Python calls, whatever its k (issue 41): no call per client.
        ids = [cid for cid, _ in chunk]
        ctxs, sizes = host.contexts(ids, round_, dispatch)
        states = host.chunk_states(ids, ctxs)
        residuals: Kept | list[dict[str, Any]] = []
        if uplink is not None:
            states, residuals = chunk_residuals(states)
        datas = [c.data for c in ctxs]
        read = samples_read_many(datas) if costs is not None else []
        calls = [0] * len(chunk)
        cb = CohortBatch(ctxs, host.task, host.device, gathered, sizes=sizes)
        try:
            if costs is None:
                answer = fn(cb, states, payload)
            else:
                with metering(len(chunk)) as meter:
                    answer = fn(cb, states, payload)
                calls = meter.per_row()
        finally:
            cb.close()  # the draws counted for the whole chunk, handed to its clients
        out, new_states = checked_answer(phase, fn, answer, ids)
        encoded: dict[str, list[int]] = {}
        if uplink is not None:  # the chunk's contributions compressed and clipped as one batch (engine/transforms.py)
            members = list(zip(ids, host.exchange_numbers(ids, round_)))
            out = {key: v.entries() if isinstance(v, Shares) else v for key, v in out.items()}  # member by member there
            out, kept, encoded = uplink.apply(phase, round_, members, out, payload, residuals, batched=True)
            new_states = with_chunk_residuals(new_states, kept)
        book_chunk(host, phase, chunk, ctxs, out, new_states, reduce, result, costs, read, calls, encoded)
    return result


def checked_answer(phase: str, fn: Any, answer: Any, ids: list[int]) -> tuple[dict[str, Any], Any]:
    """A batched phase's answer (contributions, new states), checked against its chunk's
    k = len(ids) members before anything is summed or kept: k states, and per key a (k, ...)
    tensor, a list of k values or a `Shares` of exactly `ids` (a row too many or too few
    would otherwise be summed or dropped without a word)."""
    name = getattr(fn, "__qualname__", phase)
    k = len(ids)
    if not (isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], dict)):
        raise TypeError(f"batched phase {phase!r} ({name}) returned {_shown(answer)}: it returns a pair "
                        f"(contributions, states): a dict of the chunk's contributions and its {k} members' new states")
    out, new_states = answer
    if len(new_states) != k:
        raise RuntimeError(f"batched phase {phase!r} ({name}) returned {len(new_states)} states for {k} clients")
    for key, value in out.items():
        if isinstance(value, Shares):
            ok = np.array_equal(value.clients, np.asarray(ids, dtype=np.int64))
        elif isinstance(value, torch.Tensor):
            ok = value.dim() >= 1 and value.shape[0] == k
        else:
            ok = isinstance(value, list) and len(value) == k
        if not ok:
            raise ValueError(f"batched phase {phase!r} ({name}) answered {key!r} with {_shown(value)} for a chunk "
                             f"of {k} clients: each contribution is a ({k}, ...) tensor (a row per member, in "
                             f"cb.ids' order), a list of {k} values, or raycompo.Shares(cb.ids, values, lengths)")
    return out, new_states


def _shown(value: Any) -> str:
    """A phase's answer (or a part of it) in a few words, for an error message."""
    if isinstance(value, Shares):
        return f"a Shares of {len(value.clients)} clients {value.clients[:5].tolist()}"
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


def chunk_residuals(states: ChunkState | list[State]) -> tuple[ChunkState | list[State], Kept | list[dict[str, Any]]]:
    """(the states the phase sees, the members' uplink states): a `ChunkState`'s stacked
    residuals (`RESIDUALS`, a dict of (k, d) rows) as a `Kept` of rows, without a copy per
    member; a list of states client by client (`split_residuals`)."""
    if isinstance(states, ChunkState):
        tensors = dict(states.tensors)
        rows = tensors.pop(RESIDUALS, {})
        return ChunkState(states.k, tensors, states.present), Kept(states.k, rows=rows)
    split = [split_residuals(st) for st in states]
    if not any(res for _, res in split):  # none kept yet (a first exchange): rows from the start
        return [st for st, _ in split], Kept(len(split), rows={})
    return [st for st, _ in split], [res for _, res in split]


def with_chunk_residuals(states: ChunkState | list[State], kept: Kept) -> ChunkState | list[State]:
    """The phase's new states with the members' uplink states (`with_residuals` of each):
    stacked rows into a `ChunkState` where both are stacked and every member then has the
    same keys, else client by client."""
    rows = kept.stacked()
    if rows is not None and not rows:  # nothing kept: the states as they are
        return states
    if isinstance(states, ChunkState) and rows is not None and (states.present is None or not states.tensors):
        return ChunkState(states.k, {**states.tensors, RESIDUALS: rows})
    if rows is not None and not isinstance(states, ChunkState) and not any(states):  # stateless members
        return ChunkState(len(states), {RESIDUALS: rows})
    return [with_residuals(st, res) for st, res in zip(states, kept.members())]


def book_chunk(host: Any, phase: str, chunk: list[tuple[int, int]], ctxs: list[Any], out: dict[str, Any],
               new_states: Any, reduce: bool, result: Any, costs: MemberCosts | None, read: list[int],
               calls: list[int], encoded: dict[str, list[int]]) -> None:
    """A chunk's answer booked in `host`: its members' costs (samples read since `read`,
    contribution sizes, oracle `calls`), their new states kept, and their contributions
    summed into `result` (reduce: a dict) or added to it as the chunk's rows (a `ClientRows`)."""
    ids = [cid for cid, _ in chunk]
    mults = [m for _, m in chunk]
    if costs is not None:
        after = samples_read_many([c.data for c in ctxs])
        costs.add_many(ids, mults, [(a - b) * m for a, b, m in zip(after, read, mults)],
                       member_sizes(out, len(chunk)), [n * m for n, m in zip(calls, mults)], encoded)
    host.keep_states(ids, new_states)
    if reduce:
        for key, value in out.items():
            result[key] = _weighted_sum(value, mults, result.get(key))
    else:  # the chunk's rows as they are (`ClientRows`): one copy off the device per stacked value
        moved = {key: _on_cpu(value) for key, value in out.items()}
        if phase == EVALUATE:  # each client's n_i, for clients.csv (raycompo/watch/per_client.py)
            moved[N_SAMPLES_KEY] = [n_samples(c.data) for c in ctxs]
        result.add(ids, moved)


def member_sizes(out: dict[str, Any], k: int) -> MemberSizes | list[dict[str, tuple[int, int]]]:
    """The k members' {key: (values, bytes)} in a batched phase's output: one dict for all
    (a (k, ...) tensor's row, a list of k Python numbers, a `Shares`' lengths as (k,)
    arrays: from shapes and types only, no call per member), else each member's (an item
    of a list of k of its own size, e.g. tensors of different sizes)."""
    rows: MemberSizes = {}
    items: dict[str, list] = {}
    for key, value in out.items():
        if isinstance(value, Shares):  # each member its own length, read at once
            rows[str(key)] = (value.lengths, value.lengths * value.values.element_size())
        elif isinstance(value, torch.Tensor):
            n = value.numel() // max(k, 1)
            rows[str(key)] = (n, n * value.element_size())
        elif set(map(type, value)) <= {int, float, bool}:  # numbers: one value each
            rows[str(key)] = count_values(0.0)
        else:
            items[str(key)] = value
    if not items:
        return rows
    return [{**{key: _of_member(sizes, i) for key, sizes in rows.items()},
             **{key: count_values(value[i]) for key, value in items.items()}} for i in range(k)]


def _of_member(sizes: tuple[Any, Any], i: int) -> tuple[int, int]:
    """Member i's (values, bytes) of a key's `MemberSizes` entry (numbers, or (k,) arrays)."""
    return tuple(int(x[i]) if isinstance(x, np.ndarray) else x for x in sizes)  # type: ignore[return-value]


SUM_BLOCK_BYTES = 1 << 20
"""A stacked contribution is summed in float64 this many bytes (of float64) of rows at a
time: float64 accumulation as `Host.map`'s, without a float64 copy of the whole (k, ...)."""


def _weighted_sum(value: torch.Tensor | list[float], mults: list[int], acc: Any) -> Any:
    """acc + sum_i mult_i value_i: a list of Python numbers sums as `host.add_into` does,
    one client after the other in float64 (the same float); a (k, ...) tensor in float64,
    a block of rows at a time (a block's float64 copy, never the whole), on its device,
    then moved to the CPU once."""
    if isinstance(value, Shares):
        raise TypeError("a batched phase's Shares (members' values of different lengths) is read with "
                        "ctx.map_rows or ctx.map_each, not summed by ctx.map")
    if isinstance(value, list):
        for m, v in zip(mults, value):
            acc = float(m) * float(v) if acc is None else acc + float(m) * float(v)
        return acc
    v = value.detach()
    k = v.shape[0]
    block = max(1, SUM_BLOCK_BYTES // (8 * max(1, v.numel() // k))) if k else 1
    w = None
    if mults.count(1) != len(mults):  # not a generator: no Python call per client
        w = torch.tensor([float(m) for m in mults], dtype=torch.float64, device=v.device).view(-1, *([1] * (v.dim() - 1)))
    total = None
    for i in range(0, k, block):  # one pass where the whole block is small
        part = v[i:i + block].to(torch.float64)
        if w is not None:
            part.mul_(w[i:i + block])
        total = part.sum(0) if total is None else total.add_(part.sum(0))
    if total is None:
        total = torch.zeros(v.shape[1:], dtype=torch.float64, device=v.device)
    total = total.cpu()
    return total if acc is None else acc + total


def _on_cpu(value: Any) -> Any:
    """A chunk's contribution as `Host.map` returns it: a (k, ...) tensor on the CPU, a copy
    of its own (a phase's answer may be a view of what it keeps, e.g. a state); a list of one
    value per member with its tensors on the CPU (those on another device moved, one by one:
    e.g. FastDRO's losses where a client holds fewer samples than a batch)."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, Shares):
        return value.to("cpu", copy=True)
    first = value[0] if isinstance(value, list) and value else None  # a chunk's members share one device
    if isinstance(first, torch.Tensor) and first.device.type != "cpu":
        return [v.detach().cpu() if isinstance(v, torch.Tensor) else v for v in value]
    return value
