"""Start a Ray instance of its own with a metrics export port, record rows with RayMetrics,
and poll http://127.0.0.1:<port>/metrics until the gauges show up (tests/test_ray_metrics.py
runs it in a subprocess with a timeout). Prints one line `RESULT {json}`.

    python tests/metrics_run.py --port 18080 --wait 45
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request

_OWN_TMP = None if "RAY_TMPDIR" in os.environ else tempfile.mkdtemp(prefix="rcmx-")
os.environ.setdefault("RAY_TMPDIR", _OWN_TMP or "")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class FakePool:
    """A driver's `pool_stats()`: the n-th call reports n times the first call's counters."""

    def __init__(self):
        self.calls = 0

    def pool_stats(self) -> dict:
        self.calls += 1
        n = self.calls
        return {"host_busy_max_s": 0.125 * n, "host_busy_mean_s": 0.0625 * n, "bytes_sent": 31400.0 * n,
                "host_busy_s": {"clients-0": 0.125 * n, "clients-1": 0.0 * n}}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--wait", type=float, default=45.0)
    args = p.parse_args()
    import ray

    from raycompo.engine.ray_metrics import RayMetrics
    from raycompo.watch.observers import RunInfo

    t_init = time.perf_counter()
    ray.init(num_cpus=1, include_dashboard=False, _metrics_export_port=args.port, log_to_driver=False)
    url = f"http://127.0.0.1:{args.port}/metrics"
    out: dict = {"url": url, "init_s": time.perf_counter() - t_init}
    try:
        # stats_every_s: an hour, so that the pool's stats are fetched exactly at the first
        # row and at the end (whatever the machine's speed)
        obs = RayMetrics(stats_every_s=3600.0)
        pool = FakePool()
        obs.attach(pool)
        obs.on_start(RunInfo(config={"task": "dro-mnist5k", "algo": "fedavg"}, n_clients=4, namespace="metrics-test"))
        rows = [
            {"round": 0, "train_loss": 2.30, "val_acc": 0.08, "val_acc_worst": 0.05, "round_time": 0.0, "diverged": False},
            {"round": 1, "train_loss": 2.21, "val_acc": 0.38, "val_acc_worst": 0.27, "round_time": 0.25,
             "host_busy_max_s": 99.0, "note": "text"},  # pool keys in a row are not the pool's
            {"round": 2, "train_loss": float("nan"), "val_acc": 0.49, "val_acc_worst": 0.4, "round_time": 0.5},
        ]
        t0 = time.perf_counter()
        for r in rows:
            obs.on_row(r)
        obs.on_end("completed", rows[-1])
        out["recorded_s"] = time.perf_counter() - t0
        out["stats_calls"] = pool.calls
        # the last values set (an export between two sets would show earlier ones for a while)
        # every value the test checks (name, a label it must carry, value): an export in the
        # middle of the pool's counters would otherwise show some at their earlier values
        final = [("ray_raycompo_rows_total{", "", 3.0), ("ray_raycompo_bytes_sent{", "", 62800.0),
                 ("ray_raycompo_val_acc_worst{", "", 0.4), ("ray_raycompo_round{", "", 2.0),
                 ("ray_raycompo_host_busy_s{", 'host="clients-0"', 0.25),
                 ("ray_raycompo_host_busy_s{", 'host="clients-1"', 0.0),
                 ("ray_raycompo_host_busy_mean_s{", "", 0.125), ("ray_raycompo_host_busy_max_s{", "", 0.25),
                 ("ray_raycompo_val_acc{", "", 0.49), ("ray_raycompo_train_loss{", "", 2.21),
                 ("ray_raycompo_round_time{", "", 0.5)]
        text, found = "", []
        while time.perf_counter() - t0 < args.wait:
            try:
                text = urllib.request.urlopen(url, timeout=5).read().decode()
            except OSError as exc:
                text = f"<{exc}>"
            found = [ln for ln in text.splitlines() if ln.startswith("ray_raycompo_")]
            if all(any(ln.startswith(k) and label in ln and float(ln.rsplit(" ", 1)[1]) == v for ln in found)
                   for k, label, v in final):
                break
            time.sleep(0.5)
        out["appeared_after_s"] = time.perf_counter() - t0
        out["lines"] = found
        out["page_tail"] = text[-1500:] if not found else ""
        out["report_interval_ms"] = ray._config.metrics_report_interval_ms()
    finally:
        ray.shutdown()
        if _OWN_TMP:
            shutil.rmtree(_OWN_TMP, ignore_errors=True)
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
