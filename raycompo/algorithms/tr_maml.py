"""TR-MAML: task-robust MAML (Collins, Mokhtari & Shakkottai 2020), federated, the TR-MAML
baseline of the ComFedL journal (section 5.2). It solves problem (8),

    min_w max_{p in simplex} sum_i p_i F_i(w),   F_i(w) = f_i(w - eta_in * grad f_i(w)),

by alternating descent on w and projected ascent on the task weights p. Round s:

  1. the server samples a cohort of m clients and broadcasts w_s and p;
  2. each client runs tau local MAML steps from w_s (the same steps as ComFedL-MAML:
     support batch B, query batch B~, Hessian-vector product included) and reports its
     model and its mini-batch MAML loss F_i(w_s) at the first step;
  3. the server averages the cohort's models with weights p_i (normalized over the
     cohort): for tau = 1 this is a step along sum_i p_i grad F_i / sum_i p_i;
  4. p <- Proj_simplex(p + weight_lr * v), v_i = n/m * F_i(w_s) for sampled i, 0 otherwise.

Journal's tuned settings: inner 0.05, outer 0.1, task-weight lr 0.08.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from raycompo.algorithms.base import Algorithm, LocalSettings, client_phase
from raycompo.algorithms.drfl import project_simplex
from raycompo.algorithms.personalized import AdaptedEvaluation, MamlFields, maml_local
from raycompo.compression.keys import VALUE, WEIGHT, update
from raycompo.problems.maml import MAML
from raycompo.settings import require


@dataclass
class TrMamlSettings(MamlFields, LocalSettings):
    lr: float = 0.1
    """Outer (meta) learning rate of the local MAML steps (journal: 0.1)."""
    weight_lr: float = 0.08
    """Learning rate of the projected ascent on the task weights p (journal: 0.08)."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        require(self.weight_lr > 0, f"weight_lr must be > 0, got {self.weight_lr}")


class TrMaml(AdaptedEvaluation, Algorithm):
    name = "tr-maml"
    Settings = TrMamlSettings
    contributions = {"local": {"pw": update("w", weight="p"), "p": WEIGHT, "losses": VALUE}}
    """What a client sends up, per phase (raycompo/compression/keys.py)."""

    def __init__(self, settings, task):
        super().__init__(settings, task)
        self.problem = MAML(task.loss, settings.inner_lr, first_order=settings.first_order)

    def init_server_state(self, w0, n_clients):
        return {"p": torch.full((n_clients,), 1.0 / n_clients, dtype=torch.float64)}

    def server_round(self, ctx, w, state):
        p, n = state["p"], ctx.n_clients
        m = self.s.cohort_size(n)
        cohort = ctx.sample(m)  # 1.
        sums = ctx.map("local", cohort, {"w": w, "p": p, "n": n})  # 2.
        w_next = sums["pw"] / sums["p"]  # 3.
        v = (n / m) * sums["losses"].to(torch.float64)
        return w_next, {"p": project_simplex(p + self.s.weight_lr * v)}  # 4.

    @client_phase("local")
    def client_local(self, c, state, payload):
        w, value = maml_local(c, payload["w"], self.problem, self.s)
        p_i = float(payload["p"][c.client_id])
        losses = torch.zeros(payload["n"], dtype=torch.float64)
        losses[c.client_id] = float(value)
        return {"pw": p_i * w, "p": p_i, "losses": losses}, state
