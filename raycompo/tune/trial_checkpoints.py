"""Checkpoints of a sweep's trials (`--checkpoint-every N`): a killed sweep's `--resume`
continues each trial that was running from its last checkpoint, not from round 0.

Each trial (a trial alone, or each member of a population) runs as a run with a folder of
its own, `<sweep>/checkpoints/<key>`, where `key` hashes the trial's whole RunConfig, so
that a resumed sweep finds the folder of the same trial and no other. The engine writes a
checkpoint there every N rounds (raycompo/engine/checkpoint.py) and, on resume, checks
that it is this run's (task, algorithm, settings, seed, clients, model shape) before using
it: the folder is input from disk like any other. A trial whose run ends (completed,
diverged, stopped) removes its folder, and a sweep that ends with nothing left removes them
all (`forget_all`): the checkpoints of a failed trial stay for the next resume.

A resumed trial (`RunInfo.resumed`, from a checkpoint of round 0 too) first hands Tune the
rows it had recorded up to its checkpoint (read back from its folder's metrics.csv), then
the rows it computes: Tune and the sweep's results see its whole history once, and every
row carries `resumed_at` (the checkpoint's round). Member ASHA's rungs hear only the rounds
after the checkpoint (`Replay`'s `direct`); its count of reports goes on from there
(tune/member_asha.py: `MemberStop.on_start`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raycompo.engine.checkpoint import FILE
from raycompo.runfolder.results import read_rows
from raycompo.watch.observers import Observer, RunInfo

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


def run_kept(checkpoints: TrialCheckpoints | None, run: Callable[..., Any], cfg: Any, **options: Any) -> Any:
    """`run(cfg, **options)`, in the trial's folder with its checkpoints where the sweep keeps
    them (resumed from there when one is), the folder removed once the run has ended."""
    if checkpoints is None:
        return run(cfg, **options)
    result = run(cfg, **options, **checkpoints.run_options(cfg))
    checkpoints.finished(cfg)
    return result


def pending(ck: TrialCheckpoints | None, candidates: dict[str, list[dict[str, Any]]],
            config_of: Callable[[str, dict[str, Any]], Any]) -> dict[str, list[dict[str, Any]]]:
    """Per algorithm, the `candidates` (points not yet recorded) whose trial holds a
    checkpoint in the sweep: the trials a killed sweep was running, which a resumed Optuna
    sweep hands out first so that they continue (`config_of(algo, point)`: the trial's
    RunConfig). A folder is matched by its name, the hash of a candidate's whole
    configuration: nothing is read from it here."""
    root = Path(ck.root) if ck is not None else None
    if root is None or not root.is_dir():
        return {}
    held = {f.name for f in root.iterdir() if (f / FILE).is_file()}
    out: dict[str, list[dict[str, Any]]] = {}
    for algo, points in candidates.items():
        found = [p for p in points if held and ck.folder(config_of(algo, p)).name in held]  # type: ignore[union-attr]
        if found:
            out[algo] = found
    return out


def forget_all(sweep_dir: str | Path) -> None:
    """The sweep ended with nothing left to run: every checkpoint folder goes (e.g. of an
    Optuna trial that was running when the sweep was killed and that its search did not
    ask for again)."""
    shutil.rmtree(Path(sweep_dir) / FOLDER, ignore_errors=True)


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
        if not info.resumed or not info.out:  # (a checkpoint of round 0 too: row 0 is not computed again)
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
