"""PDSGD, the primal-dual stochastic gradient baseline of the FedDRO paper (section 6,
after Xu 2020, "Primal-dual stochastic gradient method for convex programs with many
functional constraints"), run in parallel over the K clients.

The FedDRO paper names the method and nothing else. Our reading: the primal-dual SGD on
the min-max (Lagrangian) form of the run's KL-regularized DRO, with one dual variable per
training sample (N in all, each held by the client that owns the sample):

    min_x max_{p in simplex_N} sum_i p_i l_i(x) - lam sum_i p_i log(N p_i)
        = lam log(1/N sum_i exp(l_i(x) / lam)) = lam Phi(x)       (Phi: eq. 4, `objective`)

At every step each client k draws |b| of its n_k samples (FedDRO's b_g, stream 0), so
the pooled batch is K |b| samples ("K times the gradient computation" of one client):

    primal:  x <- x - eta / lam * sum_k sum_{i in b_k} (n_k / |b|) p_i grad l_i(x)
             (an unbiased estimate of grad_x of the Lagrangian, on Phi's scale)
    dual:    log p_i <- (1 - eta_p lam) log p_i + eta_p (n_k / |b|) l_i(x) [i in b_k],
             then p <- p / sum p   (entropic mirror ascent with the exact gradient of the
             KL term and an unbiased estimate of the loss vector)

Clients keep their dual log-weights a_i (unnormalized) as persistent state; the global
normalizer log Z = logsumexp over all N of them is exchanged with the step, so a step costs
one exchange, like MBSGD-CO: each client returns its mass relative to the last normalizer,
M_k = sum_{i of k} exp(a_i - log Z) (after its ascent), and the server sums them,
log Z <- log Z + log sum_k M_k (the same logsumexp, shifted by the log Z all clients were
sent). A sum is what the engine aggregates without a Python call per client; where it
is not a positive finite number (a step that moved some a_i by more than ~700 past log Z,
i.e. a diverged run), the server asks each client for the logsumexp of its a instead
(phase log_mass, as in the first round, where p is uniform). One engine round =
`sync_every` (I) steps. Requires objective 'kl'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from raycompo.algorithms.base import client_phase, grad_of
from raycompo.algorithms.chunk_state import ChunkState
from raycompo.algorithms.co_common import GlobalCOAlgorithm, GlobalCOSettings
from raycompo.algorithms.cohort import batched_phase
from raycompo.compression.keys import VALUE
from raycompo.settings import require, row_scalar


@dataclass
class PDSGDSettings(GlobalCOSettings):
    dual_lr: float = 0.01
    """eta_p: step size of the dual (per-sample weight) mirror ascent; dual_lr * lam < 1."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        require(self.objective == "kl", f"pdsgd solves the KL-regularized DRO (objective kl), got objective {self.objective!r}")
        require(self.dual_lr > 0, f"dual_lr must be > 0, got {self.dual_lr}")
        require(self.dual_lr * self.lam < 1, f"dual_lr * lam must be < 1, got {self.dual_lr * self.lam}")


