"""The Ray backend: client hosts as actors with persistent state, and a driver actor.

* Each host actor (named `clients-<j>` in the run's namespace, so the dashboard shows
  which is which) owns the data and state of a block of clients for the whole run.
* Hosts ask for `cpus_per_actor` CPUs and `gpus_per_actor` GPUs (fractions share a GPU);
  on a CPU-only cluster the same code runs with num_gpus=0.
* Every call `ray.put`s the payload (the global model) once and sends the reference to
  all hosts; hosts return partial sums pre-reduced over their clients.
"""

from __future__ import annotations

import math
from typing import Any

import ray

from raycompo.config import RunConfig
from raycompo.engine.host import Host
from raycompo.engine.placement import plan_placement  # issue 10
from raycompo.engine.pools import combine
from raycompo.errors import RaycompoError


def unwrap(exc: BaseException) -> BaseException:
    """The user error (RaycompoError / ValueError: bad settings, missing data) behind a Ray
    error, following `.cause` through nested actors (a host that failed inside the driver
    actor's constructor is two levels down); `exc` itself when there is none."""
    cause = getattr(exc, "cause", None)
    while cause is not None:
        if isinstance(cause, (RaycompoError, ValueError)) and not isinstance(cause, ray.exceptions.RayError):
            return cause
        cause = getattr(cause, "cause", None)
    return exc


def ray_get(refs):
    """`ray.get`, with a user error raised in an actor re-raised as itself rather than
    wrapped in Ray's task or actor errors."""
    try:
        return ray.get(refs)
    except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
        found = unwrap(exc)
        if found is exc:
            raise
        raise found from None


def auto_clients_per_actor(cfg: RunConfig, n_clients: int) -> int:
    """Spread the clients over the cluster: one host per `cpus_per_actor` CPUs (or per
    `gpus_per_actor` GPU fraction when GPUs are asked for), at most one per client."""
    if cfg.clients_per_actor:
        return cfg.clients_per_actor
    res = ray.cluster_resources()
    if cfg.gpus_per_actor > 0 and res.get("GPU", 0) > 0:
        slots = int(res["GPU"] / cfg.gpus_per_actor)
    else:
        slots = int(res.get("CPU", 1) / cfg.cpus_per_actor)
    return math.ceil(n_clients / max(1, min(slots, n_clients)))


class RayPool:
    def __init__(self, cfg: RunConfig, n_clients: int, namespace: str | None = None, placement_group: Any = None):
        # raycompo placement (issue 10): decided and checked in engine/placement.py
        self.placement = plan_placement(cfg, n_clients, extra_bundles=0 if placement_group is None else 1)
        self.blocks = self.placement.blocks
        self.owner = {cid: j for j, block in enumerate(self.blocks) for cid in block}
        actor_cls = ray.remote(Host)
        threads = max(1, int(cfg.cpus_per_actor))
        self.actors = []
        for j, block in enumerate(self.blocks):
            opts: dict[str, Any] = {"name": f"clients-{j}", **self.placement.actor_options(j, placement_group)}  # issue 10
            if namespace:
                opts["namespace"] = namespace
            self.actors.append(actor_cls.options(**opts).remote(cfg.to_dict(), block, None, threads))
        try:
            ray_get([a.ready.remote() for a in self.actors])  # fail early: data, settings
        except BaseException:
            self.close()
            raise

    def map(self, phase: str, round_: int, counts: dict[int, int], payload: dict[str, Any], reduce: bool = True):
        per_host: dict[int, list[tuple[int, int]]] = {}
        for cid, mult in sorted(counts.items()):
            per_host.setdefault(self.owner[cid], []).append((cid, mult))
        ref = ray.put(payload)  # once, shared by all hosts
        futures = [self.actors[j].map.remote(phase, round_, items, ref, reduce) for j, items in sorted(per_host.items())]
        return combine(ray_get(futures), reduce)

    def client_state(self, cid: int) -> dict[str, Any]:
        return ray_get(self.actors[self.owner[cid]].client_state.remote(cid))

    def busy_seconds(self) -> list[float]:
        return ray_get([a.__ray_call__.remote(lambda h: h.busy_seconds) for a in self.actors])

    def close(self) -> None:
        for a in self.actors:
            ray.kill(a)
        self.actors = []
