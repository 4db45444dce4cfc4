"""A host's clients run as batched chunks (vectorized cohorts; the plan is raycompo/vectorize.py,
what a batched phase computes is raycompo/algorithms/cohort.py).

`run_batched` splits a host's share of a cohort into chunks that fit `vectorize_memory_mb`,
runs the algorithm's batched phase on each chunk, stores the returned states and either
sums the contributions (float64, weighted by multiplicity, as `Host.map` does client by
client) or returns them client by client.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from raycompo.algorithms.cohort import CohortBatch
from raycompo.engine.ledger import NUMBER_BYTES, MemberCosts, samples_read
from raycompo.per_client import EVALUATE, N_SAMPLES_KEY, n_samples

FLOATS_PER_MODEL = 8
"""Model-sized float tensors alive per client in a batched step: the rows of w, their
copy with requires_grad, the gradient, the update's temporaries, a state (momentum, a
personal model) and a returned contribution."""


MODELS_PER_TASK = 6
"""Model-sized tensors a MAML row (one task of a client's meta-batch) keeps in the vmap of
the Local-SCGD family: its iterate, inner value, estimate, gradient and Hessian-vector
product, and the pulled-back gradient (problems/maml_batched.py)."""


def chunk_size(dim: int, row_numel: int, width: int, budget_bytes: float, element_size: int = 4) -> int:
    """Clients per chunk: as many as fit the budget (at least 1). Per client: the model
    floats above plus the batch buffer and the activations (about 3 copies of a batch)."""
    per_client = element_size * (FLOATS_PER_MODEL * dim + 3 * width * row_numel) + 512
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
    return chunk_size(dim, row, width, host.batched_budget_bytes)


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
                reduce: bool, costs: MemberCosts | None = None) -> dict[Any, Any]:
    """`Host.map` for a phase with a batched form: chunks of clients, one batched call each.
    `costs`: where each member's samples read and contribution size are added."""
    fn = getattr(host.algorithm, host.algorithm.batched_phases[phase])
    result: dict[Any, Any] = {}
    if not items:
        return result
    for chunk in chunks(host, phase, items):
        ctxs = [host.context(cid, round_) for cid, _ in chunk]
        states = [host.state(c) for c in ctxs]
        read = [samples_read(c.data) for c in ctxs] if costs is not None else []
        out, new_states = fn(CohortBatch(ctxs, host.task, host.device), states, payload)
        if costs is not None:
            per_key = member_sizes(out, len(chunk))
            for (cid, mult), c, before in zip(chunk, ctxs, read):
                costs.add(cid, mult, (samples_read(c.data) - before) * mult, per_key)
        if len(new_states) != len(chunk):
            raise RuntimeError(f"batched phase {phase!r} returned {len(new_states)} states for {len(chunk)} clients")
        for (cid, _), st in zip(chunk, new_states):
            host.states.put(cid, st)
        if reduce:
            for key, value in out.items():
                result[key] = _weighted_sum(value, [m for _, m in chunk], result.get(key))
        else:  # one copy off the device per stacked value, then each client's row of its own
            moved = {key: value.detach().cpu() if isinstance(value, torch.Tensor) else value
                     for key, value in out.items()}
            for i, (cid, _) in enumerate(chunk):
                result[cid] = {key: _on_cpu(value[i]) for key, value in moved.items()}
                if phase == EVALUATE:  # each client's n_i, for clients.csv (raycompo/per_client.py)
                    result[cid][N_SAMPLES_KEY] = n_samples(ctxs[i].data)
    return result


def member_sizes(out: dict[str, Any], k: int) -> dict[str, tuple[int, int]]:
    """{key: (values, bytes)} of one member's contribution in a batched phase's output: a
    (k, ...) tensor's row, or one Python number of a list of k (from shapes only)."""
    sizes = {}
    for key, value in out.items():
        if isinstance(value, torch.Tensor):
            n = value.numel() // max(k, 1)
            sizes[str(key)] = (n, n * value.element_size())
        else:
            sizes[str(key)] = (1, NUMBER_BYTES)
    return sizes


def _weighted_sum(value: torch.Tensor | list[float], mults: list[int], acc: Any) -> Any:
    """acc + sum_i mult_i value_i: a list of Python numbers sums as `host.add_into` does,
    one client after the other in float64 (the same float); a (k, ...) tensor in float64."""
    if isinstance(value, list):
        for m, v in zip(mults, value):
            acc = float(m) * float(v) if acc is None else acc + float(m) * float(v)
        return acc
    v = value.detach().to("cpu", torch.float64)
    w = torch.tensor([float(m) for m in mults], dtype=torch.float64).view(-1, *([1] * (v.dim() - 1)))
    total = (v * w).sum(0)
    return total if acc is None else acc + total


def _on_cpu(value: Any) -> Any:
    """A client's contribution as `Host.map` returns it: tensors on the CPU, numbers as they
    are. A copy: a row of the chunk's tensor is a view, which would pickle (to the driver)
    with the storage of every client's row."""
    return value.detach().to("cpu", copy=True) if isinstance(value, torch.Tensor) else value
