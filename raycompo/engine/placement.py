"""Where the client hosts go: decided, checked and recorded here, before any actor starts.

`plan_placement` turns a run's `clients_per_actor` / `cpus_per_actor` / `gpus_per_actor`
and the cluster (total resources and the alive nodes) into a `Placement`: the block of
client ids of each host actor, the resources of each, and the scheduling strategy. A
placement that cannot fit raises ConfigError with numbers that would fit, instead of
leaving Ray to wait forever for resources that never come.

* Automatic (`clients_per_actor` None): one host per `cpus_per_actor` CPUs of the cluster
  (per `gpus_per_actor` GPU fraction when GPUs are asked for), at most one per client:
  the numbers of the former `ray_pool.auto_clients_per_actor`, lowered only where they
  would not fit on the nodes one by one (e.g. 1.5 + 1.5 CPUs hold two 1-CPU hosts, not 3).
* Strategy: "SPREAD" for CPU hosts (Ray's SPREAD: round robin over the nodes, so a
  two-node cluster runs half the hosts on each); "PACK" for GPU hosts: hosts fill one GPU
  node before the next (fractions of the same GPU share it), each pinned to its planned
  node with a soft node affinity (Ray places it elsewhere if that node went away).
* Inside a placement group (a Tune trial) the group decides; `extra_bundles` bundles come
  before the hosts' (Tune: 1, the driver's), so host j takes bundle j + extra_bundles.

Needs Ray only when `resources` / `nodes` are not given (tests pass fake ones).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from raycompo.errors import ConfigError

EPS = 1e-9


def _fits(have: float, need: float) -> int:
    """How many `need`s fit in `have` (float-safe: 2 / 0.4 is 5, not 4)."""
    return int(math.floor(have / need + EPS)) if need > 0 else 10**12


def _node_capacity(node: dict[str, float], cpus: float, gpus: float) -> int:
    n = _fits(node.get("CPU", 0.0), cpus)
    if gpus > 0:
        n = min(n, _fits(node.get("GPU", 0.0), gpus))
    return n


def _blocks(n_clients: int, per_actor: int) -> list[range]:
    """Contiguous blocks of client ids, one per host (ranges: O(hosts), whatever n)."""
    n_hosts = math.ceil(n_clients / per_actor)
    return [range(j * per_actor, min(n_clients, (j + 1) * per_actor)) for j in range(n_hosts)]


def _round_down(x: float) -> float:
    """x rounded down to 2 decimals (0.4 stays 0.4; 0.666 -> 0.66)."""
    return math.floor(x * 100 + EPS) / 100


@dataclass
class Placement:
    blocks: list[range]
    """Client ids per host actor j (contiguous blocks, as ranges)."""
    cpus_per_actor: float
    gpus_per_actor: float
    strategy: str
    """'SPREAD' (CPU hosts, over the nodes) or 'PACK' (GPU hosts, fill a GPU node first)."""
    node_ids: list[str | None] = field(default_factory=list)
    """PACK: the node planned for each host (soft affinity); SPREAD: None (Ray spreads)."""
    extra_bundles: int = 0
    """In a placement group: bundles before the hosts' (host j takes bundle j + this)."""
    auto: bool = True
    """clients_per_actor was chosen here (True) or given (False)."""
    cluster: dict[str, Any] = field(default_factory=dict)
    """What it was planned against: total CPU, GPU, number of nodes, capacity in hosts."""

    @property
    def n_hosts(self) -> int:
        return len(self.blocks)

    @property
    def clients_per_actor(self) -> int:
        return len(self.blocks[0]) if self.blocks else 0

    def actor_options(self, j: int, placement_group: Any = None) -> dict[str, Any]:
        """Ray actor options of host j: num_cpus, num_gpus, scheduling_strategy (the caller
        adds name and namespace)."""
        opts: dict[str, Any] = {"num_cpus": self.cpus_per_actor, "num_gpus": self.gpus_per_actor}
        if placement_group is not None:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                placement_group, placement_group_bundle_index=j + self.extra_bundles
            )
        elif self.strategy == "PACK" and j < len(self.node_ids) and self.node_ids[j]:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(self.node_ids[j], soft=True)
        else:
            opts["scheduling_strategy"] = "SPREAD"
        return opts

    def describe(self) -> str:
        sizes = sorted({len(b) for b in self.blocks})
        per = "-".join(str(s) for s in (sizes[0], sizes[-1])) if len(sizes) > 1 else str(sizes[0] if sizes else 0)
        n_clients = sum(len(b) for b in self.blocks)
        res = f"{self.cpus_per_actor:g} CPU" + (f" + {self.gpus_per_actor:g} GPU" if self.gpus_per_actor else "")
        nodes = self.cluster.get("nodes")
        where = f" over {nodes} node{'s' if nodes != 1 else ''}" if nodes else ""
        how = "auto" if self.auto else "--clients-per-actor"
        return (f"{self.n_hosts} host{'s' if self.n_hosts != 1 else ''} x {per} clients ({n_clients} clients, {how}), "
                f"{res} each, {self.strategy}{where}")

    def record(self) -> dict[str, Any]:
        """JSON-able, for config.json: blocks as [first, last, count] per host."""
        return {
            "hosts": self.n_hosts,
            "clients_per_actor": self.clients_per_actor,
            "auto": self.auto,
            "blocks": [[b[0], b[-1], len(b)] for b in self.blocks],
            "cpus_per_actor": self.cpus_per_actor,
            "gpus_per_actor": self.gpus_per_actor,
            "strategy": self.strategy,
            "node_ids": list(self.node_ids),
            "extra_bundles": self.extra_bundles,
            "cluster": dict(self.cluster),
        }


