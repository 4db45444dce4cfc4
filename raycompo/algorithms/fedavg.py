"""FedAvg (McMahan et al. 2017): tau local SGD steps on the mean loss, then the server
averages the cohort's models weighted by their sample counts n_i (as the ComFedL paper
describes it: weights proportional to the number of samples of each client).

`eval_adapt_steps` > 0 evaluates each client after that many gradient steps on a support
batch of its training data (ComFedL journal 5.2: "FedAvg is trained with one step at test
time" for a fair comparison with the personalized methods); 0 (default) evaluates the
global model as is."""

from __future__ import annotations

from dataclasses import dataclass

from raycompo.algorithms.base import Algorithm, Buffered, LocalSettings, client_phase, local_sgd
from raycompo.algorithms.cohort import batched_phase
from raycompo.algorithms.personalized import adapted_metrics
from raycompo.compression.keys import WEIGHT, update
from raycompo.settings import require


@dataclass
class FedAvgSettings(LocalSettings):
    eval_adapt_steps: int = 0
    """Gradient steps each client takes on a support batch of its training data before it is
    evaluated (0: evaluate the global model itself; the personalized-FL tasks use 1)."""
    eval_lr: float | None = None
    """Step size of those evaluation steps (None: lr)."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        require(self.eval_adapt_steps >= 0, f"eval_adapt_steps must be >= 0, got {self.eval_adapt_steps}")
        require(self.eval_lr is None or self.eval_lr > 0, f"eval_lr must be > 0, got {self.eval_lr}")


class FedAvg(Algorithm):
    name = "fedavg"
    Settings = FedAvgSettings
    requires = frozenset({"loss"})
    """What it uses: a mean loss on the clients' batches and its gradient (local SGD), and
    the task's evaluation; any such task, classification or regression (FedBuff and
    FedAsync run the same local phase)."""
    contributions = {"local": {"nw": update("w", weight="n"), "n": WEIGHT}}
    """What a client sends up, per phase (raycompo/compression/keys.py)."""
    population_phases = frozenset({"local"})
    """A population's trials run its local steps as rows of one chunk (engine/population.py)."""
    row_settings = frozenset({"lr"})

    def server_round(self, ctx, w, state):
        cohort = ctx.sample(self.s.cohort_size(ctx.n_clients))
        sums = ctx.map("local", cohort, {"w": w})
        return sums["nw"] / sums["n"], state  # sum_i n_i w_i / sum_i n_i

    @classmethod
    def asynchronous(cls, settings):
        """FedBuff (Nguyen et al. 2022) and FedAsync (Xie et al. 2019) as their papers define
        them: a client's y is its tau local steps' model; FedAsync's proximal term
        (rho / 2) ||x - w^{t'}||^2 is read from payload['prox_rho']."""
        return Buffered(phase="local", model="nw", count="n", proximal=True)

    @client_phase("local")
    def client_local(self, c, state, payload):
        w0, rho = payload["w"], payload.get("prox_rho", 0.0)
        if rho:  # FedAsync: the local objective adds (rho / 2) ||x - w^{t'}||^2
            direction = lambda w, b, t: self.loss_grad(w, b) + rho * (w - w0)  # noqa: E731
        else:
            direction = lambda w, b, t: self.loss_grad(w, b)  # noqa: E731
        w = local_sgd(c, w0, self.s.tau, self.s.lr, self.s.batch_size, direction)
        n = float(c.data.num_samples)
        return {"nw": n * w, "n": n}, state

    @batched_phase("local")
    def batched_local(self, cb, states, payload):
        """client_local for a chunk of clients at once (algorithms/cohort.py)."""
        w0, rho = cb.broadcast(payload["w"]), payload.get("prox_rho", 0.0)
        direction = cb.loss_gradient()
        if rho:  # FedAsync's proximal term (not fused into the gradient's product)
            grad = direction
            direction = lambda w, b, t: grad(w, b, t) + rho * (w - w0)  # noqa: E731
        w = cb.local_sgd(w0, self.s.tau, self.s.lr, self.s.batch_size, direction)
        n = cb.num_samples()
        return {"nw": n.to(w.dtype).unsqueeze(1) * w, "n": n.tolist()}, states

    @batched_phase("evaluate")
    def batched_evaluate(self, cb, states, payload):
        """The base evaluation for a chunk (FedAvg's own, with eval_adapt_steps 0 only)."""
        return super().batched_evaluate(cb, states, payload)

    @classmethod
    def cannot_batch_evaluate(cls, settings):
        return "fedavg adapts before evaluating (eval_adapt_steps > 0)" if settings.eval_adapt_steps > 0 else None

    @client_phase("evaluate")
    def client_evaluate(self, c, state, payload):
        if self.s.eval_adapt_steps == 0:
            return super().client_evaluate(c, state, payload)
        lr = self.s.lr if self.s.eval_lr is None else self.s.eval_lr
        return adapted_metrics(self.task, c, payload["w"], lr, self.s.eval_adapt_steps, self.s.batch_size), state