class PDSGD(GlobalCOAlgorithm):
    name = "pdsgd"
    Settings = PDSGDSettings
    requires = frozenset({"sample_losses"})
    contributions = {"log_mass": {"lse": VALUE}, "step": {"g": VALUE, "mass": VALUE}}
    """What a client sends up, per phase (raycompo/compression/keys.py)."""
    population_phases = frozenset({"log_mass", "step", "phi_parts"})
    """A population's trials run the steps as rows of one chunk (engine/population.py): the
    dual log-weights a of each (trial, client) row are its trial's state."""
    row_settings = frozenset({"lr", "lr_decay", "dual_lr", "lam", "kl_shift"})
    row_payload = frozenset({"log_z"})

    def server_round(self, ctx, w, state):
        clients = list(range(ctx.n_clients))
        lr = self.lr_at(ctx.round)
        log_z = state.get("log_z")
        if log_z is None:  # p uniform: log Z = log N
            log_z = self.log_normalizer(ctx, clients)
        for j in range(self.s.sync_every):
            sums = ctx.map("step", clients, {"w": w, "j": j, "log_z": log_z})
            w = w - lr / self.s.lam * sums["g"].to(w.dtype)
            mass = float(sums["mass"])  # sum_k M_k = Z_new / Z
            log_z = log_z + math.log(mass) if 0 < mass < math.inf else self.log_normalizer(ctx, clients)
        return w, {**state, "log_z": log_z}

    def log_normalizer(self, ctx, clients: list[int]) -> float:
        """log Z = logsumexp over the clients of the logsumexp of each one's a (an exchange
        of one value per client, each client's own: no shift that could overflow)."""
        lse = ctx.map_rows("log_mass", clients, {}).stacked("lse", clients)
        return float(torch.logsumexp(lse.reshape(len(clients)).double(), 0))

    # --- client ---------------------------------------------------------------------
    def log_weights(self, c, state) -> torch.Tensor:
        """The client's dual log-weights a (float64, one per sample; after a batched step,
        then -inf up to its chunk's largest n_i: weight 0, kept so by the ascent), on the
        CPU: the state store gives states back on the host's device, a GPU where there is one."""
        a = state.get("a")
        return torch.zeros(c.data.num_samples, dtype=torch.float64) if a is None else a.cpu()

    @client_phase("log_mass")
    def client_log_mass(self, c, state, payload):
        return {"lse": torch.logsumexp(self.log_weights(c, state), 0)}, state

    @client_phase("step")
    def client_step(self, c, state, payload):
        s = self.s
        n = c.data.num_samples
        a = self.log_weights(c, state)
        gen = c.rng(payload["j"], 0)  # FedDRO's b_g stream; the indices are needed for p_i
        size = n if s.batch_size is None or s.batch_size >= n else s.batch_size
        idx = torch.arange(n) if size == n else c.data.indices(gen, size)
        batch = c.data.take(idx)  # read by index: p_i needs the indices
        dev = batch[0].device
        p = torch.exp(a[idx] - payload["log_z"])  # p_i of the sampled samples
        coef = (n / size) * p  # unbiased: each sample drawn with probability size / n

        def weighted(w):
            losses = self.task.sample_losses(w, batch)
            return (coef.to(losses.dtype).to(dev) * losses).sum(), losses

        g, losses = grad_of(weighted, payload["w"], has_aux=True)
        ghat = torch.zeros_like(a)
        ghat[idx] = (n / size) * losses.detach().to("cpu", torch.float64)
        # mirror ascent; p = exp(a - log Z) with the global log Z (a stays bounded:
        # the (1 - eta_p lam) contraction keeps |a| <= max |ghat| / lam)
        a = (1 - s.dual_lr * s.lam) * a + s.dual_lr * ghat
        mass = float(torch.exp(a - payload["log_z"]).sum())  # M_k
        return {"g": g.detach(), "mass": mass}, {**state, "a": a}

    # --- the same phases for a chunk of clients at once (algorithms/cohort.py) ----------
    # The chunk's dual log-weights are one (k, W) float64 tensor, W the chunk's largest n_i,
    # client i's a in row i's first n_i columns and -inf after them (padding: weight
    # exp(-inf) = 0 in every logsumexp and p_i, and the ascent keeps it -inf); stored so,
    # it is read and written with one stacked copy per chunk (`StateStore.get_many`).
    @batched_phase("log_mass")
    def batched_log_mass(self, cb, states, payload):
        a = padded_log_weights(cb, states)
        return {"lse": torch.logsumexp(a, 1)}, cb.new_states(states, {"a": a})

    @batched_phase("step")
    def batched_step(self, cb, states, payload):
        """client_step for a chunk: the weights p_i of each client's drawn samples weigh one
        pullback of the batch's per-sample losses; the dual ascent of all k rows at once."""
        s, w = self.s, cb.broadcast(payload["w"])  # a population's: w, log Z, dual_lr, lam per row
        batch = cb.batch(payload["j"], s.batch_size)  # the draws of client_step (stream 0)
        a = padded_log_weights(cb, states)
        dev = a.device
        log_z, dual_lr, lam = (row_scalar(v, a) for v in (cb.row_value(payload["log_z"]), s.dual_lr, s.lam))
        idx = cb.sample_index(batch).to(dev)  # (k, B): the index i of each row's sample
        real = batch.mask.to(dev) > 0
        ratio = (cb.num_samples() / batch.count.to(dev, torch.float64)).unsqueeze(1)  # n_k / |b_k|
        p = torch.exp(a.gather(1, idx) - log_z)  # p_i of the drawn samples
        coef = torch.where(real, ratio * p, 0.0).to(w.device, w.dtype)  # padded rows weigh 0
        g, losses = cb.task.batched_sample_grad(w, batch, lambda _: coef)
        ghat = torch.where(real, ratio * losses.to(dev, torch.float64), 0.0)
        ghat = torch.zeros_like(a).scatter_(1, idx, ghat)  # a padded row lands on a -inf column, as 0
        a = (1 - dual_lr * lam) * a + dual_lr * ghat  # padding: -inf stays -inf
        mass = torch.exp(a - log_z).sum(1).tolist()  # M_k, numbers: summed in float64
        return {"g": g, "mass": mass}, cb.new_states(states, {"a": a})


def padded_log_weights(cb, states) -> torch.Tensor:
    """(k, W) float64 on the chunk's device, W = the chunk's largest n_i: each client's dual
    log-weights a (0 before its first step) in its first n_i columns, -inf after them. A
    stacked state's rows as they are (cut or padded to W where stored at another width);
    a list of states (spilled, or kept by the per-client path) padded client by client."""
    n = cb.num_samples()
    width = int(max(cb.sizes))
    first = torch.zeros((cb.k, width), dtype=torch.float64, device=n.device)
    first.masked_fill_(torch.arange(width, device=n.device) >= n.unsqueeze(1), float("-inf"))
    if isinstance(states, ChunkState):
        if "a" not in states.tensors:
            return first
        a = fit_width(states.tensors["a"].to(first.device), width)
        if states.present is None:
            return a
        return torch.where(states.present.to(first.device).unsqueeze(1), a, first)  # no state yet: 0s
    rows = [fit_width(st["a"].to(first.device).unsqueeze(0), width)[0] if "a" in st else first[i]
            for i, st in enumerate(states)]
    return torch.stack(rows) if rows else first


def fit_width(a: torch.Tensor, width: int) -> torch.Tensor:
    """Rows of padded log-weights (r, W') as (r, width): columns past every row's n_i are
    -inf, so they are cut or added as -inf."""
    if a.shape[1] >= width:
        return a[:, :width]
    return torch.nn.functional.pad(a, (0, width - a.shape[1]), value=float("-inf"))
