"""The Grafana panel proven against a real Prometheus (issue 27, part 5): a real `--backend
ray` run's metrics export is scraped by Prometheus (the Debian package's binary), and every
query of the shipped panel JSON, its variables substituted as Grafana would, answers with
data for the run through Prometheus's HTTP API (tests/prometheus_run.py does the work in a
subprocess with a Ray of its own; the session's Ray is untouched)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from raycompo.grafana import grafana_regex, load_dashboard, queries, rate_interval, variables

pytestmark = pytest.mark.slow  # every test here: see docs/development.md

ROOT = Path(__file__).resolve().parent.parent
PROMETHEUS = shutil.which("prometheus")


def test_variables_substitute_as_grafana_does():
    dash = load_dashboard()
    assert variables(dash) == {"namespace": ("ray_raycompo_round", "namespace"),
                               "task": ("ray_raycompo_round", "task"), "algo": ("ray_raycompo_round", "algo")}
    # Grafana: $__interval = max(range / points, scrape), $__rate_interval = max(interval + scrape, 4 * scrape)
    assert rate_interval(15.0, 1800.0) == ("15s", "60s")
    assert rate_interval(1.0, 1800.0) == ("2s", "4s")
    assert grafana_regex(["a.b"]) == r"a\.b" and grafana_regex(["x", "y(1)"]) == r"(x|y\(1\))"
    chosen = queries(dash, {"namespace": ["raycompo-1"], "task": None, "algo": ["/p/my.py:Mine"]}, 1.0, 1800.0)
    targets = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert [q.expr for q in chosen] == targets
    assert all("$" not in q.promql for q in chosen)
    rate = next(q.promql for q in chosen if q.panel == "Rounds per minute")
    assert rate == 'rate(ray_raycompo_rows_total{namespace=~"raycompo-1", task=~".*", algo=~"/p/my\\.py:Mine"}[4s]) * 60'


@pytest.mark.skipif(PROMETHEUS is None, reason="the prometheus binary is not installed (Debian: apt-get install "
                                                "prometheus; .ci/run installs it where it runs as root)")
def test_every_panel_query_answers_for_a_real_ray_run():
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "RAY_metrics_report_interval_ms": "1000"}  # default 10 s
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "prometheus_run.py"), "--prometheus", PROMETHEUS,
                           "--wait", "90"], capture_output=True, text=True, timeout=400, cwd=ROOT, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"prometheus_run.py failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}"
    out = json.loads(lines[-1][len("RESULT "):])
    assert out["prometheus_exit"] is not None  # stopped
    assert out["status"] == "completed" and out["rounds"] == 6
    assert out["cli_check_exit"] == 0  # python -m raycompo.grafana --check URL, as docs/watching.md runs it
    targets = [t["expr"] for p in load_dashboard()["panels"] for t in p.get("targets", [])]
    answered = out["queries"]
    everything = [q for q in answered if 'namespace=~".*"' in q["promql"]]
    the_run = [q for q in answered if 'namespace=~"raycompo-' in q["promql"]]
    assert len(everything) == len(the_run) == len(targets), (len(targets), answered)
    for q in answered:
        assert q["series"] >= 1, f"{q['panel']}: {q['promql']} answered nothing after {out['answered_after_s']:.0f} s"
    assert all('task=~"dro-mnist5k"' in q["promql"] and 'algo=~"fedavg"' in q["promql"] for q in the_run)
    hosts = next(q for q in the_run if q["promql"].startswith("ray_raycompo_host_busy_s{"))
    assert hosts["series"] == 2  # clients-0 and clients-1: 4 clients, 2 per host
    (series,) = out["round_series"]
    assert series["metric"]["task"] == "dro-mnist5k" and float(series["value"][1]) == 6  # the last round
