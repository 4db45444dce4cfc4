"""Per-task inner states u_i as rows of one tensor per client (issue 41): Local-MOML's and
per-task Local-SCGDM's estimates (algorithms/local_compositional.py).

A client owns a fixed list of training tasks (`task_ids`, by the task's partition). Its
per-task states are two entries of its client state:

    u_task  (T, d)  row j: u_i of its j-th task (zeros while that task was never sampled)
    u_seen  (T,)    bool: whether task j was sampled (its u_i exists; line 3's rule makes
                    the first value g_i(x) itself)

T is the same for every client of the task (`slots`: the most tasks any client owns), so
that a chunk's states are rows of one layout, which the state store reads and writes as
(k, T, d) with one copy per key, and a batched step reads and writes the sampled tasks'
rows with one indexed operation each, not one dict entry per task.

States written before (release 0.1.1 and earlier: `u_task` a dict {task id: u_i}, an
empty dict for a client that has none) are read as the same rows (`rows_of`), so a
checkpoint of an earlier release resumes to the same numbers.
"""

from __future__ import annotations

from typing import Any

import torch

U_TASK, U_SEEN = "u_task", "u_seen"


def slots(task: Any, client_tasks: list[int]) -> int:
    """T: the task's most training tasks on one client (`max_tasks_per_client`), or this
    client's own count for a task that does not say (its states then may not stack)."""
    most = getattr(task, "max_tasks_per_client", None)
    return int(most) if most is not None else len(client_tasks)


def position(task_ids: list[int]) -> dict[int, int]:
    """{task id: its row} of a client's tasks."""
    return {tid: j for j, tid in enumerate(task_ids)}


def rows_of(state: dict[str, Any], task_ids: list[int], t: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(u_task (T, d), u_seen (T,)): a client's per-task states as rows, copies it may write;
    from a state of an earlier release (a dict by task id) or a client without one (an
    empty dict, or no entry) the same rows. `like`: a (d,) tensor of the model's dtype and
    device."""
    u = state.get(U_TASK)
    if isinstance(u, torch.Tensor):
        return u.clone(), state[U_SEEN].clone()
    rows = torch.zeros((t, like.shape[-1]), dtype=like.dtype, device=like.device)
    seen = torch.zeros(t, dtype=torch.bool, device=like.device)
    at = position(task_ids)
    for tid, value in (u or {}).items():
        if tid not in at:
            raise ValueError(f"a per-task state names task {tid!r}, which this client does not own ({task_ids})")
        rows[at[tid]] = value.to(like.device, like.dtype)
        seen[at[tid]] = True
    return rows, seen
