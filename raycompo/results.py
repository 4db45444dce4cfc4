"""Run outputs: `config.json` (every setting, the seed, the status) and `metrics.csv`
(one row per round, appended and flushed as the run goes, so a crash or divergence
keeps the rows already written)."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

from raycompo.engine.observers import Observer, Row
from raycompo.errors import ConfigError

STATUSES = ("running", "completed", "diverged", "failed", "interrupted")


def write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def read_config(folder: str | Path) -> dict[str, Any]:
    """A run folder's config.json (ConfigError when missing or damaged)."""
    path = Path(folder) / "config.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{folder} holds no run (no config.json); give the --out folder of a run") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is damaged ({exc}); the run cannot be resumed") from None


def read_rows(folder: str | Path, upto_round: int) -> list[dict[str, Any]]:
    """metrics.csv's rows with round <= upto_round, values parsed (numbers, booleans)."""
    path = Path(folder) / "metrics.csv"
    if not path.exists():
        return []
    with open(path, newline="") as f:
        rows = [{k: _parse(v) for k, v in r.items()} for r in csv.DictReader(f)]
    return [r for r in rows if isinstance(r.get("round"), int) and r["round"] <= upto_round]


def _parse(v: str) -> Any:
    if v in ("True", "False"):
        return v == "True"
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return None if v == "" else v


class RunWriter(Observer):
    """The output folder as an observer: config.json written at once ('running'), a
    metrics.csv row per round, the final status and row at the end. `resume_rows`: the
    rows kept from an earlier attempt (metrics.csv is rewritten with them, then appended)."""

    def __init__(self, out: str | Path, config: dict[str, Any], overwrite: bool = False,
                 resume_rows: list[dict[str, Any]] | None = None):
        self.dir = Path(out)
        self.metrics_path = self.dir / "metrics.csv"
        self.config_path = self.dir / "config.json"
        if self.dir.exists() and not self.dir.is_dir():
            raise ConfigError(f"--out {self.dir} is a file, not a folder; choose another --out")
        if self.metrics_path.exists() and not overwrite and resume_rows is None:
            raise ConfigError(f"{self.dir} already holds a run (metrics.csv); choose another --out, pass --overwrite, or --resume {self.dir}")
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            self.config = {**config, "status": "running"}
            write_json_atomic(self.config_path, self.config)
            self._file = open(self.metrics_path, "w", newline="")
        except OSError as exc:
            raise ConfigError(f"cannot write to --out {self.dir}: {exc.strerror or exc}") from None
        self._writer: csv.DictWriter | None = None
        for row in resume_rows or []:
            self.append(row)

    def record(self, **extra: Any) -> None:
        """Add entries to config.json now (e.g. the placement of the hosts)."""
        self.config.update(extra)
        write_json_atomic(self.config_path, self.config)

    def truncate(self, upto_round: int) -> None:
        """Drop the rows after `upto_round` (a replay from a checkpoint writes them again)."""
        self._file.close()
        rows = read_rows(self.dir, upto_round)
        self._file = open(self.metrics_path, "w", newline="")
        self._writer = None
        for row in rows:
            self.append(row)

    def append(self, row: dict[str, Any]) -> None:
        if self._writer is None:
            self._writer = csv.DictWriter(self._file, fieldnames=list(row), extrasaction="ignore", restval="")
            self._writer.writeheader()
        self._writer.writerow(row)
        self._file.flush()

    def write_frames(self, frames: dict[str, Any]) -> None:
        """End-of-run files (pandas DataFrames) by file name, e.g. a task's figure data."""
        for name, frame in frames.items():
            frame.to_csv(self.dir / name, index=False)

    def finish(self, status: str, **extra: Any) -> None:
        if not self._file.closed:
            self._file.close()
        self.config.update(status=status, **extra)
        write_json_atomic(self.config_path, self.config)

    # --- Observer ---------------------------------------------------------------------
    def on_row(self, row: Row) -> None:
        self.append(row)
        self.final = row

    def on_end(self, status: str, final: Row) -> None:
        self.finish(status, final=final, rounds_done=int(final.get("round", 0)))

    def on_failure(self, exc: BaseException, final: Row) -> None:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        self.finish("failed", final=final, rounds_done=int(final.get("round", 0)), error=message)
