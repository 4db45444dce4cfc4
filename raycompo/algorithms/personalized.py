"""Shared pieces of the personalized-FL algorithms of ComFedL section 5.2 / journal 5.2
(ComFedL-MAML, ComFedL-DAMAML, FedMAML, TR-MAML, and FedAvg's adapted evaluation).

* `MamlFields`: the settings every MAML-style method adds to its base settings (inner
  step size, query batch size, first-order switch, test-time adaptation steps);
* `maml_local`: tau local steps w <- w - lr * u, with u the MAML compositional gradient
  (I - eta_in H(w; B)) grad L(w - eta_in grad L(w; B); B~) of the support batch B and
  the query batch B~ (two independent mini-batches of the client's training data, B and
  B~ of ComFedL's Algorithm 1);
* `adapted_metrics`: a client's metrics after `steps` gradient steps on a support batch of
  its training data (the paper's "one step at test time"); `AdaptedEvaluation` is the
  algorithm mixin that evaluates this way with `inner_lr`;
* `average_local_models`: the server step "sample a cohort, average its local models".

No `name` here: this module registers no algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from raycompo.algorithms.base import client_phase
from raycompo.problems import compositional_gradient
from raycompo.problems.maml import adapt
from raycompo.settings import require

EVAL_STREAM = 9
"""Random stream of the support batch used for test-time adaptation (distinct from the
training streams 0-2, so evaluation never changes what training draws)."""


@dataclass
class MamlFields:
    """Settings mixin (put it first among the bases: it chains `validate` to the next)."""

    inner_lr: float = 0.05
    """Inner (adaptation) step size eta_in of the MAML map y = w - eta_in * grad f_i(w; B)."""
    outer_batch_size: int | None = None
    """Query batch size |B~| of the outer function f_i(y; B~) (None: batch_size)."""
    first_order: bool = False
    """Drop the Hessian term of the MAML gradient (first-order MAML)."""
    eval_adapt_steps: int = 1
    """Gradient steps (step size inner_lr, on a support batch of the client's training data)
    taken by each client before it is evaluated (the paper: one)."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)  # type: ignore[misc]
        require(self.inner_lr > 0, f"inner_lr must be > 0, got {self.inner_lr}")
        require(
            self.outer_batch_size is None or self.outer_batch_size >= 1,
            f"outer_batch_size must be >= 1, got {self.outer_batch_size}",
        )
        require(
            self.eval_adapt_steps >= 0,
            f"eval_adapt_steps must be >= 0, got {self.eval_adapt_steps}",
        )

    def query_batch_size(self) -> int | None:
        return self.batch_size if self.outer_batch_size is None else self.outer_batch_size  # type: ignore[attr-defined]


def maml_local(c, w: torch.Tensor, problem, s) -> tuple[torch.Tensor, torch.Tensor]:
    """`s.tau` local steps of w <- w - s.lr * u on the local composition `problem` (a MAML).

    Step t draws the support batch B from stream 0 and the query batch B~ from stream 1
    (as ComFedL's client_local does). Returns the final iterate and the outer value
    g(f(w_0; B); B~) at the starting point (the client's mini-batch MAML loss at w_s).
    """
    first_value = torch.zeros(())
    for t in range(s.tau):
        support = c.data.batch(c.rng(t), s.batch_size)
        query = c.data.outer_batch(c.rng(t, stream=1), s.query_batch_size())
        u, y = compositional_gradient(problem, w, support, query)
        if t == 0:
            with torch.no_grad():
                first_value = problem.outer(y, query).detach()
        w = (w - s.lr * u).detach()
    return w, first_value


def adapted_metrics(
    task, c, w: torch.Tensor, lr: float, steps: int, batch_size: int | None
) -> dict[str, Any]:
    """Client metrics of w after `steps` gradient steps (size lr) on a support batch of the
    client's training data, drawn from the evaluation stream of the current round."""
    if steps > 0:
        support = c.data.batch(c.rng(0, stream=EVAL_STREAM), batch_size)
        w = adapt(task.loss, w, support, lr, steps)
    return task.evaluate(w, c.data)


def average_local_models(ctx, settings, w: torch.Tensor) -> torch.Tensor:
    """Sample a cohort, run every member's `client_local` from w, return the mean model
    (the members return {"w": model, "count": 1.0})."""
    cohort = ctx.sample(settings.cohort_size(ctx.n_clients))
    sums = ctx.map("local", cohort, {"w": w})
    return sums["w"] / sums["count"]


class AdaptedEvaluation:
    """Algorithm mixin: evaluate each client after `eval_adapt_steps` steps of size `inner_lr`."""

    @client_phase("evaluate")
    def client_evaluate(self, c, state, payload):
        s, task = self.s, self.task  # type: ignore[attr-defined]
        return adapted_metrics(task, c, payload["w"], s.inner_lr, s.eval_adapt_steps, s.batch_size), state
