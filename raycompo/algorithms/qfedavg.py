"""q-FedAvg (Li, Sanjabi, Beirami & Smith, "Fair Resource Allocation in Federated
Learning", ICLR 2020), the solver of q-FFL: min_w sum_k p_k F_k(w)^(q+1) / (q+1).

Each sampled client k computes its loss F_k(w) at the global model, runs tau local SGD
steps to w_k, and sends, with L = 1/lr (the Lipschitz estimate of the paper):

    dw_k    = L (w - w_k)
    Delta_k = F_k(w)^q dw_k
    h_k     = q F_k(w)^(q-1) ||dw_k||^2 + L F_k(w)^q

The server steps w <- w - sum_k Delta_k / sum_k h_k.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from raycompo.algorithms.base import Algorithm, LocalSettings, client_phase, local_sgd
from raycompo.algorithms.cohort import batched_phase
from raycompo.compression.keys import VALUE
from raycompo.problems.oracle import on_row
from raycompo.settings import require, row_scalar

WHOLE_STREAM = 7
"""The stream key of a chunk's read of its clients' whole data (`CohortBatch.whole`): apart
from the local steps' mini-batches (stream 0), so that it is counted as a read of its own."""


@dataclass
class QFedAvgSettings(LocalSettings):
    q: float = 0.2
    """Fairness exponent q >= 0 of q-FFL (q = 0 is FedAvg's objective)."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        require(self.q >= 0, f"q must be >= 0, got {self.q}")


class QFedAvg(Algorithm):
    name = "qfedavg"
    Settings = QFedAvgSettings
    contributions = {"local": {"delta": VALUE, "h": VALUE}}
    """What a client sends up, per phase (raycompo/compression/keys.py)."""
    population_phases = frozenset({"local"})
    """A population's trials run the local steps as rows of one chunk (engine/population.py)."""
    row_settings = frozenset({"lr", "q"})

    def server_round(self, ctx, w, state):
        cohort = ctx.sample(self.s.cohort_size(ctx.n_clients))
        sums = ctx.map("local", cohort, {"w": w})
        return w - sums["delta"] / sums["h"], state

    @client_phase("local")
    def client_local(self, c, state, payload):
        w0 = payload["w"]
        with torch.no_grad():
            # F_k(w) on the client's training data; the epsilon keeps F^(q-1) finite.
            loss = self.task.loss(w0, c.data.full()).clamp_min(1e-10)
        w = local_sgd(c, w0, self.s.tau, self.s.lr, self.s.batch_size, lambda w, b, t: self.loss_grad(w, b))
        L, q = 1.0 / self.s.lr, self.s.q
        dw = L * (w0 - w)
        fq = loss**q
        return {
            "delta": fq * dw,
            "h": q * loss ** (q - 1) * dw.pow(2).sum() + L * fq,
        }, state

    def full_loss(self, i, w0, data):
        """F_k(w0) on client row i's whole training data (its oracle calls counted on row i)."""
        with on_row(i):
            return self.task.loss(w0, data.full())

    @batched_phase("local")
    def batched_local(self, cb, states, payload):
        """client_local for a chunk of clients at once (algorithms/cohort.py)."""
        w0 = cb.broadcast(payload["w"])  # a population's: each row's trial's; lr, q: (k,) there
        with torch.no_grad():  # F_k(w) on each client's whole training data
            loss = cb.whole_losses(w0, WHOLE_STREAM)  # the chunk's at once, or in groups of similar sizes
            if loss is None:  # no common slab: one forward each
                loss = torch.stack([self.full_loss(i, w0[i], d) for i, d in enumerate(cb.data)])
            loss = loss.clamp_min(1e-10)
        w = cb.local_sgd(w0, self.s.tau, self.s.lr, self.s.batch_size, cb.loss_gradient())
        L, q = 1.0 / self.s.lr, self.s.q
        dw = row_scalar(L, w) * (w0 - w)
        fq = loss**q
        return {
            "delta": fq.unsqueeze(1) * dw,
            "h": q * loss ** (q - 1) * dw.pow(2).sum(1) + L * fq,
        }, states
