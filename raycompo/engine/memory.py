"""Will the run fit in memory? Estimated before any actor starts, refused when it will not.

A population too large for the machine would otherwise grow until the kernel kills the
run (no message, config.json left "running"). `check` adds up what the run allocates,
part by part, and raises ConfigError (exit 2) with the numbers when the total exceeds the
memory available: `psutil.virtual_memory().available` here, or the Ray cluster's
`memory` resource when joining one (`--address`).

The parts (bytes; n clients, m per round, R rounds, h host actors; constants below,
measured with /usr/bin/time on CPython 3.11 + torch 2, then rounded up):

* processes: `PROCESS_BYTES` for this process (Python, torch, pandas) and
  `WORKER_BYTES` for every Ray worker it starts (the driver actor, each host).
* client ids: nothing of length n (hosts' blocks are ranges, a client's host is found by a
  search over the blocks' first ids: engine/placement.py, engine/ray_pool.py).
* state index, O(n): a host's state store indexes states by client id, `INDEX_BYTES` per
  id up to the largest id it stored (grown by doubling: twice that at most); on Ray host
  j's largest id is the end of its block, about n (j + 1) / h. Counted for every
  algorithm, although one that keeps no state stores nothing (engine/host.py `keep_state`).
* cohort draw, O(n): `torch.randperm(n)` (8 bytes per client) whenever m < n, or the
  evaluation sample is drawn from n.
* client data, O(touched): clients materialize when first used and at most
  `host.DATA_CACHE_CLIENTS` stay per host; the clients touched are at most
  R * m + (evaluations) * (evaluated clients), capped by n. Bytes per client: the task's
  `client_bytes()` when it has one (Synthetic: its largest client), else not counted
  (tasks with a fixed data set load it whole and have small populations).
* client states, O(touched): `STATE_COPIES` model-sized tensors per touched client
  (every algorithm: a stateless one cannot be told apart before it runs), plus the same
  again for the checkpoint that gathers them (twice on Ray: driver and this process); a
  `--state-memory` budget caps the resident part (the rest spills to disk).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from raycompo.errors import ConfigError

GB = 1e9
PROCESS_BYTES = 1.0 * GB
"""This process: Python, torch, pandas, the task (measured 0.95 GB peak for a 1,000-client inline run)."""
WORKER_BYTES = 0.6 * GB
"""A Ray worker process (driver actor or host): Ray, torch (a host holds ~0.4 GB unique, 0.77 GB resident)."""
INDEX_BYTES = 21
"""Per client id of a state store's index (engine/state_store.py: int8, int32, int64, int64)."""
PERM_BYTES = 8
"""Per client of `torch.randperm(n)` (int64), the cohort and evaluation draws."""
STATE_COPIES = 3
"""Model-sized tensors per client state at most (e.g. a personal model, momentum, u)."""


@dataclass
class Estimate:
    """What a run needs, by part (bytes)."""

    parts: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    def describe(self) -> str:
        big = sorted(self.parts.items(), key=lambda kv: -kv[1])
        return ", ".join(f"{k} {_gb(v)}" for k, v in big if v >= 0.005 * GB)


def _gb(x: float) -> str:
    return f"{x / GB:.2f} GB" if x < 100 * GB else f"{x / GB:,.0f} GB"


def _n_hosts(resolved: Any, placement: Any = None) -> int:
    if placement is not None:
        return placement.n_hosts
    cfg, n = resolved.config, resolved.n_clients
    if cfg.clients_per_actor:
        return math.ceil(n / int(cfg.clients_per_actor))
    return max(1, min(n, int((os.cpu_count() or 1) / max(cfg.cpus_per_actor, 1e-9))))


def touched_clients(resolved: Any) -> int:
    """Clients used at least once in the run, at most: R cohorts of m, and the evaluated ones."""
    cfg, n = resolved.config, resolved.n_clients
    m = getattr(resolved.algo_settings, "clients_per_round", None) or n
    evals = cfg.rounds // max(1, cfg.eval_every) + 2  # round 0, every eval_every, the last
    k = n if cfg.eval_clients is None else min(n, cfg.eval_clients)
    return min(n, cfg.rounds * m + evals * k)


def state_bytes_per_client(task: Any) -> float:
    """Upper bound of one client's persistent state: `STATE_COPIES` model-sized tensors and
    its index entry. Counted for every algorithm (states are created inside client phases,
    so a stateless one cannot be told apart before it runs)."""
    w = task.init_weights()
    return STATE_COPIES * int(w.numel()) * w.element_size() + 64


def estimate(resolved: Any, ray: bool, placement: Any = None, task: Any = None) -> Estimate:
    """The memory a run of `resolved` needs (see the module doc for each part)."""
    cfg, n = resolved.config, resolved.n_clients
    task = task if task is not None else resolved.make_task()
    hosts = _n_hosts(resolved, placement) if ray else 1
    est = Estimate()
    # the driver counted as an actor also when it is local (driver="local"): conservative
    est.parts["processes"] = PROCESS_BYTES + ((hosts + 1) * WORKER_BYTES if ray else 0.0)
    # each host's index up to its largest id, doubled: n inline; sum_j n (j + 1) / h on Ray
    est.parts["state index"] = 2 * INDEX_BYTES * n * ((hosts + 1) / 2 if ray else 1)
    m = getattr(resolved.algo_settings, "clients_per_round", None) or n
    sampled = m < n or (cfg.eval_clients is not None and cfg.eval_clients < n)
    est.parts["cohort draw"] = PERM_BYTES * n if sampled else 0.0
    touched = touched_clients(resolved)
    client_bytes = getattr(task, "client_bytes", None)
    if callable(client_bytes):
        from raycompo.engine.host import DATA_CACHE_CLIENTS

        est.parts["client data"] = min(touched, hosts * DATA_CACHE_CLIENTS) * float(client_bytes())
    states = touched * state_bytes_per_client(task)
    budget = cfg.state_memory_gb * GB if cfg.state_memory_gb is not None else None
    est.parts["client states"] = states if budget is None else min(states, budget)
    est.parts["checkpoint"] = states * (2 if ray else 1)
    return est


def available_local() -> float:
    try:
        import psutil
    except ImportError:
        import ray  # noqa: F401, I001  (puts its bundled psutil on sys.path)
        import psutil
    return float(psutil.virtual_memory().available)


def available_cluster() -> float:
    """The connected Ray cluster's `memory` resource (what Ray lets tasks and actors use)."""
    import ray

    return float(ray.cluster_resources().get("memory", 0.0))


def check(resolved: Any, ray: bool, *, placement: Any = None, available: float | None = None,
          where: str | None = None, task: Any = None) -> Estimate:
    """Raise ConfigError when the run's estimate exceeds `available` (default: this
    machine's available memory); returns the estimate otherwise."""
    est = estimate(resolved, ray, placement, task)
    if available is None:
        available, where = available_local(), where or "available on this machine"
    where = where or "available"
    if est.total > available:
        n = resolved.n_clients
        raise ConfigError(
            f"the run does not fit in memory: {n:,} clients need about {_gb(est.total)} ({est.describe()}), "
            f"{_gb(available)} {where}; use fewer clients (n_clients), "
            f"--eval-clients / clients_per_round to touch fewer, or --state-memory to spill states")
    return est