def _alive_nodes(nodes: list[dict] | None) -> list[dict[str, Any]]:
    """[{'id':..., 'CPU':..., 'GPU':...}] from ray.nodes()-shaped dicts (or plain ones)."""
    if nodes is None:
        import ray

        nodes = ray.nodes()
    out = []
    for i, n in enumerate(nodes):
        if not n.get("Alive", n.get("alive", True)):
            continue
        res = n.get("Resources", n.get("resources", n))
        out.append({"id": n.get("NodeID", n.get("node_id", f"node-{i}")),
                    "CPU": float(res.get("CPU", 0.0)), "GPU": float(res.get("GPU", 0.0))})
    return out


def _largest_share(nodes: list[dict[str, Any]], key: str, hosts: int, other_fit) -> float:
    """The largest per-host amount of `key` (CPU/GPU) with which `hosts` hosts fit on the
    nodes (rounded down to 2 decimals), 0 if none; `other_fit(node)` caps hosts per node by
    the other resource."""
    best = 0.0
    for node in nodes:
        for k in range(1, hosts + 1):
            share = node[key] / k
            if share <= best:
                break
            cap = sum(min(_fits(n[key], share), other_fit(n)) for n in nodes)
            if cap >= hosts:
                best = share
                break
    return _round_down(best)


def plan_placement(cfg, n_clients: int, resources: dict | None = None, nodes: list[dict] | None = None,
                   extra_bundles: int = 0) -> Placement:
    """Decide and check the hosts of a run of `n_clients` clients (see the module doc).

    `cfg`: a RunConfig (clients_per_actor, cpus_per_actor, gpus_per_actor). `resources`:
    ray.cluster_resources()-shaped totals; `nodes`: ray.nodes()-shaped (dead ones skipped).
    Both default to the connected Ray cluster's. Raises ConfigError when it cannot fit."""
    if n_clients < 1:
        raise ConfigError(f"a run needs at least one client, got {n_clients}")
    cpus, gpus = float(cfg.cpus_per_actor), float(cfg.gpus_per_actor)
    per = cfg.clients_per_actor
    _check_host_resources(cpus, gpus)
    node_list, total_cpu, total_gpu = _cluster(resources, nodes)
    shape = f"{len(node_list)} node{'s' if len(node_list) != 1 else ''}, {total_cpu:g} CPUs, {total_gpu:g} GPUs"
    _check_one_host_fits(node_list, cpus, gpus, total_gpu, shape)
    capacity = sum(_node_capacity(n, cpus, gpus) for n in node_list)
    per_actor = _clients_per_actor(per, n_clients, cpus, gpus, total_cpu, total_gpu, capacity)
    blocks = _blocks(n_clients, per_actor)
    hosts = len(blocks)
    if hosts > capacity:
        raise _does_not_fit(node_list, n_clients, per_actor, hosts, cpus, gpus, capacity, shape)
    strategy = "PACK" if gpus > 0 else "SPREAD"
    node_ids = _pack(node_list, hosts, cpus, gpus) if strategy == "PACK" else [None] * hosts
    cluster = {"CPU": total_cpu, "GPU": total_gpu, "nodes": len(node_list), "capacity_hosts": capacity}
    return Placement(blocks, cpus, gpus, strategy, node_ids, extra_bundles, per is None, cluster)


def _check_host_resources(cpus: float, gpus: float) -> None:
    """ConfigError for a host's CPUs and GPUs that Ray cannot give any actor."""
    if cpus <= 0:
        raise ConfigError(f"--cpus-per-actor must be > 0, got {cpus:g}")
    if gpus < 0:
        raise ConfigError(f"--gpus-per-actor must be >= 0, got {gpus:g}")
    if gpus > 1 and abs(gpus - round(gpus)) > EPS:
        raise ConfigError(f"--gpus-per-actor {gpus:g}: Ray accepts a fraction below 1 or a whole number of GPUs; "
                          f"use --gpus-per-actor {math.floor(gpus)} or {math.ceil(gpus)}")


