"""GCIVR (Haddadpour et al. 2022, "Learning distributionally robust models at scale via
composite optimization"), the distributed baseline of the FedDRO paper's fairness
experiment (section 6, Figure 3), run in parallel over the K clients.

GCIVR extends the composite incremental variance reduction of Zhang & Xiao (2019, CIVR)
to Phi(x) = h(x) + f(g(x)) with a non-compositional h: the inner value g, its Jacobian
and grad h are each tracked by a SARAH/SPIDER-style recursive estimator, reset by a
large-batch checkpoint every tau steps. The FedDRO paper's Table 1 lists its batches as
sqrt(m) inside a period and m (all samples) at a checkpoint. On K clients, step t:

    t mod tau == 0 (checkpoint):  every client k computes on B samples (default: all of its
        data)  g_k, J_k = dg_k/dx, grad h_k  at x^t;  the server averages them:
        y^t = 1/K sum_k g_k,  Z^t = 1/K sum_k J_k,  v^t = 1/K sum_k grad h_k;
    otherwise (correction):  every client draws one batch b_k of |b| samples and returns
        the differences at x^t and x^{t-1} on that same batch; the server adds their mean:
        y^t = y^{t-1} + 1/K sum_k [g_k(x^t; b_k) - g_k(x^{t-1}; b_k)],  likewise Z^t, v^t;
    step:  x^{t+1} = x^t - eta (v^t + (Z^t)^T grad f(y^t)).

With |b| = all local data the corrections telescope and every step is the exact gradient
of Phi (tests check it). One exchange per step (the clients return their parts, the server
sends x^{t+1} and x^t), like the parallel baselines; one engine round = `sync_every` (I)
steps. The estimates and x^{t-1} are server state (checkpointed).

Departures (our reading): Haddadpour et al.'s code takes Adagrad steps (lr 0.01) on the full
training set; we take plain gradient steps on mini-batches, the same update rule as FedDRO
and the unconstrained baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from raycompo.algorithms.base import client_phase
from raycompo.algorithms.co_common import GlobalCOAlgorithm, GlobalCOSettings
from raycompo.compression.keys import VALUE
from raycompo.problems.global_composition import direction
from raycompo.settings import require


@dataclass
class GCIVRSettings(GlobalCOSettings):
    full_every: int = 100
    """tau: steps between two large-batch checkpoints of the estimators (Haddadpour et al.'s full_step)."""
    large_batch: int | None = None
    """B: samples per client at a checkpoint (None: the client's full data, the finite-sum setting)."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        require(self.full_every >= 1, f"full_every (tau) must be >= 1, got {self.full_every}")
        require(self.large_batch is None or self.large_batch >= 1,
                f"large_batch must be >= 1, got {self.large_batch}")


class GCIVR(GlobalCOAlgorithm):
    name = "gcivr"
    Settings = GCIVRSettings
    contributions = {"checkpoint": {"g": VALUE, "jac": VALUE, "gh": VALUE}, "correction": {"g": VALUE, "jac": VALUE, "gh": VALUE}}
    """What a client sends up, per phase (raycompo/compression/keys.py)."""

    def server_round(self, ctx, w, state):
        clients = list(range(ctx.n_clients))
        K, steps = len(clients), self.s.sync_every
        lr = self.lr_at(ctx.round)
        est, w_prev = state.get("est"), state.get("w_prev")
        finite = True
        for j in range(steps):
            t = ctx.round * steps + j
            if est is None or t % self.s.full_every == 0:
                parts = ctx.map("checkpoint", clients, {"w": w, "j": j})
                est = {k: v / K for k, v in parts.items()}
            else:
                parts = ctx.map("correction", clients, {"w": w, "w_prev": w_prev, "j": j})
                est = {k: est[k] + parts[k] / K for k in est}
            finite = finite and bool(torch.isfinite(est["g"]).all())
            w_prev, w = w, w - lr * direction(self.problem, est["jac"], est["g"], est.get("gh"))
        if not finite:
            w = torch.full_like(w, float("nan"))  # the driver reports a divergence
        return w, {"est": est, "w_prev": w_prev}

    # --- client ---------------------------------------------------------------------
    def _parts(self, w: torch.Tensor, batch) -> dict[str, torch.Tensor]:
        g, jac, gh = self.local_parts(w, batch, batch if self.problem.has_h else None)
        return {"g": g, "jac": jac} if gh is None else {"g": g, "jac": jac, "gh": gh}

    @client_phase("checkpoint")
    def client_checkpoint(self, c, state, payload):
        batch = c.data.batch(c.rng(payload["j"], 0), self.s.large_batch)
        return self._parts(payload["w"], batch), state

    @client_phase("correction")
    def client_correction(self, c, state, payload):
        batch = c.data.batch(c.rng(payload["j"], 0), self.s.batch_size)  # one batch at both points
        new, old = self._parts(payload["w"], batch), self._parts(payload["w_prev"], batch)
        return {k: new[k] - old[k] for k in new}, state
