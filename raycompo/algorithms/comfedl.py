"""ComFedL (Huang, Li & Huang), Algorithm 1.

Each round s: the server samples m of n devices (line 3) and broadcasts w_s (line 4);
each sampled device runs tau local steps from w_s (lines 6-15)

    y   = f^i_B(w)                         inner value on a batch B of size b   (line 9)
    u   = grad g^i_{B~}(y)^T grad f^i_B(w) compositional gradient, a VJP       (line 13)
    w  <- w - eta * u                                                            (line 14)

and the server averages the cohort's models, w_{s+1} = 1/m sum_i w^i_{s,tau} (line 18).

The composition is KL-regularized DRO by default (eq. 6: y = mean loss, g = exp(y/gamma)).

`normalizer="lse"` (ours; default "none" = Algorithm 1 as printed) optimizes eq. (5), the
log-sum-exp form gamma log(1/n sum_i exp(f_i(w)/gamma)), instead of eq. (6). Same
minimizers, but eq. (6)'s step exp(f/gamma)/gamma grad f is about 5e5 grad f at the
paper's gamma = 0.2 from the initial loss ln 10, which sends lr = 0.01 to infinity. Each
round, before the local steps, the server gathers every cohort member's f_i(w_s) (one
extra exchange of a scalar per client: phase "robust_value"; f_i on the mini-batch of the
client's first local step, B (and B~ for DAMAML) drawn again from the same seeds, so it
costs one forward pass) and broadcasts

    c = gamma log(1/m sum_{i in cohort} exp(f_i(w_s)/gamma))      (torch.logsumexp)

and the clients step with exp((f_B(w) - c)/gamma) grad f_B(w) (outer g_c(y) =
gamma exp((y - c)/gamma), see raycompo.problems.dro). With tau = 1 and full batches the
server's average is exactly a gradient step on eq. (5) over the cohort; in general each
round's steps are eq. (6)'s scaled by the round constant gamma exp(-c/gamma).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from raycompo.algorithms.base import Algorithm, Buffered, LocalSettings, client_phase, local_sgd
from raycompo.algorithms.cohort import batched_phase
from raycompo.compression.keys import VALUE, WEIGHT, update
from raycompo.problems import KLDRO, compositional_gradient
from raycompo.settings import require

NORMALIZERS = ("none", "lse")


def require_normalizer(value: str) -> None:
    require(
        value in NORMALIZERS,
        f"normalizer must be one of {', '.join(NORMALIZERS)} ('none': eq. (6) as in Algorithm 1; "
        f"'lse': the log-sum-exp eq. (5)), got {value!r}",
    )


@dataclass
class ComFedLSettings(LocalSettings):
    gamma: float = 0.2
    """KL regularization gamma of eq. (4)-(6): outer g(y) = exp(y / gamma)."""
    outer_batch_size: int | None = None
    """Outer batch size b1 from D~_i (Algorithm 1 line 11), when g^i has data of its own."""
    normalizer: str = "none"
    """'none': Algorithm 1 on eq. (6), steps exp(f_B/gamma)/gamma grad f_B (the paper).
    'lse': eq. (5), steps exp((f_B - c)/gamma) grad f_B with c = gamma log-mean-exp of the
    cohort's f_i(w_s) (one extra scalar exchange per round; stable at small gamma)."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        require(self.gamma > 0, f"gamma must be > 0, got {self.gamma}")
        require_normalizer(self.normalizer)


