"""Vanilla FedAvg for compositional optimization (FedDRO paper, Algorithm 1): the
baseline that Theorem 4.1 shows does not converge for I > 1.

Each client runs I local steps with its own estimate y_k of the inner function:

    x_k <- x_k - eta (grad h_k(x_k; b_h) + grad g_k(x_k; b_g) grad f(y_k))     eq. (6)
    y_k <- g_k(x_k; b'_g)                                                       line 5

and every I steps the models are averaged and y_k is reset (line 7-8):

* Case I:  y_k = g_k(x-bar)                      (the client's own inner value);
* Case II: y_k = y-bar = 1/K sum_k g_k(x-bar)    (shared once per round, one extra exchange).

Both cases start from y_k^0 = y-bar^0 (line 2). Algorithm 1 is stated with h = 0; for
objectives with h (chi2) we add grad h_k as in eq. (7). With batch_size = None every
value is exact (the deterministic setting of Theorem 4.1).
"""

from __future__ import annotations

from dataclasses import dataclass

from raycompo.algorithms.base import Buffered, client_phase
from raycompo.algorithms.co_common import GlobalCOAlgorithm, GlobalCOSettings
from raycompo.algorithms.cohort import TrialValues, batched_phase
from raycompo.compression.keys import VALUE, update
from raycompo.problems import global_batched
from raycompo.problems.global_composition import direction
from raycompo.settings import require, row_scalar

Y_STREAM = 2


@dataclass
class FedAvgCOSettings(GlobalCOSettings):
    case: int = 1
    """Algorithm 1's sharing protocol at each averaging: 1 (Case I, y_k = g_k(x-bar)) or
    2 (Case II, y_k = y-bar = 1/K sum_k g_k(x-bar))."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        require(self.case in (1, 2), f"case must be 1 or 2 (Algorithm 1's Case I / Case II), got {self.case}")


class FedAvgCO(GlobalCOAlgorithm):
    name = "fedavg-co"
    Settings = FedAvgCOSettings
    contributions = {"inner": {"y": VALUE}, "local": {"x": update("w")}}
    """What a client sends up, per phase (raycompo/compression/keys.py)."""
    population_phases = frozenset({"inner", "local", "phi_parts"})
    """A population's trials run both phases as rows of one chunk (engine/population.py),
    each row with its trial's step size, lam and KL shift, and Case II's y-bar its trial's."""
    row_settings = frozenset({"lr", "lr_decay", "lam", "kl_shift"})
    row_payload = frozenset({"lr"})

    @classmethod
    def asynchronous(cls, settings):
        """Buffered FedAvg-CO, Case I (a research extension): a client starts from the x-bar
        it downloaded with y_k = g_k(x-bar) of its own (Case I's reset; in place of line 2's
        y-bar^0 also at version 0), runs I local steps and sends x_k, merged like FedBuff's
        model. Its y_k is as stale as its x-bar. Case II is refused: y-bar = 1/K sum_k
        g_k(x-bar) is an exchange with every client before anyone steps, a barrier."""
        if settings.case == 2:
            return ("fedavg-co Case II shares y-bar = 1/K sum_k g_k(x-bar) with every client before the local "
                    "steps, a barrier by construction; use case=1 asynchronously")
        return Buffered(phase="local", model="x")

    def async_payload(self, w, state, version):
        return {"w": w, "lr": self.lr_at(version), "ybar": None}  # Case I: y_k = g_k(x-bar), the client's own

    def server_round(self, ctx, w, state):
        clients = list(range(ctx.n_clients))
        payload = {"w": w, "lr": self.lr_at(ctx.round), "ybar": None}
        if self.s.case == 2 or ctx.round == 0:  # Case II share, or y_k^0 = y-bar^0
            payload["ybar"] = ctx.map("inner", clients, {"w": w})["y"] / len(clients)
        out = ctx.map("local", clients, payload)
        return out["x"] / len(clients), state

    @client_phase("inner")
    def client_inner(self, c, state, payload):
        return {"y": self.g_at(payload["w"], c.data.batch(c.rng(0, Y_STREAM), self.s.batch_size))}, state

    @client_phase("local")
    def client_local(self, c, state, payload):
        x = payload["w"]
        y = payload["ybar"]
        if y is None:  # Case I: y_k = g_k(x-bar)
            y = self.client_inner(c, state, payload)[0]["y"]
        for j in range(self.s.sync_every):
            b_g, b_h = self.batches(c, j)
            _, jac, gh = self.local_parts(x, b_g, b_h)
            x = x - payload["lr"] * direction(self.problem, jac, y, gh)
            if j + 1 < self.s.sync_every:  # y_k = g_k(x_k) for the next step (none after the last)
                y = self.g_at(x, c.data.batch(c.rng(j + 1, Y_STREAM), self.s.batch_size))
        return {"x": x}, state

    # --- the same phases for a chunk of clients at once (algorithms/cohort.py) ----------
    @batched_phase("inner")
    def batched_inner(self, cb, states, payload):
        batch = cb.batch(0, self.s.batch_size, Y_STREAM)
        return {"y": global_batched.g_values(cb.task, self.problem, cb.broadcast(payload["w"]), batch)}, states

    @batched_phase("local")
    def batched_local(self, cb, states, payload):
        x = cb.broadcast(payload["w"])
        lr = row_scalar(cb.row_value(payload["lr"]), x)  # a population's: (k, 1), each row's trial's
        y = payload["ybar"]
        if y is None:  # Case I: y_k = g_k(x-bar), one per client (k, d_g)
            y = self.batched_inner(cb, states, payload)[0]["y"]
        elif isinstance(y, TrialValues):  # Case II in a population: each row its trial's y-bar
            y = cb.broadcast(y)
        for j in range(self.s.sync_every):
            b_g, b_h = self.batched_batches(cb, j)
            _, jac, gh = global_batched.local_parts(cb.task, self.problem, x, b_g, b_h)
            x = x - lr * global_batched.direction(self.problem, jac, y, gh)
            if j + 1 < self.s.sync_every:  # none after the last step
                y = global_batched.g_values(cb.task, self.problem, x, cb.batch(j + 1, self.s.batch_size, Y_STREAM))
        return {"x": x}, states
