"""Ditto (Li, Hu, Beirami & Smith, ICML 2021): a global model plus one personal model per
client, the Ditto baseline of the ComFedL journal (section 5.2).

Round s: each sampled client
  1. runs tau local SGD steps on f_i from the global model w_s and sends the result
     (the server averages the cohort's models, as FedAvg);
  2. updates its personal model v_i (kept in the client's persistent state, i.e. in its
     host actor for the whole run; initialized to the global model it first receives) by
     `personal_steps` steps of
         v_i <- v_i - personal_lr * (grad f_i(v_i; B) + lam * (v_i - w_s)),
     the proximal-regularized local objective f_i(v) + lam/2 ||v - w_s||^2.
Each client is evaluated on its personal model (before it has one: the global model).
Journal's tuned settings: both learning rates 0.2, lam 0.1.
"""

from __future__ import annotations

from dataclasses import dataclass

from raycompo.algorithms.base import Algorithm, LocalSettings, client_phase, local_sgd
from raycompo.algorithms.cohort import batched_phase
from raycompo.algorithms.personalized import average_local_models
from raycompo.compression.keys import WEIGHT, update
from raycompo.settings import require, row_scalar


@dataclass
class DittoSettings(LocalSettings):
    lr: float = 0.2
    """Learning rate of the global model's local steps (journal: 0.2)."""
    lam: float = 0.1
    """Regularization lambda pulling each personal model toward the global one (journal: 0.1)."""
    personal_lr: float | None = None
    """Learning rate of the personal model's steps (None: lr; journal: 0.2)."""
    personal_steps: int | None = None
    """Personal-model steps per round (None: tau)."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        require(self.lam >= 0, f"lam must be >= 0, got {self.lam}")
        require(
            self.personal_lr is None or self.personal_lr > 0,
            f"personal_lr must be > 0, got {self.personal_lr}",
        )
        require(
            self.personal_steps is None or self.personal_steps >= 1,
            f"personal_steps must be >= 1, got {self.personal_steps}",
        )


class Ditto(Algorithm):
    name = "ditto"
    Settings = DittoSettings
    contributions = {"local": {"w": update("w"), "count": WEIGHT}}
    """What a client sends up, per phase (raycompo/compression/keys.py)."""
    population_phases = frozenset({"local"})
    """A population's trials run the local steps and the personal models' as rows of one
    chunk (engine/population.py); personal_lr is structural (None: lr)."""
    row_settings = frozenset({"lr", "lam"})

    def server_round(self, ctx, w, state):
        return average_local_models(ctx, self.s, w), state

    @client_phase("local")
    def client_local(self, c, state, payload):
        s, w_s = self.s, payload["w"]
        w = local_sgd(c, w_s, s.tau, s.lr, s.batch_size, lambda w, b, t: self.loss_grad(w, b))  # 1.
        v = state.get("v", w_s)  # 2.
        lr = s.lr if s.personal_lr is None else s.personal_lr
        for t in range(s.tau if s.personal_steps is None else s.personal_steps):
            batch = c.data.batch(c.rng(t, stream=1), s.batch_size)
            v = (v - lr * (self.loss_grad(v, batch) + s.lam * (v - w_s))).detach()
        return {"w": w, "count": 1.0}, {**state, "v": v}

    @batched_phase("local")
    def batched_local(self, cb, states, payload):
        """client_local for a chunk of clients at once (algorithms/cohort.py)."""
        s, w_s = self.s, cb.broadcast(payload["w"])  # a population's: each row's trial's w_s
        w = cb.local_sgd(w_s, s.tau, s.lr, s.batch_size, cb.loss_gradient())  # 1.
        v = cb.state_rows(states, "v", w_s)[0]  # 2.
        lr = row_scalar(s.lr if s.personal_lr is None else s.personal_lr, v)
        lam = row_scalar(s.lam, v)
        for _, batch in cb.batches(s.tau if s.personal_steps is None else s.personal_steps, s.batch_size, stream=1):
            v = v - lr * (cb.loss_grad(v, batch)[0] + lam * (v - w_s))
        return {"w": w, "count": [1.0] * cb.k}, cb.new_states(states, {"v": v})

    @client_phase("evaluate")
    def client_evaluate(self, c, state, payload):
        return self.task.evaluate(state.get("v", payload["w"]), c.data), state
