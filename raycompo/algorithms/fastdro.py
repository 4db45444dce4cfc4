"""FastDRO (Levy, Carmon, Duchi & Sidford 2020, "Large-scale methods for distributionally
robust optimization"), the parallel version the FedDRO paper compares with (section 6).

Levy et al.'s estimator: draw a mini-batch of n losses l_1..l_n, find the worst-case
weights q over the batch in the uncertainty set, and step along the gradient of the
batch-level robust loss, sum_i q_i grad l_i (Danskin). It is biased, with a bias that
shrinks with n, and needs no state besides the model. The FedDRO paper runs the
centralized baselines "in parallel", with K times the gradient computation of one client:
at every step each of the K clients draws |b| samples (FedDRO's b_g, stream 0), so the
batch is the pooled K |b| samples. One step costs two exchanges:

    1. every client sends its |b| losses at x ("losses", read as rows: `ctx.map_rows`);
    2. the server computes q over the pooled K |b| losses and sends each client its
       weights; every client returns sum_{i in its batch} q_i grad l_i (map "grad"), and
       the server steps x <- x - eta * scale * sum_k (...).

One engine round = `sync_every` (I) steps, the samples of FedDRO with the same I.

`geometry` (the uncertainty set):

* 'objective' (default): the batch version of the run's `objective`, so `objective`
  (Phi) in the rows is what the method optimizes:
  - kl: q = softmax(l / lam); the step is the gradient of log(1/n sum exp(l_i / lam)),
    i.e. (1/lam) sum q_i grad l_i. For KL this equals the plug-in compositional gradient
    of MBSGD-CO with b_h = b_g (tests check it): FastDRO's novelty is in the other sets;
  - chi2-dro: the chi-square penalty sup_{q in simplex} sum q_i l_i - lam n/2 sum (q_i - 1/n)^2,
    q_i = max(0, 1/n + (l_i - eta) / (lam n)) with eta found by bisection so that
    sum q = 1. Without the q >= 0 constraint this is mean l + Var(l) / (2 lam), the
    `chi2-dro` objective; FastDRO keeps the constraint (the real DRO weights).
  - chi2 (eq. 5 as printed, -Var/2lam) has no uncertainty set: refused.
* 'cvar': CVaR at level `cvar_alpha`: weight 1/(alpha n) on the alpha n largest losses
  (the boundary sample fractionally); `objective` still logs the run's Phi.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from raycompo.algorithms.base import client_phase, grad_of
from raycompo.algorithms.client_rows import Shares
from raycompo.algorithms.co_common import GlobalCOAlgorithm, GlobalCOSettings
from raycompo.algorithms.cohort import batched_phase
from raycompo.compression.keys import VALUE
from raycompo.settings import require

GEOMETRIES = ("objective", "cvar")


@dataclass
class FastDROSettings(GlobalCOSettings):
    geometry: str = "objective"
    """Uncertainty set of the batch-level robust loss: 'objective' (the run's `objective`:
    KL penalty, or chi-square penalty with q >= 0 for chi2-dro) or 'cvar' (CVaR at cvar_alpha)."""
    cvar_alpha: float = 0.1
    """CVaR level alpha in (0, 1]: the worst alpha fraction of the pooled batch (geometry 'cvar')."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        require(self.geometry in GEOMETRIES, f"geometry must be one of {', '.join(GEOMETRIES)}, got {self.geometry!r}")
        require(0 < self.cvar_alpha <= 1, f"cvar_alpha must be in (0, 1], got {self.cvar_alpha}")
        require(
            not (self.geometry == "objective" and self.objective == "chi2"),
            "fastdro: objective chi2 (eq. 5 as printed) has no uncertainty set; use objective=chi2-dro or kl, or geometry=cvar",
        )


def kl_weights(losses: torch.Tensor, lam: float) -> torch.Tensor:
    return torch.softmax(losses / lam, 0)


def chi2_weights(losses: torch.Tensor, lam: float, iters: int = 100) -> torch.Tensor:
    """argmax over the simplex of sum q l - lam n/2 sum (q - 1/n)^2: q = (1/n + (l - eta)/(lam n))_+,
    eta by bisection on sum q = 1 (sum q decreases in eta)."""
    n = len(losses)

    def q_of(eta):
        return torch.clamp(1.0 / n + (losses - eta) / (lam * n), min=0.0)

    lo, hi = float(losses.min()) - lam, float(losses.max())  # sum q >= 1 at lo, <= 1 at hi
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if float(q_of(mid).sum()) > 1.0:
            lo = mid
        else:
            hi = mid
    q = q_of(0.5 * (lo + hi))
    return q / q.sum()


