"""ComFedL (Huang, Li & Huang), Algorithm 1.

Each round s: the server samples m of n devices (line 3) and broadcasts w_s (line 4);
each sampled device runs tau local steps from w_s (lines 6-15)

    y   = f^i_B(w)                         inner value on a batch B of size b   (line 9)
    u   = grad g^i_{B~}(y)^T grad f^i_B(w) compositional gradient, a VJP       (line 13)
    w  <- w - eta * u                                                            (line 14)

and the server averages the cohort's models, w_{s+1} = 1/m sum_i w^i_{s,tau} (line 18).

The composition is KL-regularized DRO by default (eq. 6: y = mean loss, g = exp(y/gamma)).
"""

from __future__ import annotations

from dataclasses import dataclass

from raycompo.algorithms.base import Algorithm, LocalSettings, client_phase, local_sgd
from raycompo.problems import KLDRO, compositional_gradient
from raycompo.settings import require


@dataclass
class ComFedLSettings(LocalSettings):
    gamma: float = 0.2
    """KL regularization gamma of eq. (4)-(6): outer g(y) = exp(y / gamma)."""
    outer_batch_size: int | None = None
    """Outer batch size b1 from D~_i (Algorithm 1 line 11), when g^i has data of its own."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        require(self.gamma > 0, f"gamma must be > 0, got {self.gamma}")


class ComFedL(Algorithm):
    name = "comfedl"
    Settings = ComFedLSettings

    def __init__(self, settings, task):
        super().__init__(settings, task)
        self.problem = self.build_problem()

    def build_problem(self):
        """The local composition g^i(f^i(w)) this variant solves."""
        return KLDRO(self.task.loss, self.s.gamma)

    def server_round(self, ctx, w, state):
        cohort = ctx.sample(self.s.cohort_size(ctx.n_clients))  # line 3
        sums = ctx.map("local", cohort, {"w": w})  # lines 4-16
        return sums["w"] / sums["count"], state  # line 18

    @client_phase("local")
    def client_local(self, c, state, payload):
        def u(w, batch, t):
            batch1 = None
            if self.problem.needs_outer_batch:  # lines 11-12: B~ from D~_i
                batch1 = c.data.outer_batch(c.rng(t, stream=1), self.s.outer_batch_size)
            return compositional_gradient(self.problem, w, batch, batch1)[0]

        w = local_sgd(c, payload["w"], self.s.tau, self.s.lr, self.s.batch_size, u)
        return {"w": w, "count": 1.0}, state
