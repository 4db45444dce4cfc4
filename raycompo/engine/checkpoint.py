"""Checkpoints: a run's complete state at a round boundary, written atomically.

A checkpoint holds the round, the global model, the server state, every client's
persistent state gathered from the hosts (momentum, u, per-task u, personal models,
FedDRO's x / y...), the driver's elapsed time, the simulated system's clock and counters
(with --system) and the run's config. Because every random
draw is keyed by (seed, client, round, step), replaying from it reproduces the same
rows: that is what `--resume` and the recovery from a dead actor rely on.

Format: `torch.save` of tensors, numbers, strings and dicts only, read back with
`torch.load(..., weights_only=True)`: never a pickle of code.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch

from raycompo.errors import ConfigError
from raycompo.runfolder.atomic import replace_atomically
from raycompo.tasks.sampler import RECORDED_BEFORE, sampler_of
from raycompo.watch.observers import Observer, Row

FILE = "checkpoint.pt"
FORMAT = 1
DEFAULT_EVERY = 10
"""Rounds between two checkpoints unless --checkpoint-every says otherwise."""


def save(path: str | Path, ckpt: dict[str, Any]) -> None:
    """Write `ckpt` to `path` atomically (a temp file in the same folder, then rename)."""
    # e.g. a full disk: no temp file stays, the last checkpoint stays whole
    replace_atomically(path, lambda tmp: torch.save({**ckpt, "format": FORMAT}, tmp))


def load(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"no checkpoint at {path}: the run stopped before its first checkpoint; start it again")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated or foreign file
        raise ConfigError(f"checkpoint {path} is unreadable ({type(exc).__name__}); start the run again") from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise ConfigError(f"{path} is not a raycompo checkpoint of format {FORMAT}")
    return ckpt


def fingerprint(resolved: Any) -> dict[str, Any]:
    """What makes a checkpoint this run's: the task and algorithm (their specs), every
    effective setting, the seed, the number of clients and a sampler other than the
    default (the model's shape is added when a checkpoint is taken). Plain JSON values, so
    that two fingerprints compare equal exactly when they hold the same values."""
    cfg = resolved.config
    fp = {"task": cfg.task, "algo": cfg.algo, "seed": cfg.seed, "settings": resolved.effective_settings(),
          "n_clients": resolved.n_clients}
    if getattr(resolved, "system_profile", None) is not None:  # (absent without --system: older checkpoints fit)
        fp["system"] = resolved.system_profile.record()
    if getattr(resolved, "aggregation", None) is not None:  # (absent for 'sync': older checkpoints fit)
        fp["aggregation"] = resolved.aggregation.record()
    if sampler_of(cfg) != RECORDED_BEFORE:  # (absent for randperm: older checkpoints fit)
        fp["sampler"] = cfg.sampler
    return json.loads(json.dumps(fp, sort_keys=True, default=str))


def check_belongs(ckpt: dict[str, Any], fp: dict[str, Any], path: str | Path) -> None:
    """ConfigError unless checkpoint `ckpt` was taken by a run with fingerprint `fp`.
    A checkpoint written before fingerprints existed is checked by the config it holds."""
    if "fingerprint" in ckpt:
        try:
            was = json.loads(ckpt["fingerprint"])
        except (TypeError, ValueError):
            raise ConfigError(f"checkpoint {path} is damaged (its fingerprint does not read back); start the run again") from None
    else:
        c = ckpt.get("config") if isinstance(ckpt.get("config"), dict) else {}
        was = {"task": c.get("task"), "algo": c.get("algo"), "seed": c.get("seed")}
        fp = {k: fp[k] for k in was}
    differ = []
    system: list[str] = []
    for key in fp:
        if key == "sampler":
            continue  # below: absent means 'randperm' (RECORDED_BEFORE), on either side
        if key == "system" and isinstance(was.get(key), dict) and isinstance(fp[key], dict):
            from raycompo.system.profile import changes

            system = changes(was[key], fp[key])  # field by field, briefly (not two whole records)
        elif key == "settings" and isinstance(was.get(key), dict):
            now, before = fp[key], was[key]
            differ += [f"{k}={before.get(k, '(none)')} there, {now.get(k, '(none)')} here"
                       for k in sorted({*now, *before}) if now.get(k) != before.get(k)]
        elif was.get(key) != fp[key]:
            differ.append(f"{key} {str(was.get(key))[:60]} there, {str(fp[key])[:60]} here")
    if "sampler" in fp or "sampler" in was:
        was_s, now_s = sampler_of(was), sampler_of(fp)
        if was_s != now_s:
            differ.append(f"sampler {was_s} there, {now_s} here")
    if system and not differ:
        shown = "; ".join(system[:4]) + (f"; and {len(system) - 4} more" if len(system) > 4 else "")
        raise ConfigError(f"cannot resume from checkpoint {path}: the run's system profile changed since it started "
                          f"({shown}); it was not restored. Put the profile and its files back as they were, or "
                          "start a new run (--overwrite, or another --out)")
    differ += [f"system: {c}" for c in system]
    if differ:
        shown = "; ".join(differ[:6]) + (f"; and {len(differ) - 6} more" if len(differ) > 6 else "")
        raise ConfigError(f"checkpoint {path} belongs to another run than its folder's config.json ({shown}); "
                          "it was not restored. Start the run again (--overwrite, or another --out)")


def resume_point(folder: str | Path, fp: dict[str, Any], rounds: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the checkpoint, the rows 0..its round) a run resumed in `folder` continues from,
    for a run of fingerprint `fp` to round `rounds`; a ConfigError says what does not fit."""
    from raycompo.runfolder.results import complete_rows

    path = Path(folder) / FILE
    ckpt = load(path)
    check_belongs(ckpt, fp, path)
    at = int(ckpt["round"])
    if rounds < at:
        raise ConfigError(f"cannot resume {folder} to round {rounds}: its checkpoint is at round {at}, and a run "
                          f"only goes forward. Give --rounds {at} or more, or start a new run in another folder (--out)")
    return ckpt, complete_rows(folder, at)


class Checkpointer(Observer):
    """Takes a checkpoint of the driver every `every` rounds (after the row is written).
    With a folder it goes to disk only and `latest()` reads it back (the client states of
    a large population never stay in this process); without one it is kept in memory."""

    def __init__(self, every: int, folder: str | Path | None = None, fingerprint: dict[str, Any] | None = None):
        self.every = every
        self.fingerprint = fingerprint
        """The run's `fingerprint`, stored in every checkpoint (with the model's shape)."""
        self.path = Path(folder) / FILE if folder else None
        self.fed: Any = None
        self.round: int | None = None
        """Round of the latest checkpoint (None before the first)."""
        self._kept: dict[str, Any] | None = None  # the latest checkpoint itself, only without a folder
        self.seconds: list[float] = []
        """Time taken by each checkpoint (gathering the states and writing)."""

    def attach(self, fed: Any) -> None:
        self.fed = fed

    def resumed_from(self, ckpt: dict[str, Any]) -> None:
        """The run continues from `ckpt` (already on disk, or kept when there is no folder)."""
        self.round = int(ckpt["round"])
        self._kept = None if self.path is not None else ckpt

    def latest(self) -> dict[str, Any] | None:
        """The latest checkpoint: read back from disk with a folder, else the one kept."""
        if self.round is None:
            return None
        return load(self.path) if self.path is not None else self._kept

    def take(self) -> None:
        t0 = time.perf_counter()
        ckpt = self.fed.checkpoint()
        if self.fingerprint is not None:
            ckpt["fingerprint"] = json.dumps({**self.fingerprint, "model_shape": list(ckpt["w"].shape)}, sort_keys=True)
        if self.path is not None:
            save(self.path, ckpt)
        else:
            self._kept = ckpt
        self.round = int(ckpt["round"])
        self.seconds.append(time.perf_counter() - t0)

    def on_row(self, row: Row) -> None:
        if self.fed is not None and not row.get("diverged") and row["round"] % self.every == 0:
            self.take()

    def on_end(self, status: str, final: Row) -> None:
        if status == "completed" and self.fed is not None and final and self.round != final.get("round"):
            try:
                self.take()  # the final state, e.g. to continue with more rounds
            except Exception:
                pass
