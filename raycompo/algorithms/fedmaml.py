"""FedMAML: federated MAML in the style of Per-FedAvg (Fallah, Mokhtari & Ozdaglar 2020),
the FedMAML baseline of the ComFedL journal (section 5.2).

Each sampled client runs tau local steps from the global model w_s,

    y  = w - alpha * grad f_i(w; D)                      (support batch D)
    w <- w - beta * (I - alpha * H_i(w; D'')) grad f_i(y; D')   (query D', Hessian batch D'')

with three independent mini-batches of its training data (Per-FedAvg's HF variant: the
Hessian-vector product is taken on its own batch D'', unlike ComFedL-MAML, whose
Jacobian uses the support batch itself); `first_order=true` gives Per-FedAvg (FO),
direction grad f_i(y; D'). The server averages the cohort's models. alpha is `inner_lr`,
beta is `lr` (journal: both 0.1). Evaluation after `eval_adapt_steps` adaptation steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch.func import grad, vjp

from raycompo.algorithms.base import Algorithm, LocalSettings, client_phase, local_sgd
from raycompo.algorithms.personalized import AdaptedEvaluation, MamlFields, average_local_models
from raycompo.compression.keys import WEIGHT, update


@dataclass
class FedMamlSettings(MamlFields, LocalSettings):
    lr: float = 0.1
    """Outer (meta) step size beta (journal: 0.1)."""
    inner_lr: float = 0.1
    """Inner step size alpha of the adaptation y = w - alpha * grad f_i(w; D) (journal: 0.1)."""


class FedMaml(AdaptedEvaluation, Algorithm):
    name = "fedmaml"
    Settings = FedMamlSettings
    contributions = {"local": {"w": update("w"), "count": WEIGHT}}
    """What a client sends up, per phase (raycompo/compression/keys.py)."""

    def server_round(self, ctx, w, state):
        return average_local_models(ctx, self.s, w), state

    @client_phase("local")
    def client_local(self, c, state, payload):
        s, loss = self.s, self.task.loss

        def direction(w, support, t):
            y = w - s.inner_lr * grad(loss)(w, support)
            g_query = grad(loss)(y.detach(), c.data.batch(c.rng(t, stream=1), s.query_batch_size()))
            if s.first_order:
                return g_query
            hess_batch = c.data.batch(c.rng(t, stream=2), s.batch_size)
            _, pullback = vjp(lambda v: grad(loss)(v, hess_batch), w)
            return g_query - s.inner_lr * pullback(g_query)[0]

        w = local_sgd(
            c, payload["w"], s.tau, s.lr, s.batch_size, lambda w, b, t: direction(w, b, t).detach()
        )
        return {"w": w, "count": 1.0}, state
