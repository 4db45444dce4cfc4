"""What the round benchmarks share: seconds per round of an engine, and the hand-written
loop they are compared with."""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from raycompo.configuration.config import RunConfig, resolve
from raycompo.seeding import CLIENT, generator

SETTLE_SECONDS = 0.3
"""How long `settle` waits before a timing starts."""


def settle() -> None:
    """Let the helper threads of numpy's BLAS stop spinning before a clock starts. A task
    that makes its data in parallel in its first round (synthetic clients: numpy products
    on every core) leaves those threads spin-waiting for about 0.1 s. That spinning is CPU
    time of this process: it inflated `--cpu-time` figures of the rounds that followed
    (inline vec FedAvg on logistic-784 at m = 100: 54.7 ms per round instead of 31.7;
    docs/benchmarks.md)."""
    time.sleep(SETTLE_SECONDS)


class Timing(NamedTuple):
    wall: float
    """Wall-clock seconds per round."""
    cpu: float
    """This process's CPU seconds per round."""


def engine_seconds_per_round(fed: Any, rounds: int, warmup: int) -> Timing:
    """Per round of `fed` (a Federation here or a driver actor), one call per round, after
    `warmup` rounds (data materialized, buffers allocated)."""
    fed.run_rounds(warmup)
    settle()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(rounds):
        fed.run_rounds(1)
    return Timing((time.perf_counter() - t0) / rounds, (time.process_time() - c0) / rounds)


def hand_loop_seconds_per_round(cfg: RunConfig, rounds: int, warmup: int) -> Timing:
    """FedAvg or ComFedL (Algorithm 1) on a logistic-regression task written directly:
    nn.Linear, autograd, the engine's data and seeded draws, every client each round."""
    r = resolve(cfg)
    s = r.algo_settings
    task = r.make_task()
    clients = task.clients(list(range(r.n_clients)))
    n_out, n_in = task.model.shapes[0]  # the linear layer's weight
    model = torch.nn.Linear(n_in, n_out)
    w_bar = [torch.zeros(n_out, n_in), torch.zeros(n_out)]
    comfedl = cfg.algo == "comfedl"
    total_n = float(sum(c.num_samples for c in clients))

    def one_round(rnd: int) -> None:
        new = [torch.zeros_like(p) for p in w_bar]
        for c in clients:
            with torch.no_grad():
                model.weight.copy_(w_bar[0])
                model.bias.copy_(w_bar[1])
            for step in range(s.tau):
                x, y = c.batch(generator(cfg.seed, CLIENT, c.client_id, rnd, step, 0), s.batch_size)
                loss = F.cross_entropy(model(x.flatten(1)), y)
                grads = torch.autograd.grad(loss, list(model.parameters()))
                # ComFedL: grad g(f) grad f for g = exp(y / gamma); FedAvg: grad f
                scale = torch.exp(loss.detach() / s.gamma) / s.gamma if comfedl else 1.0
                with torch.no_grad():
                    for p, g in zip(model.parameters(), grads):
                        p -= s.lr * scale * g
            weight = 1.0 / len(clients) if comfedl else c.num_samples / total_n  # the server's average
            for acc, p in zip(new, model.parameters()):
                acc += weight * p.detach()
        w_bar[:] = new

    for rnd in range(warmup):
        one_round(rnd)
    settle()
    t0, c0 = time.perf_counter(), time.process_time()
    for rnd in range(warmup, warmup + rounds):
        one_round(rnd)
    return Timing((time.perf_counter() - t0) / rounds, (time.process_time() - c0) / rounds)
