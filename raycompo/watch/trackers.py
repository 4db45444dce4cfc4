"""Experiment trackers: MLflow and Weights & Biases, for `run`, `tune` and `reproduce`.

    python -m raycompo.run ... --out runs/x --tracker mlflow
    raycompo.run(task, algo, out="runs/x", tracker="wandb")

A run's tracker is an `Observer`: its settings (the task's and the algorithm's effective
settings, with task, algo, rounds, seed, backend) as params, every row as metrics at
step = round, and, when the run ends, the run folder's files (config.json, metrics.csv,
frames; not checkpoint.pt) as artifacts. A sweep's trials go through Ray Tune's own
callbacks (`ray.air.integrations.mlflow.MLflowLoggerCallback`,
`ray.air.integrations.wandb.WandbLoggerCallback`): one tracked run per trial, its swept
settings as params, every round at step = round, Tune's trial folder as artifacts.

Where it goes:

* mlflow: `MLFLOW_TRACKING_URI` when set; otherwise a local store under the run (or
  sweep, or claim) folder, `<out>/mlruns/` (`./mlruns/` without one): the SQLite file
  mlruns/mlflow.db (MLflow's local default since MLflow 3; it refuses a bare folder
  store unless MLFLOW_ALLOW_FILE_STORE=true) and the artifacts in mlruns/artifacts/.
  See them with `mlflow ui --backend-store-uri sqlite:///<out>/mlruns/mlflow.db`.
  Experiment: MLFLOW_EXPERIMENT_NAME, else 'raycompo' (a run), the space's name (a
  sweep) or the claim's name (reproduce).
* wandb: project WANDB_PROJECT (default 'raycompo'), files under `<out>/wandb/`;
  `WANDB_MODE=offline` works without a network (`wandb sync <out>/wandb/offline-run-*`
  uploads later).

Both are optional dependencies: `pip install -e ".[mlflow]"` / `".[wandb]"`; without the
package, naming the tracker is a ConfigError (exit 2) before anything runs.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from raycompo.errors import ConfigError
from raycompo.watch.observers import Observer, Row, RunInfo

TRACKERS = ("mlflow", "wandb")
SKIP_FILES = ("checkpoint.pt",)
"""Files of a run folder not logged as artifacts (the resumable state: large, and not a result)."""
SKIP_DIRS = ("mlruns", "wandb", "tune")
FLUSH_S = 2.0
"""MLflow: rows are sent in one batch at most every FLUSH_S seconds (and at the end)."""


def check_trackers(names: str | Sequence[str] | None) -> list[str]:
    """The tracker names, checked: known and importable (else one ConfigError)."""
    if not names:
        return []
    names = [names] if isinstance(names, str) else list(names)
    for name in names:
        if name not in TRACKERS:
            raise ConfigError(f"unknown tracker {name!r}; choose one of: {', '.join(TRACKERS)}")
        try:
            __import__(name)
        except ImportError:
            raise ConfigError(f"--tracker {name} needs the {name} package: pip install -e \".[{name}]\" "
                              f"(or pip install {name})") from None
    return list(dict.fromkeys(names))


def mlflow_uri(folder: str | Path | None) -> str:
    """MLFLOW_TRACKING_URI, or the local store under `folder` (./mlruns without one)."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    root = (Path(folder) if folder else Path(".")).resolve() / "mlruns"
    root.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{root / 'mlflow.db'}"


def mlflow_experiment(uri: str, name: str) -> str:
    """The id of experiment `name` in `uri` (made, with its artifacts next to a local
    store, when missing). Call it before runs write in parallel: the store is created once."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    where = None
    if uri.startswith("sqlite:///"):
        where = (Path(uri.removeprefix("sqlite:///")).parent / "artifacts").as_uri()
    try:
        return client.create_experiment(name, artifact_location=where)
    except Exception:  # made meanwhile by another process
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def _numbers(row: Row) -> dict[str, float]:
    out = {}
    for k, v in row.items():
        if k == "round" or isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        v = float(v)
        if math.isfinite(v):
            out[k] = v
    return out


def params_of(config: dict[str, Any]) -> dict[str, Any]:
    """A run's settings as flat params: every effective setting, then what names the run."""
    params = dict(config.get("effective_settings") or config.get("settings") or {})
    for k in ("task", "algo", "rounds", "seed", "backend", "eval_every"):
        if k in config:
            params.setdefault(k, config[k])
    return params


