"""Shared parts of the global-composition algorithms (FedDRO, vanilla FedAvg for CO,
minibatch SGD for CO): settings, the objective, mini-batches, the learning-rate drop,
and the global metrics (Phi(x-bar) and ||grad Phi(x-bar)||).

The objective Phi(x) = h(x) + f(1/K sum_k g_k(x)) (FedDRO eq. 2) comes from the task:
a task with the 'global_composition' capability defines it (e.g. the toy instance of
Theorem 4.1); otherwise the DRO objective named by `objective` is built on the task's
per-sample losses (`task.sample_losses(w, batch)`, capability 'sample_losses').
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from raycompo.algorithms.base import Algorithm, client_phase
from raycompo.algorithms.cohort import batched_phase
from raycompo.errors import ConfigError
from raycompo.problems import global_batched
from raycompo.problems.global_composition import (
    OBJECTIVES,
    GlobalComposition,
    dro_objective,
    full_parts,
    g_value_and_jacobian,
    h_grad,
    phi_from_parts,
)
from raycompo.settings import require

PHI_STREAM = 9
"""The stream key of a chunk's read of its clients' whole data for Phi (`batched_phi_parts`)."""


@dataclass
class GlobalCOSettings:
    lr: float = 0.01
    """Learning rate eta^t of the local steps (FedDRO Algorithm 2 line 6)."""
    sync_every: int = 1
    """I: local steps between two model averagings (paper symbol I). One engine round is
    one averaging period of I local steps (for mbsgd-co: I server steps)."""
    batch_size: int | None = 16
    """|b_g| = |b_h|: samples per client per step for g and for h (None: full local data)."""
    objective: str = "kl"
    """Phi: 'kl' (eq. 4), 'chi2' (eq. 5 as printed) or 'chi2-dro' (mean loss + Var / 2 lam);
    unused when the task defines its own composition (toy-co, fair-adult, fair-synth)."""
    lam: float = 1.0
    """lambda > 0 of eq. (4) / (5), the DRO regularization."""
    kl_shift: float = 0.0
    """KL only: g is computed as mean exp((l - kl_shift) / lam), which keeps exp finite
    for small lam; Phi shifts by -kl_shift / lam, its gradient does not change."""
    lr_decay_round: int | None = None
    """Round after which the learning rate is multiplied by lr_decay (paper: 90). None: never."""
    lr_decay: float = 0.1
    """Factor of the learning-rate drop (paper: 1/10)."""
    grad_norm_metric: bool = True
    """Log ||grad Phi(x-bar)|| on all clients' full data with the objective (one Jacobian
    of g per client per evaluation); false: the objective only."""
    phi_chunk: int = 1024
    """Samples per chunk when Phi and its gradient are computed on a client's full data."""

    def validate(self, n_clients: int) -> None:
        require(self.lr > 0, f"lr must be > 0, got {self.lr}")
        require(self.sync_every >= 1, f"sync_every (I, local steps per averaging) must be >= 1, got {self.sync_every}")
        require(self.batch_size is None or self.batch_size >= 1, f"batch_size must be >= 1, got {self.batch_size}")
        require(self.objective in OBJECTIVES, f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        require(self.lam > 0, f"lam (lambda of the DRO regularization) must be > 0, got {self.lam}")
        require(self.lr_decay_round is None or self.lr_decay_round >= 0, f"lr_decay_round must be >= 0, got {self.lr_decay_round}")
        require(0 < self.lr_decay <= 1, f"lr_decay must be in (0, 1], got {self.lr_decay}")
        require(self.phi_chunk >= 1, f"phi_chunk must be >= 1, got {self.phi_chunk}")


class GlobalCOAlgorithm(Algorithm):
    """Base of feddro, fedavg-co and mbsgd-co (no `name`: not registered)."""

    Settings = GlobalCOSettings
    requires = frozenset()  # empty: either of global_composition, sample_losses (check_task)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass that trains batched and keeps the base `client_phi_parts` gets its batched
        form, `batched_phi_parts` (batched phases are not inherited otherwise: base.py)."""
        super().__init_subclass__(**kwargs)
        trains_batched = any(phase != "evaluate" for phase in cls.batched_phases)
        inherits = getattr(cls, cls.phases.get("phi_parts", ""), None) is GlobalCOAlgorithm.client_phi_parts
        if trains_batched and inherits and "phi_parts" not in cls.batched_phases:
            cls.batched_phases = {**cls.batched_phases, "phi_parts": "batched_phi_parts"}

    @classmethod
    def check_task(cls, task_cls, settings) -> None:
        if cls.requires:  # a baseline that needs exactly these (FastDRO, PDSGD: per-sample losses)
            return super().check_task(task_cls, settings)
        if not task_cls.capabilities & {"global_composition", "sample_losses"}:
            raise ConfigError(
                f"{cls.name} needs a task with its own global composition or per-sample losses; "
                f"task {task_cls.name} has neither"
            )

    @classmethod
    def cannot_batch_task(cls, task_cls, settings) -> str | None:
        if "global_composition" in task_cls.capabilities:
            return f"{cls.name} on task {task_cls.name} solves the task's own composition, which has no batched form"
        return task_cls.cannot_batch_samples()

    def __init__(self, settings, task):
        super().__init__(settings, task)
        self.problem: GlobalComposition = self.build_problem()

    def build_problem(self) -> GlobalComposition:
        if "global_composition" in self.task.capabilities:
            return self.task.global_composition(self.s)  # type: ignore[attr-defined]
        kwargs = {"shift": self.s.kl_shift} if self.s.objective == "kl" else {}
        return dro_objective(self.s.objective, self.task.sample_losses, self.s.lam, **kwargs)  # type: ignore[attr-defined]

    # --- server ---------------------------------------------------------------------------
    def lr_at(self, round_: int) -> float:
        """eta for engine round `round_` (0-based): dropped by lr_decay from lr_decay_round on."""
        s = self.s
        return s.lr * (s.lr_decay if s.lr_decay_round is not None and round_ >= s.lr_decay_round else 1.0)

    def global_metrics(self, ctx, w: torch.Tensor, row: dict[str, Any]) -> dict[str, float]:
        """objective = Phi(x-bar) and grad_norm = ||grad Phi(x-bar)|| on all clients' full
        training data (an extra exchange at evaluation time; the driver calls this)."""
        clients = list(range(ctx.n_clients))
        sums = ctx.map("phi_parts", clients, {"w": w})
        parts = {k: v.to(torch.float64) / len(clients) for k, v in sums.items()}
        return phi_from_parts(self.problem, parts)

    # --- client ---------------------------------------------------------------------------
    @client_phase("phi_parts")
    def client_phi_parts(self, c, state, payload):
        return full_parts(self.problem, payload["w"], c.data.x, c.data.y, self.s.phi_chunk, self.s.grad_norm_metric), state

    @batched_phase("phi_parts")
    def batched_phi_parts(self, cb, states, payload):
        """client_phi_parts for a chunk: each client's full-data parts from one padded read of
        the chunk's whole data (not counted: an evaluation), where every client's data is one
        `phi_chunk` (what the per-client path computes at once: the same batch, also for a
        model with batch statistics, and no more memory per client) and the read fits; else
        client by client. A population's rows each at its trial's x-bar, with its trial's lam."""
        w = cb.broadcast(payload["w"])
        whole = cb.whole(PHI_STREAM, count=False) if max(cb.sizes) <= self.s.phi_chunk else None
        if whole is not None:
            return global_batched.full_parts(cb.task, self.problem, w, whole, self.s.grad_norm_metric), states
        rows = [full_parts(self.problem.row(i), w[i], d.x, d.y, self.s.phi_chunk, self.s.grad_norm_metric)
                for i, d in enumerate(cb.data)]
        return {k: torch.stack([r[k] for r in rows]) for k in rows[0]}, states

    def batches(self, c, step: int) -> tuple[Any, Any]:
        """(b_g, b_h) for local step `step`: independent draws (streams 0 and 1); b_h is
        None when the objective has no h."""
        b_g = c.data.batch(c.rng(step, 0), self.s.batch_size)
        b_h = c.data.batch(c.rng(step, 1), self.s.batch_size) if self.problem.has_h else None
        return b_g, b_h

    def batched_batches(self, cb, step: int) -> tuple[Any, Any]:
        """`batches` for a chunk of clients: their (b_g, b_h) of local step `step`, padded."""
        b_g = cb.batch(step, self.s.batch_size, 0)
        b_h = cb.batch(step, self.s.batch_size, 1) if self.problem.has_h else None
        return b_g, b_h

    def g_at(self, x: torch.Tensor, batch: Any) -> torch.Tensor:
        with torch.no_grad():
            return self.problem.g(x, batch)

    def local_parts(self, x: torch.Tensor, b_g: Any, b_h: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(g_k(x; b_g), its Jacobian, grad h_k(x; b_h))."""
        value, jac = g_value_and_jacobian(self.problem, x, b_g)
        gh = h_grad(self.problem, x, b_h) if b_h is not None else None
        return value, jac, gh

    @client_phase("ping")
    def client_ping(self, c, state, payload):
        """A y-sized reply and no work: the bare cost of one exchange (`python -m raycompo.bench feddro`)."""
        return {"y": torch.zeros(self.problem.d_g)}, state
