"""Run outputs: `config.json` (every setting, the seed, the status) and `metrics.csv`
(one row per round, appended and flushed as the run goes, so a crash or divergence
keeps the rows already written)."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

from raycompo.errors import ConfigError

STATUSES = ("running", "completed", "diverged", "failed", "interrupted")


def write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=str) + "\n")
    os.replace(tmp, path)


class RunWriter:
    def __init__(self, out: str | Path, config: dict[str, Any], overwrite: bool = False):
        self.dir = Path(out)
        self.metrics_path = self.dir / "metrics.csv"
        self.config_path = self.dir / "config.json"
        if self.metrics_path.exists() and not overwrite:
            raise ConfigError(f"{self.dir} already holds a run (metrics.csv); choose another --out or pass --overwrite")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = {**config, "status": "running"}
        write_json_atomic(self.config_path, self.config)
        self._file = open(self.metrics_path, "w", newline="")
        self._writer: csv.DictWriter | None = None

    def append(self, row: dict[str, Any]) -> None:
        if self._writer is None:
            self._writer = csv.DictWriter(self._file, fieldnames=list(row), extrasaction="ignore", restval="")
            self._writer.writeheader()
        self._writer.writerow(row)
        self._file.flush()

    def finish(self, status: str, **extra: Any) -> None:
        self._file.close()
        self.config.update(status=status, **extra)
        write_json_atomic(self.config_path, self.config)
