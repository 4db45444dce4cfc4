"""Minibatch SGD for compositional optimization, the parallel version (FedDRO paper,
section 6, MBSGD baseline after Ghadimi & Lan 2013): one model, and at every step all
K clients' samples are used,

    y-bar = 1/K sum_k g_k(x; b_g^k)    (plug-in mini-batch estimate of g, K |b| samples)
    x <- x - eta (1/K sum_k grad h_k(x; b_h^k) + (1/K sum_k grad g_k(x; b_g^k)) grad f(y-bar))

so each step costs one exchange of g_k, its Jacobian and grad h_k (d (d_g + 1) numbers
per client). One engine round = `sync_every` (I) such steps, the same samples per round
as FedDRO with the same I.
"""

from __future__ import annotations

from raycompo.algorithms.base import client_phase
from raycompo.algorithms.co_common import GlobalCOAlgorithm, GlobalCOSettings
from raycompo.algorithms.cohort import batched_phase
from raycompo.compression.keys import VALUE
from raycompo.problems import global_batched
from raycompo.problems.global_composition import direction


class MBSGDCO(GlobalCOAlgorithm):
    name = "mbsgd-co"
    Settings = GlobalCOSettings
    contributions = {"grad": {"g": VALUE, "jac": VALUE, "gh": VALUE}}
    """What a client sends up, per phase (raycompo/compression/keys.py)."""
    population_phases = frozenset({"grad", "phi_parts"})
    """A population's trials compute their clients' parts as rows of one chunk
    (engine/population.py), each at its trial's x with its trial's lam and KL shift; the
    steps (lr) are each trial's server's."""
    row_settings = frozenset({"lr", "lr_decay", "lam", "kl_shift"})

    def server_round(self, ctx, w, state):
        clients = list(range(ctx.n_clients))
        K = len(clients)
        lr = self.lr_at(ctx.round)
        for j in range(self.s.sync_every):
            s = ctx.map("grad", clients, {"w": w, "j": j})
            gh = s["gh"] / K if self.problem.has_h else None
            w = w - lr * direction(self.problem, s["jac"] / K, s["g"] / K, gh)
        return w, state

    @client_phase("grad")
    def client_grad(self, c, state, payload):
        b_g, b_h = self.batches(c, payload["j"])
        g, jac, gh = self.local_parts(payload["w"], b_g, b_h)
        out = {"g": g, "jac": jac}
        if gh is not None:
            out["gh"] = gh
        return out, state

    @batched_phase("grad")
    def batched_grad(self, cb, states, payload):
        b_g, b_h = self.batched_batches(cb, payload["j"])
        g, jac, gh = global_batched.local_parts(cb.task, self.problem, cb.broadcast(payload["w"]), b_g, b_h)
        out = {"g": g, "jac": jac}
        if gh is not None:
            out["gh"] = gh
        return out, states
