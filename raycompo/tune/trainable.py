"""The Tune trainable: one trial is one whole federation, `raycompo.engine.run`.

Resources are a placement group: bundle 0 for the trial's driver (this function) and,
with `--backend ray`, one bundle per client-host actor (CPUs and a GPU fraction); the
engine places host j on bundle j+1. Tune reserves the whole group before the trial
starts, so trials never wait on each other half-started.

Host actors are reused across trials (`--backend ray`; `--no-reuse-hosts` turns it off).
What Ray Tune 2.58 does, and the design that follows from it:

* Tune removes a trial's placement group when the trial's actor is removed, and Ray then
  kills every actor scheduled in that group; host actors are also owned by the process
  that created them (this trial actor) and die with it. So hosts cannot outlive the
  trial actor, and a cache anywhere else (the sweep's process, a detached actor) would
  either hold dead hosts or hold resources that Tune does not know about.
* With `reuse_actors=True` (the sweep's default) Tune keeps a finished trial's actor,
  together with its placement group, for a pending trial with the same resources
  (all trials of a sweep have the same `PlacementGroupFactory`), calls `reset_config`
  (for a function trainable: waits for the function's thread to end) and runs the next
  trial's function in the same process, in the same placement group.
* So the host actors live in a module-level cache of the trial actor's process,
  `engine.host_actors.shared_hosts()`, keyed by the placement group, the number of hosts
  and their resources. `run` takes them from it (`hosts=`) and gives them back at its
  end; the next trial in this process resets them (`Host.reset`: new config, seed,
  algorithm, empty client states; the process's imports and partition cache stay).
  Results are those of fresh hosts (tests/test_host_reuse.py). A trial whose hosts
  failed or timed out kills them; a different shape kills them and starts new ones; they
  end with the trial actor (when Tune removes it, or at the sweep's end) at the latest.
* Without actor reuse (`--no-reuse-actors`) every trial has a new process, so new hosts.

Each round's row is reported to Tune (so ASHA can stop a trial early and Optuna sees
intermediate values) with these extra columns:

* `status`: 'running', then 'completed' or 'diverged' on the last report;
* `best_<metric>`, `best_round`: the best value of the optimized metric so far;
* `trial_time`: seconds since the trial started (setup included);
* on divergence the optimized metric is reported as its worst value (-inf for mode
  max, +inf for min), so the searcher ranks the trial last; the trial ends, the sweep
  goes on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from raycompo.tune.member_asha import MemberStop, RemoteRungs
from raycompo.tune.trial_checkpoints import Replay, TrialCheckpoints, run_kept
from raycompo.watch.observers import Observer


@dataclass
class TrialSpec:
    """What is the same for every trial (the config holds `algorithm` and the point)."""

    bases: dict[str, dict[str, Any]]
    """Per algorithm: RunConfig.to_dict() without the swept settings."""
    metric: str
    mode: str
    hosts: int = 1
    """Client-host actors per trial (--backend ray)."""
    reuse_hosts: bool = True
    """--backend ray: keep the host actors for the next trial in this trial actor."""
    classes: dict[tuple[str, str], type] = field(default_factory=dict)
    """The space's plugin classes by (kind, spec): `run_trial` makes its specs find them
    (raycompo.configuration.plugins.remember), so the trial process needs no file of the user's."""
    checkpoints: TrialCheckpoints | None = None
    """`--checkpoint-every N`: each trial's run folder and checkpoints (tune/trial_checkpoints.py)."""


def host_plan(n_clients: int, hosts: int) -> tuple[int, int]:
    """(clients_per_actor, host actors actually needed) for `hosts` wanted."""
    hosts = max(1, min(hosts, n_clients))
    per = math.ceil(n_clients / hosts)
    return per, math.ceil(n_clients / per)


def bundles(backend: str, hosts: int, driver_cpus: float, cpus_per_actor: float, gpus_per_actor: float) -> list[dict[str, float]]:
    """Placement group bundles of one trial: the driver, then one per client host (for a
    backend whose hosts are Ray actors)."""
    from raycompo.configuration.backends import get_backend

    if not get_backend(backend).uses_ray:
        return [{"CPU": driver_cpus}]
    host = {"CPU": cpus_per_actor}
    if gpus_per_actor > 0:
        host["GPU"] = gpus_per_actor
    return [{"CPU": driver_cpus}] + [dict(host) for _ in range(hosts)]


