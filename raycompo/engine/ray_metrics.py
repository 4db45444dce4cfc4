"""Live run metrics on Ray's metrics endpoint: an observer over the round loop.

`RayMetrics` sets `ray.util.metrics` gauges from each row (and counts rows), tagged by
the run's Ray namespace, task and algorithm, so the Ray dashboard's Metrics page (with
Prometheus + Grafana) or any Prometheus scraping the node's metrics export port shows a
run while it goes. Names as exported (Ray prefixes `ray_`):

    from the rows:  ray_raycompo_round, ray_raycompo_train_loss, ray_raycompo_val_acc (mean
                    over clients), ray_raycompo_val_acc_worst (worst client),
                    ray_raycompo_round_time (seconds per round), ray_raycompo_rows_total
                    (a counter of rows recorded)
    from the pool:  ray_raycompo_host_busy_s (tag `host`: clients-<j>; seconds the host
                    has computed client phases since the run started),
                    ray_raycompo_host_busy_max_s, ray_raycompo_host_busy_mean_s (over hosts),
                    ray_raycompo_bytes_sent (payload bytes put in the object store so far)

The pool's numbers come from `Federation.pool_stats()` (the runner `attach`es the driver),
which costs one round trip to every host between two rounds. Ray sends a process's metrics
to the node's agent only every `metrics_report_interval_ms` (default 10 s; environment
variable RAY_metrics_report_interval_ms), so fetching more often would show nothing more:
the stats are fetched at the first row, then at a row when that interval has passed since
the last fetch, and once more when the run ends.

A value missing from a row or not a finite number is skipped (the gauge keeps its last
value). Without a connected Ray (the inline backend in a plain process) the observer does
nothing.
"""

from __future__ import annotations

import math
import numbers
import time
from typing import Any

from raycompo.watch.observers import Observer, Row, RunInfo

PREFIX = "raycompo_"
TAG_KEYS = ("namespace", "task", "algo")

GAUGES: dict[str, str] = {
    "round": "Last round recorded (0 = the initial model).",
    "train_loss": "Training loss, mean over clients.",
    "val_acc": "Validation accuracy, mean over clients.",
    "val_acc_worst": "Validation accuracy of the worst client.",
    "round_time": "Seconds the last round took.",
}
"""Gauges set from the rows' keys of the same name."""

POOL_GAUGES: dict[str, str] = {
    "host_busy_max_s": "Seconds the busiest client host has computed client phases, since the run started.",
    "host_busy_mean_s": "Seconds a client host has computed client phases since the run started, mean over hosts.",
    "bytes_sent": "Payload bytes the driver has put in the object store for the hosts, since the run started.",
}
"""Gauges set from `pool_stats()`'s keys of the same name."""

HOST_GAUGE = "host_busy_s"
"""Per host (tag `host`): `pool_stats()["host_busy_s"]`."""


def _number(v: Any) -> float | None:
    """A finite float from a number (numpy/torch scalars included), else None."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


class RayMetrics(Observer):
    """Export each row's metrics, and the pool's counters, with ray.util.metrics. The tags
    (namespace, task, algo) come from `on_start`'s RunInfo; values given here win over it.
    `stats_every_s`: least seconds between two `pool_stats()` fetches (default: Ray's
    metrics report interval)."""

    def __init__(self, namespace: str | None = None, task: str | None = None, algo: str | None = None,
                 stats_every_s: float | None = None):
        self._given = {"namespace": namespace, "task": task, "algo": algo}
        self.tags: dict[str, str] = {}
        self.gauges: dict[str, Any] = {}
        self.host_gauge = None
        self.rows = None
        self.enabled = False
        self.source: Any = None
        self.stats_every_s = stats_every_s
        self._fetched_at: float | None = None

    def attach(self, source: Any) -> None:
        """Where the pool's counters come from: anything with `pool_stats()` (the run's
        Federation, here or behind a RemoteDriver). The next row fetches them."""
        self.source = source
        self._fetched_at = None

    def on_start(self, info: RunInfo) -> None:
        import ray

        if not ray.is_initialized():
            return  # nothing to export to
        from ray.util.metrics import Counter, Gauge

        cfg = info.config or {}
        found = {"namespace": info.namespace or "inline", "task": cfg.get("task", ""), "algo": cfg.get("algo", "")}
        self.tags = {k: str(self._given[k] if self._given[k] is not None else found[k]) for k in TAG_KEYS}
        self.gauges = {k: Gauge(PREFIX + k, description=d, tag_keys=TAG_KEYS) for k, d in {**GAUGES, **POOL_GAUGES}.items()}
        self.host_gauge = Gauge(PREFIX + HOST_GAUGE, tag_keys=(*TAG_KEYS, "host"),
                                description="Seconds this client host has computed client phases, since the run started.")
        self.rows = Counter(PREFIX + "rows", description="Rows recorded (rounds, round 0 included).", tag_keys=TAG_KEYS)
        if self.stats_every_s is None:
            self.stats_every_s = report_interval_s()
        self.enabled = True

    def on_row(self, row: Row) -> None:
        if not self.enabled:
            return
        self._set(row, GAUGES)
        self.rows.inc(1.0, tags=self.tags)
        now = time.monotonic()
        if self.source is not None and (self._fetched_at is None or now - self._fetched_at >= self.stats_every_s):
            self._fetched_at = now
            self.export_stats(self.source.pool_stats())

    def on_end(self, status: str, final: Row) -> None:
        """The final counters (one more round trip, skipped on Ctrl-C; a failure here does
        not change the run's outcome)."""
        if self.enabled and self.source is not None and status != "interrupted":
            try:
                self.export_stats(self.source.pool_stats())
            except Exception:
                pass

    def export_stats(self, stats: dict[str, Any]) -> None:
        """Set the pool's gauges from a `pool_stats()` dict."""
        self._set(stats, POOL_GAUGES)
        for host, seconds in (stats.get(HOST_GAUGE) or {}).items():
            v = _number(seconds)
            if v is not None:
                self.host_gauge.set(v, tags={**self.tags, "host": str(host)})

    def _set(self, values: dict[str, Any], gauges: dict[str, str]) -> None:
        for key in gauges:
            v = _number(values.get(key))
            if v is not None:
                self.gauges[key].set(v, tags=self.tags)


def report_interval_s() -> float:
    """Seconds between two exports of a process's metrics (Ray's metrics_report_interval_ms)."""
    try:
        import ray

        return ray._config.metrics_report_interval_ms() / 1000.0
    except Exception:
        return 10.0
