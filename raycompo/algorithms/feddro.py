"""FedDRO (Algorithm 2): federated compositional optimization with per-step sharing of
the inner-function estimate y.

For Phi(x) = h(x) + f(1/K sum_k g_k(x)) on K clients, at every local step t each client k

    samples b_g, b_h (independent, line 5),
    y_k^t = (1 - beta)(y^{t-1} - g_k(x_k^{t-1}; b_g)) + g_k(x_k^t; b_g)         eq. (8)
    shares y_k^t and receives y-bar^t = 1/K sum_k y_k^t (line 6),
    x_k^{t+1} = x_k^t - eta (grad h_k(x_k^t; b_h) + grad g_k(x_k^t; b_g) grad f(y-bar^t))   eq. (7)

and every I steps the models are averaged (line 8). y^{t-1} in (8) is the previous
y-bar (line 6 sets y_k^{t-1} = y-bar^{t-1}); x_k^{-1} = x_k^0 and the first estimate is
y_k^0 = g_k(x-bar^0; b_g) (so y-bar^0 = 1/K sum_k g_k(x-bar^0; b_g)).

x_k^{t-1} in (8) is the point at which y^{t-1} was estimated. Line 8 overwrites
x_k^{t+1} with x-bar^{t+1}, so right after an averaging x_k^{t-1} is the client's last
local iterate before that step (x_k^{t-1}, where y-bar^{t-1} was taken), never its
pre-averaging x_k^{t} - eta grad: the correction g(x_k^t) - g(x_k^{t-1}) then moves the
estimate exactly from where y-bar^{t-1} was to x-bar^t. With full batches y-bar^t is
therefore exactly 1/K sum_k g_k(x_k^t) for every beta (tests check it).

Engine mapping: one engine round = one averaging period of I local steps. The y exchange
is fused with the step: a client caches g_k(x_k^t; b_g), its Jacobian and grad h_k when it
computes y_k^t, and one call "apply step t with y-bar^t, then compute y_k^{t+1}" does the
rest, so a round of I steps costs I + 1 round trips (not 2I): one that starts the round
from x-bar (and returns y^0), I - 1 fused steps, and a last step that returns x for the
average.

Returned model: the last average x-bar (what the engine evaluates). The server state
also keeps `x_random`, an average drawn uniformly among the averaged iterates so far
(reservoir sampling, seeded), our reading of line 12's x-bar^{a(T)} restricted to the
averaging steps (x-bar^t between averagings is never formed).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from raycompo.algorithms.base import client_phase
from raycompo.algorithms.co_common import GlobalCOAlgorithm, GlobalCOSettings
from raycompo.algorithms.cohort import TrialValues, batched_phase
from raycompo.compression.keys import VALUE
from raycompo.problems import global_batched
from raycompo.problems.global_composition import direction
from raycompo.problems.oracle import add_rows, points, uncounted
from raycompo.settings import require, row_scalar


@dataclass
class FedDROSettings(GlobalCOSettings):
    beta: float = 0.1
    """Momentum parameter beta^t in (0, 1] of the hybrid estimator eq. (8) (1: plain
    mini-batch estimate y_k = g_k(x_k; b_g))."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        require(0 < self.beta <= 1, f"beta (momentum of eq. 8) must be in (0, 1], got {self.beta}")