def cvar_weights(losses: torch.Tensor, alpha: float) -> torch.Tensor:
    """Uniform weight 1/(alpha n) on the largest losses, alpha n of them (fractional boundary)."""
    n = len(losses)
    k = alpha * n
    order = torch.argsort(losses, descending=True)
    q = torch.zeros_like(losses)
    full = int(math.floor(k))
    q[order[:full]] = 1.0 / k
    if full < n and k > full:
        q[order[full]] = (k - full) / k
    return q


class FastDRO(GlobalCOAlgorithm):
    name = "fastdro"
    Settings = FastDROSettings
    requires = frozenset({"sample_losses"})
    contributions = {"losses": {"l": VALUE}, "grad": {"g": VALUE}}
    """What a client sends up, per phase (raycompo/compression/keys.py)."""

    def weights(self, losses: torch.Tensor) -> tuple[torch.Tensor, float]:
        """(q over the pooled batch, scale of sum q_i grad l_i)."""
        s = self.s
        if s.geometry == "cvar":
            return cvar_weights(losses, s.cvar_alpha), 1.0
        if s.objective == "kl":
            return kl_weights(losses, s.lam), 1.0 / s.lam
        return chi2_weights(losses, s.lam), 1.0  # chi2-dro

    def server_round(self, ctx, w, state):
        clients = list(range(ctx.n_clients))
        lr = self.lr_at(ctx.round)
        for j in range(self.s.sync_every):
            # the pooled batch: every client's losses end to end, in client order (no work per client)
            losses, lengths = ctx.map_rows("losses", clients, {"w": w, "j": j}).flat("l", clients)
            q, scale = self.weights(losses.to(torch.float64))
            shares = Shares(clients, q, lengths)  # client k's q_k: its own samples' weights
            g = ctx.map("grad", clients, {"j": j, "q": shares})["g"]  # w: the clients kept it from "losses"
            w = w - lr * scale * g
        return w, state

    # --- client ---------------------------------------------------------------------
    @client_phase("losses")
    def client_losses(self, c, state, payload):
        batch = c.data.batch(c.rng(payload["j"], 0), self.s.batch_size)  # FedDRO's b_g
        c.scratch["batch"], c.scratch["w"] = batch, payload["w"]  # for this step's "grad"
        with torch.no_grad():
            return {"l": self.task.sample_losses(payload["w"], batch)}, state

    @client_phase("grad")
    def client_grad(self, c, state, payload):
        batch, w = c.scratch.pop("batch"), c.scratch.pop("w")
        q = payload["q"][c.client_id].to(w.dtype)

        def weighted(v):
            return (q * self.task.sample_losses(v, batch)).sum()

        return {"g": grad_of(weighted, w)}, state

    # --- the same phases for a chunk of clients at once (algorithms/cohort.py) ----------
    # "grad" draws the step's batch again from the same seeds, uncounted (the per-client
    # path keeps it in c.scratch; a chunk keeping its batch would hold every chunk's at
    # once): the same rows, so the same q_i line up with the same losses.
    @batched_phase("losses")
    def batched_client_losses(self, cb, states, payload):
        batch = cb.batch(payload["j"], self.s.batch_size)
        cb.keep_rows("w", cb.broadcast(payload["w"]))  # w is not sent again
        with torch.no_grad():
            losses = cb.task.batched_sample_losses(cb.broadcast(payload["w"]), batch)
        rows = batch.count.long()
        if bool((rows == losses.shape[1]).all()):  # every batch full: the (k, b) losses are the rows as they are
            return {"l": losses}, states
        return {"l": Shares(cb.ids, losses[batch.mask.bool()], rows.tolist())}, states  # each its own n_i, end to end

    @batched_phase("grad")
    def batched_client_grad(self, cb, states, payload):
        batch = cb.batch(payload["j"], self.s.batch_size, count=False)  # the rows "losses" drew and counted
        w = cb.take_rows("w")[0]  # the step's w (the same for all rows), kept by "losses"
        q = torch.zeros(batch.mask.shape, dtype=w.dtype, device=w.device)  # padded rows weigh 0
        q[batch.mask.bool()] = payload["q"].cat(cb.ids).to(w.device, w.dtype)  # each q_i into its real rows
        g, _ = cb.task.batched_sample_grad(cb.broadcast(w), batch, lambda losses: q)
        return {"g": g}, states