def worst(mode: str) -> float:
    return -math.inf if mode == "max" else math.inf


def better(a: float, b: float, mode: str) -> bool:
    return a > b if mode == "max" else a < b


class TuneReporter(Observer):
    """The observer that reports each row to Tune (see the module docstring)."""

    def __init__(self, metric: str, mode: str, rounds: int, report: Any = None, extra: dict[str, Any] | None = None):
        """`report(out)`: where each report goes (default: `ray.tune.report`); `extra`: keys
        added to every report (a population's member index)."""
        import time

        self.metric, self.mode, self.rounds = metric, mode, rounds
        self.report, self.extra = report, dict(extra or {})
        self.best, self.best_round, self.last = worst(mode), -1, worst(mode)
        self.t0 = time.perf_counter()

    def on_row(self, row: dict[str, Any]) -> None:
        import time

        from ray import tune

        metric, mode = self.metric, self.mode
        out = {k: v for k, v in row.items() if isinstance(v, (int, float, str, bool)) or v is None}
        diverged = bool(row.get("diverged"))
        value = row.get(metric)
        if diverged or not isinstance(value, (int, float)) or not math.isfinite(value):
            value = worst(mode) if diverged else self.last
        self.last = value
        if better(value, self.best, mode) or self.best_round < 0:
            self.best, self.best_round = value, row["round"]
        out[metric] = value
        out[f"best_{metric}"] = self.best
        out["best_round"] = self.best_round
        last = diverged or bool(row.get("stopped")) or row["round"] >= self.rounds  # stopped: a budget reached
        out["status"] = ("diverged" if diverged else "completed") if last else "running"
        out["trial_time"] = time.perf_counter() - self.t0
        out.update(self.extra)
        (self.report or tune.report)(out)



def trial_config(spec: TrialSpec, algo: str, point: dict[str, Any]) -> Any:
    """The RunConfig of a trial: its algorithm's base with its point's values."""
    from raycompo.configuration.config import RunConfig
    from raycompo.tune.space import split_run_keys

    fields, settings = split_run_keys(point)  # swept RunConfig keys (a buffer K, a system) are fields
    d = {**spec.bases[algo], **fields}
    d["settings"] = {**d.get("settings", {}), **settings}
    return RunConfig.from_dict(d)


def run_trial(config: dict[str, Any], spec: TrialSpec, rungs: str | None = None) -> None:
    """The Tune function trainable (bind `spec` with tune.with_parameters). `rungs`: the
    sweep's ASHA rungs actor (`--scheduler asha`, tune/member_asha.py), which stops this
    trial at a rung as Ray Tune's ASHA would."""
    import ray

    from raycompo.configuration.backends import get_backend
    from raycompo.configuration.plugins import remember
    from raycompo.engine import run

    remember(spec.classes)
    point = {k: v for k, v in config.items() if k != "algorithm"}
    cfg = trial_config(spec, config["algorithm"], point)
    uses_ray = get_backend(cfg.backend).uses_ray
    pg = ray.util.get_current_placement_group() if uses_ray else None
    hosts = None
    if uses_ray and spec.reuse_hosts:
        from raycompo.engine.host_actors import shared_hosts

        hosts = shared_hosts()
    # The dashboard's gauges (engine/ray_metrics.py) tagged namespace=tune-<trial>-<id>: the Ray
    # backend's run exports them itself under that namespace; an inline trial adds the observer.
    import uuid

    from ray import tune

    namespace = f"tune-{tune.get_context().get_trial_name()}-{uuid.uuid4().hex[:6]}"  # unique if a trial reruns
    stop = (MemberStop(RemoteRungs(rungs), tune.get_context().get_trial_id(), spec.metric, spec.mode, tune.report)
            if rungs else None)
    reporter = TuneReporter(spec.metric, spec.mode, cfg.rounds, report=stop.report if stop else None)
    observers: list[Observer] = [Replay(reporter, direct=tune.report), reporter, *([stop] if stop else [])]
    if not uses_ray:
        from raycompo.engine.ray_metrics import RayMetrics

        observers.append(RayMetrics(namespace=namespace))
    run_kept(spec.checkpoints, run, cfg, observers=observers, driver="local", placement_group=pg, hosts=hosts,
             namespace=namespace)
