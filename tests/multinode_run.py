"""Run a small federation on a real multi-node Ray cluster started on this machine.

Run as a script in its own process (tests/test_multinode.py does, with a timeout): it
starts `ray.cluster_utils.Cluster` (a head and `--nodes - 1` worker nodes, each its own
raylet and object store), runs the federation with `address=cluster.address`, looks up on
which node each host actor `clients-<j>` runs, shuts the cluster down, and prints one line
`RESULT {json}`: rows, hosts (name, clients, node id), nodes, seconds per round.

Its Ray files go to a private RAY_TMPDIR, so /tmp/ray (and `address="auto"` of anyone else
on the machine) is never touched.

    python tests/multinode_run.py --nodes 2 --cpus-per-node 1 --rounds 2 --clients-per-actor 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

_OWN_TMP = None if "RAY_TMPDIR" in os.environ else tempfile.mkdtemp(prefix="rcmn-")
os.environ.setdefault("RAY_TMPDIR", _OWN_TMP or "")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--cpus-per-node", type=float, default=1)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--algo", default="fedavg")
    p.add_argument("--clients-per-actor", type=int, default=None)
    p.add_argument("--cpus-per-actor", type=float, default=0.5)
    p.add_argument("--gpus-per-node", type=float, default=0, help="fake GPUs declared by each worker node (not the head)")
    p.add_argument("--gpus-per-actor", type=float, default=0)
    p.add_argument("--settings", default="{}", help="JSON: task/algorithm settings over tests/helpers.SMALL_DRO")
    p.add_argument("--address", default=None, help="join this cluster (e.g. auto) instead of starting one")
    args = p.parse_args()

    import torch

    torch.set_num_threads(1)
    import ray
    from ray.cluster_utils import Cluster

    from raycompo.configuration.config import RunConfig
    from raycompo.engine import run
    from tests.helpers import SMALL_DRO

    cluster = None
    if args.address is None:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": args.cpus_per_node, "include_dashboard": False})
    try:
        for _ in range(args.nodes - 1 if cluster else 0):
            cluster.add_node(num_cpus=args.cpus_per_node, num_gpus=args.gpus_per_node)
        if cluster:
            cluster.wait_for_nodes()
        address = cluster.address if cluster else args.address
        ray.init(address=address, namespace="multinode-driver", log_to_driver=False)
        nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
        cfg = RunConfig(task="dro-mnist5k", algo=args.algo, backend="ray", rounds=args.rounds,
                        cpus_per_actor=args.cpus_per_actor, clients_per_actor=args.clients_per_actor,
                        gpus_per_actor=args.gpus_per_actor,
                        settings={**SMALL_DRO, **json.loads(args.settings)})
        ns = "multinode"
        hosts: list[dict] = []
        marks: dict[int, float] = {}

        def look(row):
            marks[row["round"]] = time.perf_counter()
            if row["round"] != 0:
                return
            j = 0
            while True:
                try:
                    actor = ray.get_actor(f"clients-{j}", namespace=ns)
                except ValueError:
                    break
                node = ray.get(actor.__ray_call__.remote(lambda h: ray.get_runtime_context().get_node_id()), timeout=60)
                clients = ray.get(actor.__ray_call__.remote(lambda h: list(h.client_ids)), timeout=60)
                gpus = ray.get(actor.__ray_call__.remote(lambda h: [str(g) for g in ray.get_gpu_ids()]), timeout=60)
                seen = ray.get(actor.__ray_call__.remote(lambda h: (str(h.device), sorted(h.batched))), timeout=60)
                hosts.append({"name": f"clients-{j}", "clients": clients, "node": node, "gpus": gpus,
                              "device": seen[0], "batched": seen[1]})
                j += 1

        t0 = time.perf_counter()
        result = run(cfg, progress=look, address=address, namespace=ns)
        total = time.perf_counter() - t0
        rows = result.rows
        per_round = sorted(r["round_time"] for r in rows[1:])
        out = {
            "status": result.status,
            "rows": rows,
            "hosts": hosts,
            "nodes": nodes,
            "seconds_total": total,
            "round_time_median": per_round[len(per_round) // 2] if per_round else None,
            "round_time_mean": sum(per_round) / len(per_round) if per_round else None,
        }
        for h in hosts:
            print(f"{h['name']}: clients {h['clients']} on node ...{h['node'][-8:]}", flush=True)
        print("RESULT " + json.dumps(out), flush=True)
    finally:
        ray.shutdown()
        if cluster:
            cluster.shutdown()
        if _OWN_TMP:
            shutil.rmtree(_OWN_TMP, ignore_errors=True)


if __name__ == "__main__":
    main()
