"""The raycompo Grafana dashboard: install it where Ray's Grafana finds its dashboards.

    ray start --head --metrics-export-port=8080
    python -m raycompo.grafana          # copies the dashboard next to Ray's own
    python -m raycompo.grafana --check http://127.0.0.1:9090   # its queries, at a Prometheus

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
import json
import math
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


# --- the panel's queries, as Grafana sends them to Prometheus ---------------------------------
GRAFANA_REGEX_SPECIALS = "\\^$*+?.()|[]{}"
"""What Grafana's Prometheus data source escapes in a variable's value used in `=~`."""


@dataclass(frozen=True)
class Query:
    """One target of the dashboard: its panel's title, the PromQL as written, and the
    PromQL Prometheus receives once the variables are substituted."""

    panel: str
    expr: str
    promql: str


def load_dashboard(path: str | Path = DASHBOARD) -> dict[str, Any]:
    """The dashboard's JSON as a dict."""
    return json.loads(Path(path).read_text())


def variables(dashboard: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """The dashboard's query variables: name -> (metric, label) of their
    `label_values(metric, label)` query (the data source variable is left out)."""
    out = {}
    for var in dashboard.get("templating", {}).get("list", []):
        query = var.get("query")
        text = query.get("query", "") if isinstance(query, dict) else str(query or "")
        m = re.fullmatch(r"\s*label_values\(\s*([A-Za-z_:][\w:]*)\s*,\s*(\w+)\s*\)\s*", text)
        if var.get("type") == "query" and m:
            out[var["name"]] = (m.group(1), m.group(2))
    return out


def rate_interval(scrape_s: float, range_s: float, points: int = 1000) -> tuple[str, str]:
    """Grafana's ($__interval, $__rate_interval) for a time range of `range_s` seconds drawn
    with about `points` points, against a data source scraped every `scrape_s` seconds:
    $__interval = max(range / points, scrape), $__rate_interval = max($__interval + scrape,
    4 * scrape)."""
    interval = max(range_s / points, scrape_s)
    return f"{math.ceil(interval)}s", f"{math.ceil(max(interval + scrape_s, 4 * scrape_s))}s"


def grafana_regex(values: list[str]) -> str:
    """A multi-value variable as Grafana writes it into `label=~"..."`: each value escaped,
    several joined as (a|b)."""
    escaped = ["".join("\\" + ch if ch in GRAFANA_REGEX_SPECIALS else ch for ch in v) for v in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def queries(dashboard: dict[str, Any], chosen: dict[str, list[str] | None], scrape_s: float,
            range_s: float) -> list[Query]:
    """Every target of every panel with the variables substituted as Grafana does:
    `chosen[name]` the selected values (None: 'All', the variable's allValue), and
    $__interval / $__rate_interval from `rate_interval`."""
    interval, rate = rate_interval(scrape_s, range_s)
    allowed = {v["name"]: v.get("allValue", ".*") for v in dashboard.get("templating", {}).get("list", [])}
    out = []
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            expr = target.get("expr", "")
            promql = expr.replace("$__rate_interval", rate).replace("$__interval", interval)
            for name in sorted(chosen, key=len, reverse=True):  # $task before $t
                values = chosen[name]
                text = allowed.get(name, ".*") if values is None else grafana_regex(values)
                promql = promql.replace("${" + name + "}", text).replace("$" + name, text)
            out.append(Query(panel.get("title", ""), expr, promql))
    return out


def prometheus_get(url: str, path: str, params: dict[str, str], timeout: float = 10.0) -> Any:
    """GET `path` of the Prometheus HTTP API at `url`; its `data` (a RuntimeError with
    Prometheus's error, or saying that the reply is not the Prometheus API's, otherwise)."""
    import urllib.error
    import urllib.parse
    import urllib.request

    full = url.rstrip("/") + path + "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(full, timeout=timeout) as reply:
            text = reply.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:  # Prometheus answers a bad query with 400 and its error in JSON
        text = exc.read().decode(errors="replace")
        if not text.lstrip().startswith("{"):
            raise
    try:
        body = json.loads(text)
    except ValueError:
        raise RuntimeError(f"{full}: not the Prometheus HTTP API (the reply is not JSON: {text[:60]!r})") from None
    if not isinstance(body, dict) or "status" not in body:
        raise RuntimeError(f"{full}: not the Prometheus HTTP API (expected a JSON object with a 'status', "
                           f"got {text[:60]!r})")
    if body.get("status") != "success":
        raise RuntimeError(f"{full}: {body.get('errorType')}: {body.get('error')}")
    if "data" not in body:
        raise RuntimeError(f"{full}: not the Prometheus HTTP API (a 'success' reply without 'data')")
    return body["data"]


def check_scrape_interval(scrape_s: Any, where: str = "scrape_s") -> float:
    """The scrape interval in seconds: a finite number > 0 (ConfigError otherwise)."""
    from raycompo.errors import ConfigError

    if isinstance(scrape_s, bool) or not isinstance(scrape_s, (int, float)) or not math.isfinite(scrape_s) \
            or scrape_s <= 0:
        raise ConfigError(f"{where} must be a finite number of seconds > 0 (Grafana's default: 15), got {scrape_s!r}")
    return float(scrape_s)


def check_url(url: Any, where: str = "url") -> str:
    """A Prometheus URL: http:// or https://, a host, and a port in 1-65535 when one is given
    (ConfigError otherwise, also for what `urlsplit` or `http.client` would refuse: a bracket
    left open, an IPv6 address that is none, a port that is not a number, a space or a
    control character)."""
    from urllib.parse import urlsplit

    from raycompo.errors import ConfigError

    def refused(why: str = "") -> ConfigError:
        return ConfigError(f"{where} must be the URL of a Prometheus, http://HOST:PORT (e.g. http://127.0.0.1:9090), "
                           f"got {url!r}{': ' + why if why else ''}")

    if not isinstance(url, str):
        raise refused()
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        raise refused("it holds a space or a control character")
    try:
        parts = urlsplit(url)  # ValueError: a bracket left open, an IPv6 address that is none
    except ValueError as exc:
        raise refused(str(exc)) from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise refused()
    if not parts.hostname:
        raise refused("no host")
    try:
        port = parts.port  # ValueError: not a number, or out of 0-65535
    except ValueError:
        port = 0
    if port == 0:
        raise refused("the port must be a number in 1-65535")
    return url


def check_prometheus(url: str, *, scrape_s: float = 15.0, range_s: float = 1800.0,
                     timeout: float = 10.0, now: float | None = None) -> list[tuple[Query, int]]:
    """Evaluate every query of the shipped panel at the Prometheus at `url` as Grafana's
    time-series panels do: /api/v1/query_range over the last `range_s` seconds (ending
    `now`, default the clock's time) in steps of $__interval, once with each variable at
    'All' and once per run there (each combination of the variables' labels on their
    metric's series in that range, as picking that run in Grafana's menus would). Returns
    (query, number of series answered). A run that ended within the range answers: Ray
    drops a gauge about two report intervals after its process stops setting it, so an
    instant query would find a finished run's gauges gone, while its graph still shows them.

    ConfigError for a `url` or `scrape_s` that cannot be right; RuntimeError when the
    server's replies are not the Prometheus API's; OSError when it cannot be reached."""
    check_url(url)
    scrape_s = check_scrape_interval(scrape_s)
    dash = load_dashboard()
    names = variables(dash)
    end = time.time() if now is None else float(now)
    span = {"start": f"{end - range_s:.3f}", "end": f"{end:.3f}"}
    step = rate_interval(scrape_s, range_s)[0]
    runs: set[tuple[str, ...]] = set()
    for metric in {metric for metric, _ in names.values()}:
        found = prometheus_get(url, "/api/v1/series", {"match[]": metric, **span}, timeout)
        if not isinstance(found, list) or not all(isinstance(s, dict) for s in found):
            raise RuntimeError(f"{url}: not the Prometheus HTTP API (/api/v1/series answered {str(found)[:60]}, "
                               "not a list of label sets)")
        for series in found:
            runs.add(tuple(series.get(label, "") for _, label in names.values()))
    choices: list[dict[str, list[str] | None]] = [{name: None for name in names}]
    choices += [{name: [value] for name, value in zip(names, run)} for run in sorted(runs)]
    out = []
    for chosen in choices:
        for q in queries(dash, chosen, scrape_s, range_s):
            data = prometheus_get(url, "/api/v1/query_range", {"query": q.promql, **span, "step": step}, timeout)
            if not isinstance(data, dict) or not isinstance(data.get("result"), list):
                raise RuntimeError(f"{url}: not the Prometheus HTTP API (/api/v1/query_range answered {str(data)[:60]}, "
                                   "not an object with a 'result' list)")
            out.append((q, len(data["result"])))
    return out


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser (main parses with it; tests check documented commands)."""
    p = argparse.ArgumentParser(prog="python -m raycompo.grafana", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", default=None, help=f"install into this folder (default: ${ENV_DIR}, else the Ray "
                                                "session's grafana/dashboards)")
    p.add_argument("--temp-dir", default=None, help="Ray's temp dir, when `ray start --temp-dir` moved it")
    p.add_argument("--print-path", action="store_true", help="print the packaged dashboard's path and exit")
    p.add_argument("--check", metavar="PROMETHEUS_URL", default=None,
                   help="instead of installing: evaluate every query of the panel at this Prometheus (e.g. "
                        "http://127.0.0.1:9090) over the dashboard's last 30 minutes, as its graphs do, for "
                        "'All' and for each run there; exit 1 if one answers nothing")
    p.add_argument("--scrape-interval", type=float, default=15.0, metavar="S",
                   help="--check: the scrape interval Grafana's data source assumes (default 15 s, Grafana's)")
    return p


def report(url: str, scrape_s: float) -> int:
    """`--check`: one line per query and choice of the variables; 0 when each answered."""
    results = check_prometheus(url, scrape_s=scrape_s)
    for q, n in results:
        print(f"{n:4d} series  {q.panel}: {q.promql}")
    empty = [q for q, n in results if n == 0]
    if empty:
        print(f"{len(empty)} of {len(results)} queries answered nothing", file=sys.stderr)
        return 1
    print(f"all {len(results)} queries answered")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.print_path:
        print(DASHBOARD)
        return 0
    from http.client import HTTPException

    from raycompo.errors import RaycompoError

    try:
        check_scrape_interval(args.scrape_interval, "--scrape-interval")
        if args.check is not None:  # --check "" is a URL left empty, not "install"
            check_url(args.check, "--check")
    except RaycompoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check is not None:
        try:
            return report(args.check, args.scrape_interval)
        except (OSError, RuntimeError, ValueError, HTTPException) as exc:
            print(f"error: cannot query the Prometheus at {args.check}: {exc}", file=sys.stderr)
            return 2
    try:
        dest = install(args.dir or (dashboards_dir(args.temp_dir) if args.temp_dir else None))
    except (RaycompoError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"installed {dest}; in Grafana: Dashboards > Ray > raycompo runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
