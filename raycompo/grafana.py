"""The raycompo Grafana dashboard: install it where Ray's Grafana finds its dashboards.

    ray start --head --metrics-export-port=8080
    python -m raycompo.grafana          # copies the dashboard next to Ray's own

The dashboard (raycompo/dashboards/raycompo_grafana_dashboard.json, shipped in the
package) draws the `ray_raycompo_*` metrics of raycompo/engine/ray_metrics.py: the round,
the training loss, the validation accuracy (mean and worst client), seconds per round,
the hosts' busy time and the bytes sent, per run (Ray namespace), task and algorithm.

How Ray provisions Grafana (ray/dashboard/modules/metrics/metrics_head.py): when a head
node starts, Ray writes `<session>/metrics/grafana/grafana.ini`, whose provisioning
folder has a file provider 'Ray' reading every *.json in the dashboards folder:
`$RAY_METRICS_GRAFANA_DASHBOARD_OUTPUT_DIR` when set, else
`<temp dir>/session_latest/metrics/grafana/dashboards` (temp dir /tmp/ray by default).
A head start clears and rewrites `<session>/metrics/grafana`, so install after `ray
start --head` (Grafana's file provider picks a new file up within seconds), or set
RAY_METRICS_GRAFANA_DASHBOARD_OUTPUT_DIR to a folder of your own before `ray start`,
install there once, and it stays across restarts.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

DASHBOARD = Path(__file__).parent / "dashboards" / "raycompo_grafana_dashboard.json"
ENV_DIR = "RAY_METRICS_GRAFANA_DASHBOARD_OUTPUT_DIR"


def dashboards_dir(temp_dir: str | None = None) -> Path:
    """Where Ray's Grafana reads dashboards (see the module docstring)."""
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR])
    root = Path(temp_dir or os.environ.get("RAY_TMPDIR") or "/tmp/ray")
    return root / "session_latest" / "metrics" / "grafana" / "dashboards"


def install(folder: str | Path | None = None) -> Path:
    """Copy the dashboard into `folder` (default: `dashboards_dir()`); returns the file."""
    target = Path(folder) if folder else dashboards_dir()
    if folder is None and not os.environ.get(ENV_DIR) and not target.parent.is_dir():
        from raycompo.errors import ConfigError

        raise ConfigError(f"no Ray head's Grafana configuration at {target.parent}; start one first "
                          f"(ray start --head --metrics-export-port=8080), or pass --dir / set {ENV_DIR}")
    target.mkdir(parents=True, exist_ok=True)
    dest = target / DASHBOARD.name
    shutil.copyfile(DASHBOARD, dest)
    return dest


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser (main parses with it; tests check documented commands)."""
    p = argparse.ArgumentParser(prog="python -m raycompo.grafana", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", default=None, help=f"install into this folder (default: ${ENV_DIR}, else the Ray "
                                                "session's grafana/dashboards)")
    p.add_argument("--temp-dir", default=None, help="Ray's temp dir, when `ray start --temp-dir` moved it")
    p.add_argument("--print-path", action="store_true", help="print the packaged dashboard's path and exit")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.print_path:
        print(DASHBOARD)
        return 0
    from raycompo.errors import RaycompoError

    try:
        dest = install(args.dir or (dashboards_dir(args.temp_dir) if args.temp_dir else None))
    except (RaycompoError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"installed {dest}; in Grafana: Dashboards > Ray > raycompo runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