def artifact_files(folder: str | Path | None) -> list[Path]:
    """The run folder's files to log (not checkpoint.pt, not the trackers' own stores)."""
    if not folder or not Path(folder).is_dir():
        return []
    files = []
    for p in sorted(Path(folder).rglob("*")):
        rel = p.relative_to(folder)
        if p.is_file() and rel.parts[0] not in SKIP_DIRS and p.name not in SKIP_FILES:
            files.append(p)
    return files


def run_name(info_config: dict[str, Any], out: str | None) -> str:
    if out:
        return Path(out).name
    algo = str(info_config.get("algo", "run")).rpartition(":")[2]
    return f"{algo}-{str(info_config.get('task', '')).rpartition(':')[2]}-s{info_config.get('seed', 0)}"


class MLflowTracker(Observer):
    """One MLflow run per raycompo run (see the module docstring)."""

    def __init__(self, out: str | None = None, experiment: str | None = None, uri: str | None = None,
                 tags: dict[str, str] | None = None):
        self.out, self.uri = out, uri
        self.experiment = experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or "raycompo"
        self.tags = dict(tags or {})
        self.client: Any = None
        self.run_id: str | None = None
        self._pending: list[Any] = []
        self._flushed = 0.0

    def on_start(self, info: RunInfo) -> None:
        from mlflow.entities import Param, RunTag
        from mlflow.tracking import MlflowClient

        self.out = self.out or info.out
        self.uri = self.uri or mlflow_uri(self.out)
        self.client = MlflowClient(tracking_uri=self.uri)
        exp = mlflow_experiment(self.uri, self.experiment)
        tags = {"raycompo.out": str(Path(info.out).resolve()) if info.out else "", **self.tags}
        if info.start_round:
            tags["raycompo.resumed_from_round"] = str(info.start_round)
        run = self.client.create_run(exp, run_name=run_name(info.config, info.out), tags=tags)
        self.run_id = run.info.run_id
        params = [Param(str(k), str(v)[:6000]) for k, v in params_of(info.config).items()]
        for i in range(0, len(params), 100):
            self.client.log_batch(self.run_id, params=params[i:i + 100])
        self.client.log_batch(self.run_id, tags=[RunTag("n_clients", str(info.n_clients))])
        self._flushed = time.monotonic()

    def on_row(self, row: Row) -> None:
        from mlflow.entities import Metric

        if self.run_id is None:
            return
        now_ms = int(time.time() * 1000)
        step = int(row.get("round", 0))
        self._pending += [Metric(k, v, now_ms, step) for k, v in _numbers(row).items()]
        if time.monotonic() - self._flushed >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:1000], self._pending[1000:]  # MLflow's batch limit
            self.client.log_batch(self.run_id, metrics=batch)
        self._flushed = time.monotonic()

    def on_end(self, status: str, final: Row) -> None:
        self._finish({"completed": "FINISHED", "diverged": "FINISHED", "interrupted": "KILLED"}.get(status, "FAILED"),
                     status)

    def on_failure(self, exc: BaseException, final: Row) -> None:
        self._finish("FAILED", "failed")

    def _finish(self, mlflow_status: str, status: str) -> None:
        if self.run_id is None:
            return
        try:
            self.flush()
            self.client.set_tag(self.run_id, "raycompo.status", status)
            for f in artifact_files(self.out):
                rel = f.parent.relative_to(self.out)
                self.client.log_artifact(self.run_id, str(f), None if str(rel) == "." else str(rel))
        finally:
            self.client.set_terminated(self.run_id, mlflow_status)
            self.run_id = None


