"""The "unconstrained" baseline of the FedDRO paper's fairness experiment (section 6,
Figure 3): "a simple parallel SGD ... that ignores the fairness constraints".

One model; at every step each of the K clients draws |b| samples (stream 0, FedDRO's
b_g draws) and returns the gradient of the task's plain loss (`task.loss`: the mean
logistic loss on the fairness tasks, i.e. h alone, without f(g)); the server steps
x <- x - eta 1/K sum_k grad. One exchange per step; one engine round = `sync_every` (I)
steps. On a DRO task it is plain ERM. The rows still log the task's Phi (`objective`), so
the penalty it ignores is visible.
"""

from __future__ import annotations

from raycompo.algorithms.base import client_phase, grad_of
from raycompo.algorithms.co_common import GlobalCOAlgorithm, GlobalCOSettings
from raycompo.compression.keys import VALUE


class Unconstrained(GlobalCOAlgorithm):
    name = "unconstrained"
    Settings = GlobalCOSettings
    contributions = {"grad": {"g": VALUE}}
    """What a client sends up, per phase (raycompo/compression/keys.py)."""

    def server_round(self, ctx, w, state):
        clients = list(range(ctx.n_clients))
        lr = self.lr_at(ctx.round)
        for j in range(self.s.sync_every):
            w = w - lr * ctx.map("grad", clients, {"w": w, "j": j})["g"] / len(clients)
        return w, state

    @client_phase("grad")
    def client_grad(self, c, state, payload):
        batch = c.data.batch(c.rng(payload["j"], 0), self.s.batch_size)
        return {"g": grad_of(self.task.loss, payload["w"], batch)}, state