class FedDRO(GlobalCOAlgorithm):
    name = "feddro"
    Settings = FedDROSettings
    contributions = {"start": {"y": VALUE}, "step": {"y": VALUE, "x": VALUE}}
    """What a client sends up, per phase (raycompo/compression/keys.py)."""
    population_phases = frozenset({"start", "step", "phi_parts"})
    """A population's trials run the local steps as rows of one chunk (engine/population.py).
    The rows kept from one phase for the next (`keep_rows`) need the trials in lockstep, as
    they are: a round's I + 1 exchanges are the same for all (a trial that fails mid-round
    fails the others of its chunk, with the error of `take_rows`)."""
    row_settings = frozenset({"lr", "lr_decay", "beta", "lam", "kl_shift"})
    row_payload = frozenset({"lr"})

    @classmethod
    def asynchronous(cls, settings):
        """Refused: every local step t needs y-bar^t = 1/K sum_k y_k^t from all clients (line 6)."""
        return ("feddro shares the inner-function estimates at every local step (y-bar^t = 1/K sum_k y_k^t, "
                "Algorithm 2 line 6: I + 1 exchanges a round): each is a barrier of all clients by construction, "
                "so it has no buffered form; use --aggregation sync")

    def server_round(self, ctx, w, state):
        clients = list(range(ctx.n_clients))
        K, steps = len(clients), self.s.sync_every  # K clients, I local steps
        lr = self.lr_at(ctx.round)
        out = ctx.map("start", clients, {"w": w})  # x_k = x-bar, y_k^t by (8)
        finite = bool(torch.isfinite(out["y"]).all())
        for j in range(1, steps):
            out = ctx.map("step", clients, {"ybar": out["y"] / K, "lr": lr, "j": j, "last": False})
            finite = finite and bool(torch.isfinite(out["y"]).all())
        out = ctx.map("step", clients, {"ybar": out["y"] / K, "lr": lr, "j": steps, "last": True})
        w_next = out["x"] / K  # line 8
        if not finite:  # an overflowing y-bar (e.g. exp(l / lam)) would silently zero the steps
            w_next = torch.full_like(w_next, float("nan"))  # the driver reports a divergence
        n = state.get("averages", 0) + 1
        keep = n == 1 or float(torch.rand((), generator=ctx.rng(stream=7))) < 1.0 / n
        state = {"averages": n, "x_random": w_next if keep else state["x_random"]}
        return w_next, state

    # --- client ---------------------------------------------------------------------
    # Persistent state: x (x_k^t), x_y (the point of the last estimate, x_k^{t-1} of
    # eq. 8), ybar (the last y-bar). The Jacobian and grad h cached between computing
    # y_k^t and applying step t live in c.scratch.
    @client_phase("start")
    def client_start(self, c, state, payload):
        state = {**state, "x": payload["w"]}  # line 8: x_k^t = x-bar^t
        return self._estimate(c, state, 0)

    @client_phase("step")
    def client_step(self, c, state, payload):
        ybar = payload["ybar"]  # line 6: y_k^t = y-bar^t
        d = direction(self.problem, c.scratch.pop("jac"), ybar, c.scratch.pop("gh"))  # eq. (7)
        state = {**state, "ybar": ybar, "x": state["x"] - payload["lr"] * d}
        if payload["last"]:
            return {"x": state["x"]}, state
        return self._estimate(c, state, payload["j"])

    def _estimate(self, c, state, j: int):
        """y_k at local step j by eq. (8); caches what eq. (7) needs at x_k in c.scratch."""
        b_g, b_h = self.batches(c, j)
        g_new, c.scratch["jac"], c.scratch["gh"] = self.local_parts(state["x"], b_g, b_h)
        y = g_new  # beta = 1, or the first step: y_k^0 = g_k(x-bar^0; b_g)
        if "ybar" in state and self.s.beta < 1:
            # x_k^{t-1}: the point of the previous estimate y^{t-1} (after an averaging,
            # the last local iterate before the step, not the pre-averaging x_k^I).
            y = (1 - self.s.beta) * (state["ybar"] - self.g_at(state["x_y"], b_g)) + g_new
        return {"y": y}, {**state, "x_y": state["x"]}

    # --- the same phases for a chunk of clients at once (algorithms/cohort.py) ----------
    # What eq. (7) needs at x_k (its Jacobian rows, grad h) is kept for the chunk's next step
    # as one (k, ...) tensor (`CohortBatch.keep_rows`), as the per-client path keeps a
    # client's row in its c.scratch.
    @batched_phase("start")
    def batched_start(self, cb, states, payload):
        x = cb.broadcast(payload["w"])
        return self._batched_estimate(cb, cb.new_states(states, {"x": x}), x, 0)

    @batched_phase("step")
    def batched_step(self, cb, states, payload):
        ybar, lr = payload["ybar"], cb.row_value(payload["lr"])  # a population's: (k,) each
        rows = cb.broadcast(ybar)
        jac, gh = cb.take_rows("jac"), cb.take_rows("gh")
        d = global_batched.direction(self.problem, jac, rows if isinstance(ybar, TrialValues) else ybar, gh)
        x = cb.stack_state(states, "x") - row_scalar(lr, d) * d
        states = cb.new_states(states, {"ybar": rows, "x": x})
        if payload["last"]:
            return {"x": x}, states
        return self._batched_estimate(cb, states, x, payload["j"])

    def _batched_estimate(self, cb, states, x, j: int):
        """`_estimate` for a chunk: y_k by eq. (8) at the rows x (k, dim)."""
        b_g, b_h = self.batched_batches(cb, j)
        y, jac, gh = global_batched.local_parts(cb.task, self.problem, x, b_g, b_h)
        cb.keep_rows("jac", jac)
        cb.keep_rows("gh", gh)
        x_now = cb.stack_state(states, "x")
        beta = self.s.beta  # a population's: (k,), one trial's beta per row
        if isinstance(beta, torch.Tensor) or beta < 1:
            ybar, corrected = cb.state_rows(states, "ybar", y[0].unsqueeze(0).expand_as(y))
            if isinstance(beta, torch.Tensor):  # rows of beta = 1 take g(x_k^t) alone, as such a trial does
                corrected = corrected & (beta < 1).to(corrected.device)
            if corrected.any():  # rows with a previous estimate: (1 - beta)(y-bar - g(x_k^{t-1})) + g(x_k^t)
                x_y = cb.state_rows(states, "x_y", x_now)[0]
                with uncounted():  # g(x_k^{t-1}) is computed for every row, an oracle call only where it is used
                    g_before = global_batched.g_values(cb.task, self.problem, x_y, b_g)
                add_rows([n if used else 0 for n, used in zip(per_row_points(b_g, cb.k), corrected.tolist())])
                hybrid = (1 - row_scalar(beta, y)) * (ybar - g_before) + y
                y = torch.where(corrected.to(y.device).unsqueeze(1), hybrid, y)
        return {"y": y}, cb.new_states(states, {"x_y": x_now})


def per_row_points(batch, k: int) -> list[int]:
    """The data points of each of the k rows of a chunk's batch (`oracle.points`)."""
    n = points(batch)
    return n if isinstance(n, list) else [n] * k
