"""A real two-node Ray cluster on this machine (ray.cluster_utils.Cluster: a head and a
worker node, each its own raylet and object store, 1 CPU each). The federation's host
actors are spread over both nodes (placement strategy SPREAD) and give the inline
backend's numbers. The cluster lives in a subprocess (tests/multinode_run.py) so the test
session's own Ray (tests/conftest.py) is untouched."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from raycompo.engine import run
from tests.helpers import assert_rows_close, small_config

pytestmark = pytest.mark.slow  # every test here: see docs/development.md

ROOT = Path(__file__).resolve().parent.parent


def run_on_cluster(*args: str, timeout: float = 480) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "multinode_run.py"), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"multinode_run.py failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def test_two_node_cluster_spreads_hosts_and_matches_inline():
    out = run_on_cluster("--nodes", "2", "--cpus-per-node", "1", "--rounds", "2", "--clients-per-actor", "2",
                         "--cpus-per-actor", "0.5", "--algo", "fedavg")
    assert out["status"] == "completed"
    assert len(out["nodes"]) == 2
    hosts = out["hosts"]
    assert [h["clients"] for h in hosts] == [[0, 1], [2, 3]]
    assert len({h["node"] for h in hosts}) == 2, f"hosts all on one node: {hosts}"
    assert {h["node"] for h in hosts} == set(out["nodes"])
    inline = run(small_config("fedavg", rounds=2))
    assert_rows_close(inline.rows, out["rows"], tol=1e-6)


def test_a_plugin_runs_on_two_nodes_and_matches_inline():
    """A user's file (examples/my_algorithm.py): the workers cannot import it (it is no
    module on their path), so its code travels by value with the run's pickles."""
    import raycompo

    spec = f"{ROOT / 'examples' / 'my_algorithm.py'}:ScgdMomentum"
    out = run_on_cluster("--nodes", "2", "--cpus-per-node", "1", "--rounds", "2", "--clients-per-actor", "2",
                         "--cpus-per-actor", "0.5", "--algo", spec, "--settings", json.dumps({"gamma": 1.0}))
    assert out["status"] == "completed"
    assert len({h["node"] for h in out["hosts"]}) == 2
    settings = {**small_config("fedavg").settings, "gamma": 1.0}
    inline = raycompo.run("dro-mnist5k", spec, rounds=2, settings=settings)
    assert_rows_close(inline.rows, out["rows"], tol=1e-6)


def test_four_vectorized_hosts_share_one_gpu_node():
    """`--gpus-per-actor 0.25`: four host actors fit on one GPU of a worker node (the head
    has none), each sees GPU 0, and runs its clients batched. The GPU is declared to Ray
    (no device here), so the hosts compute on the CPU (host.py falls back when CUDA is
    not available) and must give the inline backend's numbers."""
    out = run_on_cluster("--nodes", "2", "--cpus-per-node", "1", "--gpus-per-node", "1", "--gpus-per-actor", "0.25",
                         "--rounds", "2", "--clients-per-actor", "1", "--cpus-per-actor", "0.2", "--algo", "comfedl",
                         "--settings", json.dumps({"gamma": 1.0}))
    assert out["status"] == "completed"
    hosts = out["hosts"]
    assert len(hosts) == 4 and len({h["node"] for h in hosts}) == 1  # all four on the GPU node
    assert all(h["gpus"] == ["0"] for h in hosts), hosts
    assert all(h["device"] == "cpu" and "local" in h["batched"] for h in hosts), hosts
    inline = run(small_config("comfedl", rounds=2, gamma=1.0))
    assert_rows_close(inline.rows, out["rows"], tol=1e-6)
