"""Run one experiment end to end: resolve, start the driver where the backend says, run
the loop, and tell the observers (output files, progress, Tune, dashboard) what happened."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from raycompo.config import RunConfig, resolve
from raycompo.engine.backends import get_backend
from raycompo.engine.driver import start_driver
from raycompo.engine.loop import run_rounds
from raycompo.engine.observers import Callback, Observer, Observers, Row, RunInfo
from raycompo.engine.ray_start import ensure_ray
from raycompo.results import RunWriter


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
    observers: Sequence[Observer] = (),
) -> RunResult:
    """Run `cfg`. With the Ray backend the driver is an actor (`driver="actor"`) or lives in
    this process (`driver="local"`, as inside a Tune trial). Its actors live in Ray
    namespace `namespace` (default: a fresh `raycompo-<id>`). `progress(row)` and the
    `observers` see every row. Raises ConfigError / DataUnavailableError on bad input; a
    diverged run returns status 'diverged'."""
    resolved = resolve(cfg)  # fail fast, before any actor starts
    backend = get_backend(cfg.backend)
    writer = None
    if out:
        config = {**cfg.to_dict(), "effective_settings": resolved.effective_settings()}
        writer = RunWriter(out, config, overwrite=overwrite)
    watch = Observers([writer, Callback(progress) if progress else None, *observers])
    if backend.uses_ray:
        # A namespace per run: the actor names driver, clients-0, ... stay unique when
        # several runs (or Tune trials) share a cluster.
        namespace = namespace or f"raycompo-{uuid.uuid4().hex[:8]}"
    rows: list[Row] = []
    fed = None
    try:
        if backend.uses_ray:
            ensure_ray(address, include_dashboard)
        fed = start_driver(resolved, backend, driver, namespace, placement_group)
        watch.on_start(RunInfo(cfg.to_dict(), resolved.n_clients, out=out, namespace=namespace))
        status = run_rounds(fed, cfg.rounds, watch, rows)
        if writer is not None and status == "completed":
            writer.write_frames(fed.artifacts())
    except KeyboardInterrupt:
        watch.on_end("interrupted", rows[-1] if rows else {})
        raise
    except BaseException as exc:
        watch.on_failure(exc, rows[-1] if rows else {})
        raise
    finally:
        if fed is not None:
            fed.close()
    watch.on_end(status, rows[-1] if rows else {})
    return RunResult(status, rows)
