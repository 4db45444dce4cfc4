"""DRFL: Distributionally Robust Federated Averaging (DRFA; Deng, Kamani & Mahdavi,
NeurIPS 2020, Algorithm 1), for min_w max_{lambda in simplex} sum_i lambda_i f_i(w).

Round s:
  1. the server samples a cohort D of m clients according to the mixing weights lambda
     (with replacement) and a step t' uniformly from {1, ..., tau};
  2. each client runs tau local SGD steps from w and returns its last iterate and the
     iterate after t' steps; the server averages both: w_{s+1} and w^{t'};
  3. the server samples U, m clients uniformly, which report their mini-batch loss
     f_i(w^{t'}); v_i = n/m f_i(w^{t'}) for i in U (0 otherwise);
  4. projected ascent on the weights: lambda <- Proj_simplex(lambda + weight_lr * tau * v).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from raycompo.algorithms.base import Algorithm, LocalSettings, client_phase, local_sgd
from raycompo.algorithms.cohort import batched_phase
from raycompo.compression.keys import VALUE, WEIGHT, update
from raycompo.settings import require


def project_simplex(v: torch.Tensor) -> torch.Tensor:
    """Euclidean projection onto {x >= 0, sum x = 1} (sort-based, Duchi et al. 2008)."""
    u, _ = torch.sort(v, descending=True)
    css = torch.cumsum(u, 0) - 1
    k = torch.arange(1, len(v) + 1, dtype=v.dtype)
    rho = int(torch.nonzero(u - css / k > 0).max())
    theta = css[rho] / (rho + 1)
    return torch.clamp(v - theta, min=0)


@dataclass
class DRFLSettings(LocalSettings):
    weight_lr: float = 0.08
    """Learning rate gamma of the projected ascent on the mixing weights lambda."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        require(self.weight_lr > 0, f"weight_lr must be > 0, got {self.weight_lr}")


class DRFL(Algorithm):
    name = "drfl"
    Settings = DRFLSettings
    contributions = {"local": {"w": update("w"), "w_snap": update("w"), "count": WEIGHT}, "loss": {"loss": VALUE}}
    """What a client sends up, per phase (raycompo/compression/keys.py)."""

    own_cohorts = ("its cohort D is drawn with replacement by the mixing weights lambda and its loss set U by "
                   "its own generator (Deng et al.'s steps 1 and 3), not through the engine's cohort draw")

    def init_server_state(self, w0, n_clients):
        return {"lambda": torch.full((n_clients,), 1.0 / n_clients, dtype=torch.float64)}

    def server_round(self, ctx, w, state):
        lam = state["lambda"]
        n, m, tau = ctx.n_clients, self.s.cohort_size(ctx.n_clients), self.s.tau
        g = ctx.rng()
        cohort = torch.multinomial(lam.float(), m, replacement=True, generator=g).tolist()  # 1.
        t_snap = int(torch.randint(1, tau + 1, (1,), generator=g))
        sums = ctx.map("local", cohort, {"w": w, "t_snap": t_snap})  # 2.
        w_next, w_snap = sums["w"] / sums["count"], sums["w_snap"] / sums["count"]
        u_set = torch.randperm(n, generator=g)[:m].tolist()  # 3.
        losses = ctx.map_rows("loss", u_set, {"w": w_snap}).stacked("loss", u_set)  # f_i(w^{t'}), in u_set's order
        v = torch.zeros(n, dtype=torch.float64)
        v[torch.tensor(u_set)] = losses.reshape(len(u_set)).to(torch.float64) * (n / m)
        state = {"lambda": project_simplex(lam + self.s.weight_lr * tau * v)}  # 4.
        return w_next, state

    @client_phase("local")
    def client_local(self, c, state, payload):
        w, snap = local_sgd(
            c, payload["w"], self.s.tau, self.s.lr, self.s.batch_size,
            lambda w, b, t: self.loss_grad(w, b), snapshot_at=payload["t_snap"],
        )
        return {"w": w, "w_snap": snap, "count": 1.0}, state

    @client_phase("loss")
    def client_loss(self, c, state, payload):
        with torch.no_grad():
            batch = c.data.batch(c.rng(0, stream=2), self.s.batch_size)
            return {"loss": self.task.loss(payload["w"], batch)}, state

    # --- the same phases for a chunk of clients at once (algorithms/cohort.py) ----------
    @batched_phase("local")
    def batched_local(self, cb, states, payload):
        w, snap = cb.local_sgd(cb.broadcast(payload["w"]), self.s.tau, self.s.lr, self.s.batch_size,
                               cb.loss_gradient(), snapshot_at=payload["t_snap"])
        return {"w": w, "w_snap": snap, "count": [1.0] * cb.k}, states

    @batched_phase("loss")
    def batched_loss(self, cb, states, payload):
        with torch.no_grad():
            return {"loss": cb.losses(cb.broadcast(payload["w"]), cb.batch(0, self.s.batch_size, stream=2))}, states
