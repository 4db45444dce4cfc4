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
normalizer log Z = logsumexp over all N of them is exchanged with the step (each client
returns the logsumexp of its own a), so a step costs one exchange, like MBSGD-CO. One
engine round = `sync_every` (I) steps. Requires objective 'kl'.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from raycompo.algorithms.base import client_phase, grad_of
from raycompo.algorithms.co_common import GlobalCOAlgorithm, GlobalCOSettings
from raycompo.algorithms.cohort import batched_phase
from raycompo.compression.keys import VALUE
from raycompo.settings import require


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
    contributions = {"log_mass": {"lse": VALUE}, "step": {"g": VALUE, "lse": VALUE}}
    """What a client sends up, per phase (raycompo/compression/keys.py)."""

    def server_round(self, ctx, w, state):
        clients = list(range(ctx.n_clients))
        lr = self.lr_at(ctx.round)
        log_z = state.get("log_z")
        if log_z is None:  # p uniform: log Z = log N
            each = ctx.map_each("log_mass", clients, {})
            log_z = float(torch.logsumexp(torch.stack([each[k]["lse"].reshape(()).double() for k in clients]), 0))
        for j in range(self.s.sync_every):
            each = ctx.map_each("step", clients, {"w": w, "j": j, "log_z": log_z})
            g = sum(each[k]["g"].to(torch.float64) for k in clients)
            w = w - lr / self.s.lam * g.to(w.dtype)
            log_z = float(torch.logsumexp(torch.stack([each[k]["lse"].reshape(()).double() for k in clients]), 0))
        return w, {**state, "log_z": log_z}

    # --- client ---------------------------------------------------------------------
    def log_weights(self, c, state) -> torch.Tensor:
        """The client's dual log-weights a (float64, one per sample), on the CPU: the state
        store gives states back on the host's device, a GPU where there is one."""
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
        return {"g": g.detach(), "lse": torch.logsumexp(a, 0)}, {**state, "a": a}

    # --- the same phases for a chunk of clients at once (algorithms/cohort.py) ----------
    @batched_phase("log_mass")
    def batched_log_mass(self, cb, states, payload):
        return {"lse": [torch.logsumexp(self.log_weights(c, st), 0) for c, st in zip(cb.clients, states)]}, states

    @batched_phase("step")
    def batched_step(self, cb, states, payload):
        """client_step for a chunk: the weights p_i of each client's drawn samples weigh one
        pullback of the batch's per-sample losses; the dual ascent stays per client."""
        s, w = self.s, payload["w"]
        batch = cb.batch(payload["j"], s.batch_size)  # the draws of client_step (stream 0)
        assert batch.picks is not None
        coef = torch.zeros(batch.mask.shape, dtype=w.dtype, device=w.device)  # padded rows weigh 0
        drawn = []
        for i, (c, st) in enumerate(zip(cb.clients, states)):
            n, a = c.data.num_samples, self.log_weights(c, st)
            pick = batch.picks[i]
            idx = torch.arange(n) if pick is None else pick.to("cpu")
            size = len(idx)
            coef[i, :size] = ((n / size) * torch.exp(a[idx] - payload["log_z"])).to(w.dtype)
            drawn.append((n, size, idx, a))
        g, losses = cb.task.batched_sample_grad(cb.broadcast(w), batch, lambda _: coef)
        lse, new_states = [], []
        for (n, size, idx, a), st, row in zip(drawn, states, losses):
            ghat = torch.zeros_like(a)
            ghat[idx] = (n / size) * row[:size].detach().to("cpu", torch.float64)
            a = (1 - s.dual_lr * s.lam) * a + s.dual_lr * ghat
            lse.append(torch.logsumexp(a, 0))
            new_states.append({**st, "a": a})
        return {"g": g, "lse": lse}, new_states
