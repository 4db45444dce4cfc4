"""The algorithm interface: a server round written against a context, and client hooks.

An algorithm reads like the paper's pseudo-code:

* `server_round(ctx, w, state)` is the server's part of one round (one communication
  round s of ComFedL, one model-averaging period of FedDRO). It samples cohorts with
  `ctx.sample(...)` and runs client hooks with `ctx.map(phase, cohort, payload)`, which
  returns the cohort's SUM of what the hook returned (pre-reduced on each host).
* `client_<phase>(c, payload)` is a device's part: `c.data` is its local data, `c.state`
  its persistent state (momentum, inner estimates, personal model...), `c.rng(step)` its
  random stream seeded by (seed, client, round, step).

Algorithms never import Ray: the engine implements `ctx` inline or over Ray actors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import torch

from raycompo.settings import require
from raycompo.tasks.base import ClientData, Task

Payload = dict[str, Any]
Contribution = dict[str, Any]


class ClientContext(Protocol):
    """What a client hook sees."""

    client_id: int
    data: ClientData
    state: dict[str, Any]
    round: int
    device: torch.device

    def rng(self, step: int, stream: int = 0) -> torch.Generator: ...


class RoundContext(Protocol):
    """What the server's round sees."""

    round: int
    n_clients: int
    num_samples: list[int]

    def rng(self, stream: int = 0) -> torch.Generator: ...

    def sample(self, m: int) -> list[int]: ...

    def map(self, phase: str, cohort: list[int], payload: Payload) -> dict[str, Any]: ...

    def map_each(self, phase: str, cohort: list[int], payload: Payload) -> dict[int, dict[str, Any]]: ...


@dataclass
class LocalSettings:
    """Settings shared by the local-update (local-SGD style) algorithms."""

    lr: float = 0.01
    """Learning rate eta of the local steps."""
    tau: int = 5
    """Synchronization gap tau: local steps between two averagings."""
    batch_size: int | None = 32
    """Mini-batch size b drawn from D_i at every local step (None: full local data)."""
    clients_per_round: int | None = None
    """Cohort size m sampled by the server each round (None: all n clients)."""

    def validate(self, n_clients: int) -> None:
        require(self.lr > 0, f"lr must be > 0, got {self.lr}")
        require(self.tau >= 1, f"tau must be >= 1, got {self.tau}")
        require(self.batch_size is None or self.batch_size >= 1, f"batch_size must be >= 1, got {self.batch_size}")
        m = self.clients_per_round
        require(
            m is None or 1 <= m <= n_clients,
            f"clients_per_round (m) must be in [1, n={n_clients}], got {m}",
        )

    def cohort_size(self, n_clients: int) -> int:
        return n_clients if self.clients_per_round is None else self.clients_per_round


class Algorithm:
    """Base class. Subclasses set `name` and `Settings` and write the hooks."""

    name: ClassVar[str]
    Settings: ClassVar[type] = LocalSettings

    def __init__(self, settings: Any, task: Task):
        self.s = settings
        self.task = task

    # --- server side ---------------------------------------------------------------
    def init_server_state(self, w0: torch.Tensor, n_clients: int) -> dict[str, Any]:
        """Server state besides the global model (e.g. DRFL's mixing weights)."""
        return {}

    def server_round(self, ctx: RoundContext, w: torch.Tensor, state: dict[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
        raise NotImplementedError

    # --- client side ---------------------------------------------------------------
    def init_client_state(self, c: ClientContext) -> dict[str, Any]:
        """Persistent per-client state, created the first time the client is used."""
        return {}

    def client_evaluate(self, c: ClientContext, payload: Payload) -> dict[str, float]:
        """Per-client metrics of the global model (personalized methods override)."""
        return self.task.evaluate(payload["w"], c.data)

    # --- helpers -------------------------------------------------------------------
    def loss_grad(self, w: torch.Tensor, batch: Any) -> torch.Tensor:
        """Gradient of the task's mean loss at w on a batch."""
        return torch.func.grad(self.task.loss)(w, batch)


def local_sgd(c: ClientContext, w: torch.Tensor, steps: int, lr: float, batch_size: int | None, direction, snapshot_at: int | None = None):
    """`steps` local steps w <- w - lr * direction(w, batch, t), batch ~ D_i seeded by step t.

    Returns the final iterate, and the iterate after `snapshot_at` steps if asked.
    """
    snap = w if snapshot_at == 0 else None
    for t in range(steps):
        batch = c.data.batch(c.rng(t), batch_size)
        w = w - lr * direction(w, batch, t)
        if snapshot_at is not None and t + 1 == snapshot_at:
            snap = w
    return (w, snap) if snapshot_at is not None else w
