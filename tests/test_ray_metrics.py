"""RayMetrics' gauges reach Ray's Prometheus endpoint. A Ray instance of its own, with a
metrics export port, runs in a subprocess (tests/metrics_run.py); the session's Ray
(tests/conftest.py) is untouched."""

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from raycompo.engine.observers import RunInfo
from raycompo.engine.ray_metrics import RayMetrics

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def value(lines: list[str], name: str) -> float:
    hits = [ln for ln in lines if ln.startswith(name + "{")]
    assert hits, f"{name} not at the endpoint; it has: {[ln.split('{')[0] for ln in lines]}"
    assert 'namespace="metrics-test"' in hits[0] and 'task="dro-mnist5k"' in hits[0] and 'algo="fedavg"' in hits[0], hits[0]
    return float(hits[0].rsplit(" ", 1)[1])


def test_gauges_appear_at_the_prometheus_endpoint():
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "RAY_metrics_report_interval_ms": "1000"}  # default 10 s: the gauges would take ~10 s to appear
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "metrics_run.py"), "--port", str(free_port()), "--wait", "30"],
                          capture_output=True, text=True, timeout=90, cwd=ROOT, env=env)
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
    assert value(found, "ray_raycompo_bytes_sent") == 31400
    assert value(found, "ray_raycompo_host_busy_max_s") == 0.125
    assert value(found, "ray_raycompo_rows_total") == 3
    assert not any(re.match(r"ray_raycompo_(note|diverged)", ln) for ln in found)


def test_without_ray_it_does_nothing(monkeypatch):
    import ray

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    obs = RayMetrics()
    obs.on_start(RunInfo(config={"task": "t", "algo": "a"}, n_clients=1))
    obs.on_row({"round": 1, "val_acc": 0.5})  # no error, nothing exported
    assert not obs.enabled
