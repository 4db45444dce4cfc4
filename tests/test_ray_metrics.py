"""What the Ray dashboard shows of a run. RayMetrics' gauges reach Ray's Prometheus
endpoint: a Ray instance of its own, with a metrics export port, runs in a subprocess
(tests/metrics_run.py), the session's Ray (tests/conftest.py) is untouched. A run on the
session's Ray: the actors' repr, and the pool's counters the gauges are fed from."""

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from raycompo.engine.ray_metrics import RayMetrics
from raycompo.watch.observers import RunInfo

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def value(lines: list[str], name: str, tag: str = "") -> float:
    hits = [ln for ln in lines if ln.startswith(name + "{") and tag in ln]
    assert hits, f"{name} {tag} not at the endpoint; it has: {[ln.split(' ')[0] for ln in lines]}"
    assert len(hits) == 1, hits
    assert 'namespace="metrics-test"' in hits[0] and 'task="dro-mnist5k"' in hits[0] and 'algo="fedavg"' in hits[0], hits[0]
    return float(hits[0].rsplit(" ", 1)[1])


@pytest.mark.slow
def test_gauges_appear_at_the_prometheus_endpoint():
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "RAY_metrics_report_interval_ms": "1000"}  # default 10 s: the gauges would take ~10 s to appear
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "metrics_run.py"), "--port", str(free_port()), "--wait", "60"],
                          capture_output=True, text=True, timeout=180, cwd=ROOT, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"metrics_run.py failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    out = json.loads(lines[-1][len("RESULT "):])
    found = out["lines"]
    assert found, f"no ray_raycompo_* metric at {out['url']} after {out['appeared_after_s']:.0f} s; page ends:\n{out['page_tail']}"
    assert value(found, "ray_raycompo_val_acc_worst") == 0.4
    assert value(found, "ray_raycompo_val_acc") == 0.49
    assert value(found, "ray_raycompo_train_loss") == 2.21  # round 2's NaN was skipped
    assert value(found, "ray_raycompo_round") == 2
    assert value(found, "ray_raycompo_round_time") == 0.5
    assert value(found, "ray_raycompo_rows_total") == 3
    # the pool's counters: fetched at the first row and at the end, not at every row
    assert out["stats_calls"] == 2
    assert value(found, "ray_raycompo_host_busy_s", 'host="clients-0"') == 0.25
    assert value(found, "ray_raycompo_host_busy_s", 'host="clients-1"') == 0.0
    assert value(found, "ray_raycompo_host_busy_max_s") == 0.25  # the pool's, not the row's 99
    assert value(found, "ray_raycompo_host_busy_mean_s") == 0.125
    assert value(found, "ray_raycompo_bytes_sent") == 62800
    assert not any(re.match(r"ray_raycompo_(note|diverged)", ln) for ln in found)


def test_without_ray_it_does_nothing(monkeypatch):
    import ray

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    obs = RayMetrics()
    obs.on_start(RunInfo(config={"task": "t", "algo": "a"}, n_clients=1))
    obs.on_row({"round": 1, "val_acc": 0.5})  # no error, nothing exported
    assert not obs.enabled



def actor_reprs(namespace: str) -> dict[str, str]:
    """{name: repr} of the live actors in `namespace`: the `repr_name` that the dashboard's
    Actors page (Repr column) and `ray.util.state.list_actors(detail=True)` show, read here
    from the GCS actor table because the state API needs the dashboard, which the tests' Ray
    runs without."""
    from ray._private.state import state
    from ray.core.generated import gcs_pb2

    found = {}
    for raw in state._connect_and_get_accessor().get_actor_table(None, "ALIVE"):
        a = gcs_pb2.ActorTableData.FromString(raw)
        if a.ray_namespace == namespace:
            found[a.name] = a.repr_name
    return found


@pytest.mark.slow
def test_what_the_dashboard_shows_of_a_ray_run(ray_session, monkeypatch, tmp_path):
    """The actors' repr says which clients of which task and run each holds; the runner
    attaches the driver to RayMetrics, whose fetches of `pool_stats()` carry every host's
    busy seconds (by actor name) and the payload bytes put in the object store, growing."""
    import dataclasses

    from raycompo.configuration.config import resolve
    from raycompo.engine import runner
    from tests.helpers import small_config

    fetched, reprs = [], {}

    class Spy(RayMetrics):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "stats_every_s": 0.0})  # every row

        def export_stats(self, stats):
            fetched.append(stats)
            super().export_stats(stats)

    def look(row):
        if row["round"] == 0:
            reprs.update(actor_reprs("dashboard-test"))

    monkeypatch.setattr(runner, "RayMetrics", Spy)
    cfg = dataclasses.replace(small_config("fedavg", rounds=2), backend="ray", clients_per_actor=2, cpus_per_actor=0.5)
    out = tmp_path / "run"
    result = runner.run(cfg, out=str(out), namespace="dashboard-test", progress=look)
    assert result.status == "completed"

    run = f"{out} (dashboard-test)"
    assert reprs == {
        "driver": f"Driver(run {run}, task dro-mnist5k, algo fedavg, 4 clients, 2 rounds)",
        "clients-0": f"Host(clients 0-1 of 4, task dro-mnist5k, run {run})",
        "clients-1": f"Host(clients 2-3 of 4, task dro-mnist5k, run {run})",
    }

    assert len(fetched) == len(result.rows) + 1  # each row, and the end
    for before, after in zip(fetched, fetched[1:]):
        assert after["bytes_sent"] >= before["bytes_sent"]
        assert all(after["host_busy_s"][h] >= before["host_busy_s"][h] for h in before["host_busy_s"])
    last = fetched[-1]
    assert sorted(last["host_busy_s"]) == ["clients-0", "clients-1"]
    assert min(last["host_busy_s"].values()) > 0
    assert last["host_busy_max_s"] == max(last["host_busy_s"].values())
    # FedAvg puts the global model once per phase call: the evaluation of round 0, then a
    # local step and an evaluation per round
    w = resolve(cfg).make_task().init_weights()
    assert last["bytes_sent"] == (1 + 2 * 2) * w.numel() * w.element_size()


def test_host_repr_names_its_clients_task_and_run():
    from raycompo.engine.host import host_repr

    assert host_repr(range(0, 100), 1000, "dro-mnist5k", "runs/x (raycompo-1a2b)") == \
        "Host(clients 0-99 of 1000, task dro-mnist5k, run runs/x (raycompo-1a2b))"
    assert host_repr(range(7, 8), 10, "sinusoid", None) == "Host(client 7 of 10, task sinusoid)"
    assert host_repr([3, 5, 9], 10, "synthetic", "raycompo-1a2b") == "Host(3 clients in 3-9 of 10, task synthetic, run raycompo-1a2b)"
