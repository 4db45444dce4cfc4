"""A real `--backend ray` run scraped by a real Prometheus: start Prometheus (bound to
127.0.0.1, scraping this Ray's metrics export port every second, storage in a temporary
folder), start a Ray of its own with that export port, run a small federation on it, then
evaluate every query of the shipped Grafana panel through Prometheus's HTTP API
(`raycompo.grafana.check_prometheus`: range queries over the last 30 minutes, as the
panel's graphs ask) until each answers or the wait ends, starting `--after` seconds after
the run ended (its gauges then gone from an instant query). Prometheus is
stopped at the end whatever happens. Prints one line `RESULT {json}`
(tests/test_prometheus.py runs it in a subprocess with a timeout).

    RAY_metrics_report_interval_ms=1000 python tests/prometheus_run.py --prometheus prometheus --wait 90
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

_TMP = tempfile.mkdtemp(prefix="rcprom-")
os.environ.setdefault("RAY_TMPDIR", _TMP)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SMALL = {"n_clients": 4, "big_client_size": 60, "small_client_size": 20, "val_per_client": 40}
ROUNDS = 6


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_prometheus(binary: str, folder: Path, target_port: int, wait_s: float) -> tuple[subprocess.Popen, str]:
    """Prometheus scraping 127.0.0.1:<target_port> every second; (process, its URL) once
    /-/ready answers (a RuntimeError with its log's end after `wait_s`)."""
    config = folder / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: ray\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{target_port}']\n"
    )
    port = free_port()
    log = open(folder / "prometheus.log", "w")
    proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=2) as reply:
                if reply.status == 200:
                    return proc, url
        except OSError:
            pass
        time.sleep(0.25)
    stop(proc)
    raise RuntimeError(f"Prometheus at {url} not ready after {wait_s:.0f} s (exit {proc.poll()}); its log ends:\n"
                       + (folder / "prometheus.log").read_text()[-2000:])


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--prometheus", default="prometheus")
    p.add_argument("--wait", type=float, default=90.0, help="seconds for every query to answer")
    p.add_argument("--after", type=float, default=5.0, help="seconds to wait after the run ends before checking")
    args = p.parse_args()
    import ray

    import raycompo
    from raycompo.grafana import check_prometheus

    folder = Path(_TMP)
    metrics_port = free_port()
    out: dict = {}
    prom = None
    t0 = time.perf_counter()
    try:
        prom, url = start_prometheus(args.prometheus, folder, metrics_port, wait_s=60)
        out["prometheus_ready_s"] = time.perf_counter() - t0
        ray.init(num_cpus=2, include_dashboard=False, _metrics_export_port=metrics_port, log_to_driver=False)
        result = raycompo.run("dro-mnist5k", "fedavg", rounds=ROUNDS, settings=SMALL, backend="ray",
                              clients_per_actor=2, cpus_per_actor=0.25)
        out["status"], out["rounds"] = result.status, int(result.final["round"])
        from raycompo.grafana import main as grafana_main

        # check a finished run, as a user would: past Ray's gauge lifetime (two report
        # intervals), so that its gauges are gone from the instant view and only a range finds them
        time.sleep(args.after)
        t_run = time.perf_counter()
        answers: list = []
        out["cli_check_exit"] = None
        while time.perf_counter() - t_run < args.wait:
            try:
                answers = check_prometheus(url, scrape_s=1.0, range_s=1800.0)
            except (OSError, RuntimeError) as exc:
                out["last_error"] = str(exc)
            per_run = [q for q, _ in answers if 'namespace=~"raycompo-' in q.promql]  # the run picked, not 'All'
            if answers and per_run and all(n > 0 for _, n in answers):
                # the command line's check, as docs/watching.md runs it after the run
                out["cli_check_exit"] = grafana_main(["--check", url, "--scrape-interval", "1"])
                if out["cli_check_exit"] == 0:
                    break
            time.sleep(1.0)
        out["answered_after_s"] = time.perf_counter() - t_run
        out["queries"] = [{"panel": q.panel, "promql": q.promql, "series": n} for q, n in answers]
        # the last round the run reported (an instant query of the gauge itself finds nothing
        # once the run has ended: Ray drops a gauge two report intervals after its last set)
        rows = urllib.request.urlopen(url + "/api/v1/query?query=max_over_time(ray_raycompo_round%5B30m%5D)",
                                      timeout=10).read()
        out["round_series"] = json.loads(rows)["data"]["result"]
    finally:
        ray.shutdown()
        if prom is not None:
            stop(prom)
            out["prometheus_exit"] = prom.returncode
        shutil.rmtree(_TMP, ignore_errors=True)
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
