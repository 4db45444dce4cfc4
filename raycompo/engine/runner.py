"""Run one experiment end to end: validate, build the federation, loop, write outputs."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from raycompo.config import RunConfig, resolve
from raycompo.engine.federation import Federation
from raycompo.results import RunWriter

Row = dict[str, Any]


@dataclass
class RunResult:
    status: str
    """'completed' or 'diverged'."""
    rows: list[Row] = field(default_factory=list)

    @property
    def metrics(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)

    @property
    def final(self) -> Row:
        return self.rows[-1] if self.rows else {}


def ensure_ray(address: str | None = None, include_dashboard: bool | None = None, namespace: str | None = None) -> None:
    import ray

    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=include_dashboard, namespace=namespace, log_to_driver=True)


class _DriverHandle:
    """The driver as a Ray actor named `driver`, called round by round from here."""

    def __init__(self, cfg: RunConfig, namespace: str):
        import ray

        from raycompo.engine.ray_pool import RayPool, ray_get

        self._get = ray_get

        def pool_factory(c, n):
            return RayPool(c, n, namespace=namespace)

        actor = ray.remote(Federation).options(name="driver", namespace=namespace, num_cpus=0)
        self.actor = actor.remote(cfg.to_dict(), pool_factory, start=False)
        self._ray = ray
        try:
            self._get(self.actor.start.remote())
        except BaseException:
            self.close()  # the caller never gets a handle to close
            raise

    def initial_row(self) -> Row:
        return self._get(self.actor.initial_row.remote())

    def run_rounds(self, count: int) -> list[Row]:
        return self._get(self.actor.run_rounds.remote(count))

    def artifacts(self) -> dict[str, Any]:
        return self._get(self.actor.artifacts.remote())

    def close(self) -> None:
        try:
            self._ray.get(self.actor.close.remote())
        except self._ray.exceptions.RayError:
            pass  # the driver already died (its error was raised to the caller); kill it anyway
        self._ray.kill(self.actor)


def run(
    cfg: RunConfig,
    out: str | None = None,
    progress: Callable[[Row], None] | None = None,
    overwrite: bool = False,
    driver: str = "actor",
    address: str | None = None,
    include_dashboard: bool | None = None,
    placement_group: Any = None,
    namespace: str | None = None,
) -> RunResult:
    """Run `cfg`. With the Ray backend the driver is an actor (`driver="actor"`) or lives in
    this process (`driver="local"`, as inside a Tune trial). Its actors live in Ray
    namespace `namespace` (default: a fresh `raycompo-<id>`). Raises ConfigError /
    DataUnavailableError on bad input; a diverged run returns status 'diverged'."""
    resolved = resolve(cfg)  # fail fast, before any actor starts
    writer = None
    if out:
        config = {**cfg.to_dict(), "effective_settings": resolved.effective_settings()}
        writer = RunWriter(out, config, overwrite=overwrite)
    fed = None
    status, rows = "failed", []
    try:
        if cfg.backend == "ray":
            from raycompo.engine.ray_pool import RayPool

            # A namespace per run: the actor names driver, clients-0, ... stay unique
            # when several runs (or Tune trials) share a cluster.
            namespace = namespace or f"raycompo-{uuid.uuid4().hex[:8]}"
            ensure_ray(address, include_dashboard)
            if driver == "actor":
                fed = _DriverHandle(cfg, namespace)
            else:
                fed = Federation(cfg, lambda c, n: RayPool(c, n, namespace=namespace, placement_group=placement_group))
        else:
            fed = Federation(cfg)
        rows.append(fed.initial_row())
        _emit(rows[-1], writer, progress)
        status = "completed"
        while len(rows) <= cfg.rounds:
            batch = fed.run_rounds(1)
            for row in batch:
                rows.append(row)
                _emit(row, writer, progress)
            if batch and batch[-1]["diverged"]:
                status = "diverged"
                break
        if writer is not None and status == "completed":
            for name, frame in fed.artifacts().items():
                frame.to_csv(writer.dir / name, index=False)
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        if fed is not None:
            fed.close()
        if writer is not None:
            final = {k: v for k, v in (rows[-1] if rows else {}).items()}
            writer.finish(status, final=final, rounds_done=max(0, len(rows) - 1))
    return RunResult(status, rows)


def _emit(row: Row, writer: RunWriter | None, progress: Callable[[Row], None] | None) -> None:
    row.setdefault("diverged", False)
    if writer is not None:
        writer.append(row)
    if progress is not None:
        progress(row)