def _cluster(resources: dict | None, nodes: list[dict] | None) -> tuple[list[dict[str, Any]], float, float]:
    """(the alive nodes, the total CPUs, the total GPUs) of the cluster: given, or the
    connected Ray cluster's; resources without nodes are one node holding them all."""
    node_list = _alive_nodes(nodes)
    if resources is None:
        if nodes is not None:
            resources = {"CPU": sum(n["CPU"] for n in node_list), "GPU": sum(n["GPU"] for n in node_list)}
        else:
            import ray

            resources = ray.cluster_resources()
    total_cpu, total_gpu = float(resources.get("CPU", 0.0)), float(resources.get("GPU", 0.0))
    if not node_list:  # resources only: one node holding them all
        node_list = [{"id": None, "CPU": total_cpu, "GPU": total_gpu}]
    return node_list, total_cpu, total_gpu


def _check_one_host_fits(node_list: list[dict[str, Any]], cpus: float, gpus: float, total_gpu: float,
                         shape: str) -> None:
    """ConfigError unless the resources a single host needs exist on one node."""
    max_cpu = max(n["CPU"] for n in node_list)
    max_gpu = max(n["GPU"] for n in node_list)
    if gpus > 0 and total_gpu <= 0:
        raise ConfigError(f"--gpus-per-actor {gpus:g} asks for GPUs but the cluster has none ({shape}); "
                          f"use --gpus-per-actor 0 (the same code runs on the CPU), or join a GPU cluster with --address")
    if gpus > max_gpu + EPS:
        raise ConfigError(f"--gpus-per-actor {gpus:g} is more than any node has (at most {max_gpu:g} GPUs on one node; "
                          f"{shape}); use --gpus-per-actor {max_gpu:g} or less")
    if cpus > max_cpu + EPS:
        biggest = _round_down(max_cpu) if max_cpu > 0 else 0
        fix = f"use --cpus-per-actor {biggest:g} or less" if biggest > 0 else "add a node with CPUs"
        raise ConfigError(f"--cpus-per-actor {cpus:g} is more than any node has (at most {max_cpu:g} CPUs on one node; "
                          f"{shape}); {fix}")


def _clients_per_actor(per: int | None, n_clients: int, cpus: float, gpus: float, total_cpu: float,
                       total_gpu: float, capacity: int) -> int:
    """The clients of one host: `per` as given, or (None) spread over the hosts the cluster holds."""
    if per is None:
        # The former auto_clients_per_actor's numbers, capped by what fits node by node.
        if gpus > 0:
            slots = _fits(total_gpu, gpus)
        else:
            slots = _fits(total_cpu, cpus)
        slots = max(1, min(slots, capacity, n_clients))
        return math.ceil(n_clients / slots)
    per_actor = int(per)
    if per_actor < 1:
        raise ConfigError(f"--clients-per-actor must be >= 1, got {per}")
    return per_actor


def _does_not_fit(node_list: list[dict[str, Any]], n_clients: int, per_actor: int, hosts: int, cpus: float,
                  gpus: float, capacity: int, shape: str) -> ConfigError:
    """The error of `hosts` hosts that the cluster cannot hold, with the numbers that would fit."""
    fewer = math.ceil(n_clients / max(1, capacity))
    if gpus > 0:
        share = _largest_share(node_list, "GPU", hosts, lambda n: _fits(n["CPU"], cpus))
        cpu_cap = sum(_fits(n["CPU"], cpus) for n in node_list)
        res_fix = f"--gpus-per-actor {share:g}" if share > 0 and cpu_cap >= hosts else None
        if res_fix is None or cpu_cap < hosts:
            cshare = _largest_share(node_list, "CPU", hosts, lambda n: _fits(n["GPU"], gpus))
            if cshare > 0:
                res_fix = (res_fix + " and " if res_fix else "") + f"--cpus-per-actor {cshare:g}"
        need = f"{hosts} hosts x ({cpus:g} CPU + {gpus:g} GPU)"
    else:
        share = _largest_share(node_list, "CPU", hosts, lambda n: 10**12)
        res_fix = f"--cpus-per-actor {share:g}" if share > 0 else None
        need = f"{hosts} hosts x {cpus:g} CPU"
    options = " or ".join(x for x in (res_fix, f"--clients-per-actor {fewer}") if x)
    return ConfigError(
        f"placement does not fit: {n_clients} clients at --clients-per-actor {per_actor} need {need}, "
        f"but the cluster ({shape}) holds {capacity} such host{'s' if capacity != 1 else ''}; use {options}"
    )


def _pack(node_list: list[dict[str, Any]], hosts: int, cpus: float, gpus: float) -> list[str | None]:
    """PACK: the node of each host, filling the GPU nodes one after the other, most GPUs
    first (ties: the order given)."""
    node_ids: list[str | None] = [None] * hosts
    order = sorted(range(len(node_list)), key=lambda i: -node_list[i]["GPU"])
    j = 0
    for i in order:
        for _ in range(_node_capacity(node_list[i], cpus, gpus)):
            if j == hosts:
                break
            node_ids[j] = node_list[i]["id"]
            j += 1
    return node_ids
