"""A hand-written batched FedAvg round on a logistic-regression task (issue 28): the
attainable figure that `python -m raycompo.bench cohort` prints beside raycompo's own
vectorized round ('hand batched').

It makes raycompo's exact seeded draws (client i's indices of local step t drawn with the
seed of the generator of (seed, CLIENT, i, round, t, 0), as `ClientData.batch(c.rng(t), b)`
draws them: with the run's sampler, the keyed b smallest hashes of every client at once,
`keyed_indices`, or `randperm(n_i)[:b]` client by client) and runs the same maths as the
vectorized round, written directly in torch with nothing around it:

* the cohort's inputs concatenated once (N, d), so each step's batch is one gather;
* the clients in nearly equal tiles whose one step fits the cache, as the engine cuts its
  chunks (engine/batched.py `cache_chunk`; the whole cohort where it does not cut);
* per step and tile, the forward W x^T + b (one `baddbmm`), the cross-entropy's gradient with
  respect to the logits written out, (softmax - onehot) / b_i, and the update fused into
  the weight gradient's product (`baddbmm_` with alpha = -lr);
* the server's average sum_i n_i w_i / sum_i n_i as one matrix-vector product.

So it ends at raycompo's model up to float32 rounding (`relative_difference` checks it).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from raycompo.bench.timing import Timing, settle
from raycompo.configuration.config import RunConfig, resolve
from raycompo.engine.batched import cache_chunk
from raycompo.errors import ConfigError
from raycompo.keyed import keyed_indices
from raycompo.seeding import CLIENT, fold, fold_many


class HandBatchedFedAvg:
    """FedAvg on every client of `cfg` (a logistic-regression task, algo fedavg), the
    cohort as stacked rows W (m, C, d), b (m, C). `w` is the global model, flat as the
    engine's (weight row-major, then bias); `round_()` runs one round from it."""

    def __init__(self, cfg: RunConfig):
        if cfg.algo != "fedavg":
            raise ConfigError(f"the hand-written batched round is FedAvg's: algo must be 'fedavg', got {cfg.algo!r}")
        r = resolve(cfg)
        self.s = r.algo_settings
        task = r.make_task()
        shapes = task.model.shapes
        if len(shapes) != 2 or len(shapes[0]) != 2:
            raise ConfigError(f"the hand-written batched round needs a logistic-regression model (one linear "
                              f"layer), got parameter shapes {[tuple(s) for s in shapes]}")
        self.classes, self.d = shapes[0]
        clients = task.clients(list(range(r.n_clients)))
        self.ids = np.array([c.client_id for c in clients], dtype=np.int64)
        self.sizes = [c.num_samples for c in clients]
        b = self.s.batch_size
        if b is None or min(self.sizes) < b:
            raise ConfigError(f"the hand-written batched round needs every client to hold at least batch_size = "
                              f"{b} samples (no padding); the smallest holds {min(self.sizes)}")
        self.seed = cfg.seed
        self.keyed = cfg.sampler == "keyed"
        self.x = torch.cat([c.x.flatten(1) for c in clients])  # (N, d): each step's batch is one gather
        self.y = torch.cat([c.y for c in clients])
        self.offsets = torch.tensor(np.cumsum([0] + self.sizes[:-1]), dtype=torch.int64).unsqueeze(1)  # (m, 1)
        n = torch.tensor(self.sizes, dtype=torch.float64)
        self.weights = (n / n.sum()).to(self.x.dtype)  # n_i / sum n_i
        self.w = task.init_weights()
        self.round = 0
        self._gen = torch.Generator()
        m = len(self.sizes)
        tile = cache_chunk(self.classes * self.d + self.classes, self.d, b) or m
        self.tile = -(-m // -(-m // tile))  # nearly equal tiles

    def draws(self, step: int) -> torch.Tensor:
        """(m, b): every client's drawn rows of the concatenated data at local step `step`."""
        prefixes = fold_many(np.full(len(self.ids), fold(0, self.seed, CLIENT), dtype=np.uint64), self.ids, self.round)
        seeds = fold_many(prefixes, step, 0) >> np.uint64(1)  # each generator's seed
        if self.keyed:
            return keyed_indices(torch.from_numpy(seeds.view(np.int64)), self.sizes, self.s.batch_size) + self.offsets
        g, b = self._gen, self.s.batch_size
        picks = []
        for n, seed in zip(self.sizes, seeds.tolist()):
            g.manual_seed(seed)
            picks.append(torch.randperm(n, generator=g)[:b])
        return torch.stack(picks) + self.offsets

    def round_(self) -> torch.Tensor:
        """One FedAvg round of every client from `w`; returns (and keeps) the new global model."""
        m, C, d, b, lr = len(self.sizes), self.classes, self.d, self.s.batch_size, self.s.lr
        W = self.w[: C * d].view(1, C, d).repeat(m, 1, 1)  # (m, C, d)
        bias = self.w[C * d:].view(1, C, 1).repeat(m, 1, 1)  # (m, C, 1)
        for t in range(self.s.tau):
            idx = self.draws(t)
            for s in range(0, m, self.tile):
                Wt, bt, it = W[s:s + self.tile], bias[s:s + self.tile], idx[s:s + self.tile].reshape(-1)
                k = len(Wt)
                x = self.x.index_select(0, it).view(k, b, d)
                y = self.y.index_select(0, it).view(k, 1, b)
                g = torch.baddbmm(bt, Wt, x.transpose(1, 2)).softmax(1)  # (k, C, b)
                g.scatter_add_(1, y, torch.full(y.shape, -1.0))  # softmax - onehot: the logits' gradient
                g.mul_(1.0 / b)  # of the mean loss
                Wt.baddbmm_(g, x, alpha=-lr)
                bt.sub_(g.sum(2, keepdim=True), alpha=lr)
        flat = torch.cat([W.view(m, C * d), bias.view(m, C)], 1)
        self.w = self.weights @ flat
        self.round += 1
        return self.w


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """||a - b|| / ||b|| in float64."""
    a64, b64 = a.double(), b.double()
    return float((a64 - b64).norm() / b64.norm().clamp_min(1e-300))


def hand_batched_seconds_per_round(cfg: RunConfig, rounds: int, warmup: int) -> Timing:
    """Per round of `HandBatchedFedAvg(cfg)`, after `warmup` rounds."""
    hand = HandBatchedFedAvg(cfg)
    for _ in range(warmup):
        hand.round_()
    settle()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(rounds):
        hand.round_()
    return Timing((time.perf_counter() - t0) / rounds, (time.process_time() - c0) / rounds)
