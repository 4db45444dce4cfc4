"""Live run metrics on Ray's metrics endpoint: an observer over the round loop.

`RayMetrics` sets `ray.util.metrics` gauges from each row (and counts rows), tagged by
the run's Ray namespace, task and algorithm, so the Ray dashboard's Metrics page (with
Prometheus + Grafana) or any Prometheus scraping the node's metrics export port shows a
run while it goes. Names as exported (Ray prefixes `ray_`):

    ray_raycompo_round, ray_raycompo_train_loss, ray_raycompo_val_acc (mean over clients),
    ray_raycompo_val_acc_worst (worst client), ray_raycompo_round_time (seconds per round),
    ray_raycompo_host_busy_max_s, ray_raycompo_host_busy_mean_s, ray_raycompo_bytes_sent
    (when the row has them), ray_raycompo_rows_total (a counter of rows recorded)

A value missing from a row or not a finite number is skipped (the gauge keeps its last
value). Ray's per-process metrics are sent to the node's agent every
`metrics_report_interval_ms` (default 10 s; environment variable
RAY_metrics_report_interval_ms), so they appear at the endpoint seconds after `on_row`.
Without a connected Ray (the inline backend in a plain process) the observer does nothing.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from raycompo.engine.observers import Observer, Row, RunInfo

PREFIX = "raycompo_"
TAG_KEYS = ("namespace", "task", "algo")

GAUGES: dict[str, str] = {
    "round": "Last round recorded (0 = the initial model).",
    "train_loss": "Training loss, mean over clients.",
    "val_acc": "Validation accuracy, mean over clients.",
    "val_acc_worst": "Validation accuracy of the worst client.",
    "round_time": "Seconds the last round took.",
    "host_busy_max_s": "Seconds the busiest client host computed in the last round.",
    "host_busy_mean_s": "Seconds a client host computed in the last round, mean over hosts.",
    "bytes_sent": "Bytes the driver sent to the hosts (as the row reports it).",
}


def _number(v: Any) -> float | None:
    """A finite float from a number (numpy/torch scalars included), else None."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


class RayMetrics(Observer):
    """Export each row's metrics with ray.util.metrics. The tags (namespace, task, algo) come
    from `on_start`'s RunInfo; values given here win over it."""

    def __init__(self, namespace: str | None = None, task: str | None = None, algo: str | None = None):
        self._given = {"namespace": namespace, "task": task, "algo": algo}
        self.tags: dict[str, str] = {}
        self.gauges: dict[str, Any] = {}
        self.rows = None
        self.enabled = False

    def on_start(self, info: RunInfo) -> None:
        import ray

        if not ray.is_initialized():
            return  # nothing to export to
        from ray.util.metrics import Counter, Gauge

        cfg = info.config or {}
        found = {"namespace": info.namespace or "inline", "task": cfg.get("task", ""), "algo": cfg.get("algo", "")}
        self.tags = {k: str(self._given[k] if self._given[k] is not None else found[k]) for k in TAG_KEYS}
        self.gauges = {k: Gauge(PREFIX + k, description=d, tag_keys=TAG_KEYS) for k, d in GAUGES.items()}
        self.rows = Counter(PREFIX + "rows", description="Rows recorded (rounds, round 0 included).", tag_keys=TAG_KEYS)
        self.enabled = True

    def on_row(self, row: Row) -> None:
        if not self.enabled:
            return
        for key, gauge in self.gauges.items():
            v = _number(row.get(key))
            if v is not None:
                gauge.set(v, tags=self.tags)
        self.rows.inc(1.0, tags=self.tags)
