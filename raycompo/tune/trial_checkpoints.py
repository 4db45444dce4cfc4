"""Checkpoints of a sweep's trials (`--checkpoint-every N`): a killed sweep's `--resume`
continues each trial that was running from its last checkpoint, not from round 0.

Each trial (a trial alone, or each member of a population) runs as a run with a folder of
its own, `<sweep>/checkpoints/<key>`, where `key` hashes the trial's whole RunConfig, so
that a resumed sweep finds the folder of the same trial and no other. The engine writes a
checkpoint there every N rounds (raycompo/engine/checkpoint.py) and, on resume, checks
that it is this run's (task, algorithm, settings, seed, clients, model shape) before using
it: the folder is input from disk like any other. A trial that ends (completed or
diverged) removes its folder, so the sweep's disk holds the checkpoints of the running
trials only.

A resumed trial first hands Tune the rows it had recorded up to its checkpoint (read back
from its folder's metrics.csv), then the rows it computes: Tune, the sweep's results and
ASHA see its whole history, and every row carries `resumed_at` (the checkpoint's round).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raycompo.engine.checkpoint import FILE
from raycompo.runfolder.results import read_rows
from raycompo.watch.observers import Observer, Row, RunInfo

FOLDER = "checkpoints"
"""The sweep folder's sub-folder of its running trials' run folders."""
RESUMED_AT = "resumed_at"
"""The column of a resumed trial's rows (and trials.csv): the round of its checkpoint."""


@dataclass(frozen=True)
class TrialCheckpoints:
    """Where a sweep's trials keep their checkpoints, and how often they write one."""

    root: str
    """The sweep's `checkpoints` folder."""
    every: int
    """Rounds between two checkpoints (>= 1)."""

    def folder(self, cfg: Any) -> Path:
        """The run folder of the trial whose RunConfig is `cfg` (the same for the same trial
        in every session of the sweep, another for any other trial)."""
        text = json.dumps(cfg.to_dict(), sort_keys=True, default=str)
        return Path(self.root) / hashlib.sha1(text.encode()).hexdigest()[:20]

    def run_options(self, cfg: Any) -> dict[str, Any]:
        """`engine.run`'s keyword arguments for this trial: its folder, the checkpoint
        interval, and `resume` where a checkpoint is there (else a fresh start in the
        folder, removing what a trial killed before its first checkpoint left)."""
        out = self.folder(cfg)
        resume = (out / FILE).is_file()
        return {"out": str(out), "checkpoint_every": self.every, "resume": resume, "overwrite": not resume}

    def finished(self, cfg: Any) -> None:
        """The trial ended (completed or diverged): its folder goes."""
        shutil.rmtree(self.folder(cfg), ignore_errors=True)


def checkpoints_of(sweep_dir: str | Path, every: int | None) -> TrialCheckpoints | None:
    """The sweep's `TrialCheckpoints` (None without --checkpoint-every)."""
    return TrialCheckpoints(str((Path(sweep_dir) / FOLDER).resolve()), int(every)) if every else None


class Replay(Observer):
    """Placed before `reporter` (a TuneReporter): when the run resumes, hands it the rows up
    to the checkpoint from the run's metrics.csv, and marks every row it reports with
    `resumed_at`. `direct`: where the replayed rows' reports go instead of the reporter's
    own `report` (a population member's: straight to Tune, past member ASHA, whose rungs
    hear the rounds computed from here)."""

    def __init__(self, reporter: Any, direct: Any = None):
        self.reporter, self.direct = reporter, direct

    def on_start(self, info: RunInfo) -> None:
        if info.start_round <= 0 or not info.out:
            return
        self.reporter.extra[RESUMED_AT] = int(info.start_round)
        own = self.reporter.report
        if self.direct is not None:
            self.reporter.report = self.direct
        try:
            for row in read_rows(info.out, info.start_round):
                self.reporter.on_row(row)
        finally:
            self.reporter.report = own

    def on_row(self, row: Row) -> None:
        pass
