"""A client host: the data and persistent state of one or more clients, for a whole run.

The inline backend uses one Host in the calling process; the Ray backend wraps Host in
an actor (one per `clients_per_actor` clients). Hosts pre-reduce: `map` returns the
multiplicity-weighted sum of its clients' contributions, accumulated in float64 so that
the result does not depend on how clients are grouped on hosts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from raycompo.config import RunConfig, resolve
from raycompo.seeding import CLIENT, generator
from raycompo.tasks.base import ClientData


@dataclass
class ClientCtx:
    """What a client hook sees (see algorithms.base.ClientContext)."""

    client_id: int
    data: ClientData
    state: dict[str, Any]
    round: int
    seed: int
    device: torch.device

    def rng(self, step: int, stream: int = 0) -> torch.Generator:
        """The stream seeded by (seed, client, round, step, stream)."""
        return generator(self.seed, CLIENT, self.client_id, self.round, step, stream)


def _to(obj: Any, device: torch.device) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    return obj


def add_into(acc: dict[str, Any], out: dict[str, Any], weight: float = 1.0) -> None:
    """acc += weight * out, tensors in float64 on the CPU."""
    for k, v in out.items():
        v = v.detach().to("cpu", torch.float64) if isinstance(v, torch.Tensor) else float(v)
        acc[k] = acc[k] + weight * v if k in acc else weight * v


class Host:
    """Construction only records its arguments; `ready()` loads the data. A failure there
    (missing data, bad settings) reaches the caller as its own exception: Ray passes a
    method's error through, but only the message of an actor constructor's."""

    def __init__(self, config: RunConfig | dict, client_ids: list[int], device: str | None = None, num_threads: int | None = None):
        self._args = (config, list(client_ids), device, num_threads)
        self.clients: dict[int, ClientData] = {}

    def ready(self) -> list[int]:
        """Build the task, the algorithm and this host's clients (once)."""
        if self._args is not None:
            self._setup(*self._args)
            self._args = None
        return sorted(self.clients)

    def _setup(self, config: RunConfig | dict, client_ids: list[int], device: str | None, num_threads: int | None) -> None:
        if num_threads:
            torch.set_num_threads(num_threads)
        cfg = config if isinstance(config, RunConfig) else RunConfig.from_dict(config)
        if device is None:
            device = "cuda" if cfg.gpus_per_actor > 0 and torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        r = resolve(cfg)
        self.seed = cfg.seed
        self.task = r.make_task().to(self.device)
        self.algorithm = r.algo_cls(r.algo_settings, self.task)
        self.clients = {c.client_id: c.to(self.device) for c in self.task.clients(list(client_ids))}
        self.states: dict[int, dict[str, Any]] = {}
        self.busy_seconds = 0.0

    def context(self, cid: int, round_: int) -> ClientCtx:
        ctx = ClientCtx(cid, self.clients[cid], {}, round_, self.seed, self.device)
        if cid not in self.states:
            self.states[cid] = self.algorithm.init_client_state(ctx)
        ctx.state = self.states[cid]
        return ctx

    def map(self, phase: str, round_: int, items: list[tuple[int, int]], payload: dict[str, Any], reduce: bool = True):
        """Run `client_<phase>` for each (client, multiplicity); sum or collect the outputs."""
        t0 = time.perf_counter()
        hook = getattr(self.algorithm, f"client_{phase}")
        payload = _to(payload, self.device)
        result: dict[Any, Any] = {}
        for cid, mult in items:
            out = hook(self.context(cid, round_), payload)
            if reduce:
                add_into(result, out, float(mult))
            else:
                result[cid] = _to(out, torch.device("cpu"))
        self.busy_seconds += time.perf_counter() - t0
        return result

    def client_state(self, cid: int) -> dict[str, Any]:
        """A client's persistent state (for tests and inspection)."""
        return _to(self.states.get(cid, {}), torch.device("cpu"))
