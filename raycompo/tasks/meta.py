"""Federated meta-learning tasks (Local-SCGDM section 3.3, eq. 8): each client owns a
distribution of learning tasks, and the federation learns a meta-initialization x for
one-step MAML, the composition f(g(x)) with inner map g(x) = x - lambda grad L_train(x)
and outer function f(y) = L_test(y).

A client's `batch(gen, size)` is a meta-batch: `size` tasks, each a `TaskSample(key,
support, query)`; `key` identifies the task among a finite training set (per-task inner
states, MOML) or is None when tasks are drawn afresh (Omniglot N-way episodes).
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch
from torch.func import grad, vmap

from raycompo.problems.maml import MAML
from raycompo.tasks.base import Task


class TaskSample(NamedTuple):
    key: int | None
    """Task id in the client's finite task set, or None for a fresh episode."""
    support: Any
    """The task's training set D_train (the inner map's data xi)."""
    query: Any
    """The task's test set D_test (the outer function's data zeta)."""


class MetaRows(NamedTuple):
    """A chunk's meta-batches of one step as R rows, one per sampled task (client-major):
    `MetaTask.meta_rows`."""

    owner: torch.Tensor
    """(R,) int64: the row's client, by position in the chunk."""
    position: torch.Tensor
    """(R,) int64: the row's task, by position in its client's `task_ids` (its per-task state's row)."""
    support: tuple[torch.Tensor, torch.Tensor]
    """(inputs, targets), each (R, K_s, ...): the rows' D_train."""
    query: tuple[torch.Tensor, torch.Tensor]
    """(inputs, targets), each (R, K_q, ...): the rows' D_test."""
    per_client: np.ndarray
    """(k,) int64: the tasks each client sampled."""


class MetaTask(Task):
    """Base of meta-learning tasks; subclasses give the data, the model and the loss.
    Their settings have `maml_inner_lr` (lambda) and `eval_steps`."""

    capabilities = frozenset({"composition"})
    """Tasks with a finite set of training tasks with ids (needed by per-task states) add
    'task_ids': each client then has `task_ids`, and the task may say
    `max_tasks_per_client` (so that every client's per-task states have one layout:
    algorithms/task_states.py)."""
    default_metric = ("val_loss", "min")
    vmap_meta_batches: ClassVar[bool] = False
    """Whether all clients' meta-batch tasks share their support and query shapes and the
    model has no buffers, so the Local-SCGD family runs them as one `torch.func.vmap`
    (vectorized cohorts, problems/maml_batched.py)."""

    def meta_rows(self, clients: list[Any], seeds: torch.Tensor, size: int | None) -> MetaRows | None:
        """The meta-batches `batch(generator of seed seeds[i], size)` of a chunk's clients
        at one step, drawn at once as rows, or None (the default) where the task draws them
        client by client. `seeds` (k,) int64: each client's step seed, its 64 bits."""
        return None

    def composition(self, first_order: bool = False) -> MAML:
        """The client's local composition for the compositional algorithms."""
        return MAML(self.loss, self.settings.maml_inner_lr, first_order=first_order)

    def adapted_loss(self, w: torch.Tensor, support: Any, query: Any) -> torch.Tensor:
        """Query loss after `eval_steps` gradient steps of size lambda on the support set."""
        for _ in range(self.settings.eval_steps):
            w = w - self.settings.maml_inner_lr * grad(self.loss)(w, support)
        return self.loss(w, query)

    def adapted_losses(self, w: torch.Tensor, support: Any, query: Any) -> torch.Tensor:
        """`adapted_loss` of many tasks at once: support and query carry a leading task axis."""
        return vmap(self.adapted_loss, in_dims=(None, 0, 0))(w, support, query)