class WandbTracker(Observer):
    """One W&B run per raycompo run (see the module docstring)."""

    def __init__(self, out: str | None = None, project: str | None = None, group: str | None = None):
        self.out = out
        self.project = project or os.environ.get("WANDB_PROJECT") or "raycompo"
        self.group = group
        self.run: Any = None

    def on_start(self, info: RunInfo) -> None:
        import wandb

        self.out = self.out or info.out
        folder = Path(self.out) if self.out else Path(".")
        folder.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=self.project, group=self.group, dir=str(folder.resolve()),
                              name=run_name(info.config, info.out), config=params_of(info.config),
                              tags=["resumed"] if info.start_round else None, reinit="create_new")

    def on_row(self, row: Row) -> None:
        if self.run is not None:
            self.run.log(_numbers(row), step=int(row.get("round", 0)))

    def on_end(self, status: str, final: Row) -> None:
        self._finish(0 if status in ("completed", "diverged") else 1, status)

    def on_failure(self, exc: BaseException, final: Row) -> None:
        self._finish(1, "failed")

    def _finish(self, code: int, status: str) -> None:
        if self.run is None:
            return
        import wandb

        try:
            self.run.summary["raycompo_status"] = status
            files = artifact_files(self.out)
            if files:
                name = "run-" + hashlib.sha1(str(Path(self.out).resolve()).encode()).hexdigest()[:10]
                art = wandb.Artifact(name, type="raycompo-run")
                for f in files:
                    art.add_file(str(f), name=str(f.relative_to(self.out)))
                self.run.log_artifact(art)
        finally:
            self.run.finish(exit_code=code)
            self.run = None


def run_trackers(names: Iterable[str], out: str | None = None, experiment: str | None = None,
                 group: str | None = None, uri: str | None = None) -> list[Observer]:
    """Observers for one run: `names` from `check_trackers`; `uri`: MLflow's store (default
    `mlflow_uri(out)`)."""
    made: list[Observer] = []
    for name in names:
        if name == "mlflow":
            made.append(MLflowTracker(out, experiment=experiment, uri=uri))
        elif name == "wandb":
            made.append(WandbTracker(out, group=group))
    return made


def tune_callbacks(names: Iterable[str], folder: str | Path, experiment: str) -> list[Any]:
    """Ray Tune's own logger callbacks for a sweep in `folder`: one tracked run per trial,
    metrics at step = the row's round."""
    callbacks: list[Any] = []
    for name in names:
        if name == "mlflow":
            from ray.air.integrations.mlflow import MLflowLoggerCallback

            class RoundStepMLflow(MLflowLoggerCallback):
                """Ray's callback with step = the row's round (Ray's: the report's count)."""

                def log_trial_result(self, iteration, trial, result):
                    metrics = {k: v for k, v in result.items() if k != "round"}
                    step = int(result.get("round", result.get("training_iteration", 0)))
                    self.mlflow_util.log_metrics(run_id=self._trial_runs[trial], metrics_to_log=metrics, step=step)

            uri = mlflow_uri(folder)
            exp = os.environ.get("MLFLOW_EXPERIMENT_NAME") or experiment
            mlflow_experiment(uri, exp)
            callbacks.append(RoundStepMLflow(tracking_uri=uri, experiment_name=exp, save_artifact=True,
                                             tags={"raycompo.sweep": str(Path(folder).resolve())}))
        elif name == "wandb":
            from ray.air.integrations.wandb import WandbLoggerCallback

            Path(folder).mkdir(parents=True, exist_ok=True)
            callbacks.append(WandbLoggerCallback(project=os.environ.get("WANDB_PROJECT") or "raycompo",
                                                 group=experiment, dir=str(Path(folder).resolve()),
                                                 upload_checkpoints=False, save_checkpoints=False))
    return callbacks