class ComFedL(Algorithm):
    name = "comfedl"
    Settings = ComFedLSettings
    contributions = {"robust_value": {"f": VALUE}, "local": {"w": update("w"), "count": WEIGHT}}
    """What a client sends up, per phase (raycompo/compression/keys.py)."""
    population_phases = frozenset({"local"})
    """A population's trials run its local steps as rows of one chunk (engine/population.py)."""
    row_settings = frozenset({"lr", "gamma"})

    def __init__(self, settings, task):
        super().__init__(settings, task)
        self.problem = self.build_problem()

    def build_problem(self):
        """The local composition g^i(f^i(w)) this variant solves."""
        return KLDRO(self.task.loss, self.s.gamma)

    def server_round(self, ctx, w, state):
        cohort = ctx.sample(self.s.cohort_size(ctx.n_clients))  # line 3
        payload = {"w": w}
        if getattr(self.s, "normalizer", "none") == "lse":
            payload["center"] = self.lse_center(ctx, cohort, w)
        sums = ctx.map("local", cohort, payload)  # lines 4-16
        return sums["w"] / sums["count"], state  # line 18

    @classmethod
    def asynchronous(cls, settings):
        """Buffered ComFedL (a research extension, not the paper's algorithm): a client runs
        Algorithm 1's tau local steps from the model it downloaded; its inner value
        y = f_B(w) is its own, recomputed at every step, so only w is stale. Normalizer
        'lse' is refused: its centre c needs every cohort member's f_i(w_s) before anyone
        steps, a barrier."""
        if getattr(settings, "normalizer", "none") == "lse":
            return ("comfedl with normalizer='lse' needs the cohort's f_i(w_s) before the local steps (the "
                    "log-sum-exp centre c), a barrier by construction; use normalizer='none' asynchronously")
        return Buffered(phase="local", model="w", count="count")

    def lse_center(self, ctx, cohort, w) -> float:
        """c = gamma log(1/m sum_{i in cohort} exp(f_i(w_s)/gamma)), from the cohort's values."""
        f = ctx.map_rows("robust_value", cohort, {"w": w}).stacked("f", cohort).reshape(len(cohort)).to(torch.float64)
        gamma = self.s.gamma
        return float(gamma * (torch.logsumexp(f / gamma, 0) - math.log(len(cohort))))

    def client_problem(self, payload):
        """The composition of this round: eq. (6), or eq. (5)'s form centred at c."""
        center = payload.get("center")
        return self.problem if center is None else dataclasses.replace(self.problem, center=center)

    @client_phase("robust_value")
    def client_robust_value(self, c, state, payload):
        """f_i(w_s) on the batches of the client's first local step (normalizer 'lse'):
        B (stream 0) and B~ (stream 1) of step 0, drawn again from the same seeds."""
        batch = c.data.batch(c.rng(0), self.s.batch_size)
        batch1 = None
        if self.problem.needs_outer_batch:
            batch1 = c.data.outer_batch(c.rng(0, stream=1), self.s.outer_batch_size)
        return {"f": self.problem.robust_value(payload["w"], batch, batch1).detach()}, state

    @client_phase("local")
    def client_local(self, c, state, payload):
        problem = self.client_problem(payload)

        def u(w, batch, t):
            batch1 = None
            if problem.needs_outer_batch:  # lines 11-12: B~ from D~_i
                batch1 = c.data.outer_batch(c.rng(t, stream=1), self.s.outer_batch_size)
            return compositional_gradient(problem, w, batch, batch1)[0]

        w = local_sgd(c, payload["w"], self.s.tau, self.s.lr, self.s.batch_size, u)
        return {"w": w, "count": 1.0}, state

    # --- the same phases for a chunk of clients at once (algorithms/cohort.py) ----------
    @classmethod
    def cannot_batch(cls, settings):
        if settings.outer_batch_size is not None:
            return "comfedl with an outer batch of its own (outer_batch_size) runs per client"
        return None

    @batched_phase("robust_value")
    def batched_robust_value(self, cb, states, payload):
        batch = cb.batch(0, self.s.batch_size)
        return {"f": cb.losses(cb.broadcast(payload["w"]), batch).detach()}, states

    @batched_phase("local")
    def batched_local(self, cb, states, payload):
        problem = self.client_problem(payload)  # KL-DRO: u = g'(f_B(w)) grad f_B(w) per client
        w = cb.local_sgd(cb.broadcast(payload["w"]), self.s.tau, self.s.lr, self.s.batch_size,
                         cb.loss_gradient(scale=problem.outer_grad))
        return {"w": w, "count": [1.0] * cb.k}, states
