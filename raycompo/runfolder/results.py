"""Run outputs: `config.json` (every setting, the seed, the status), `metrics.csv`
(one row per round, appended and flushed as the run goes, so a crash or divergence
keeps the rows already written), `clients.csv` (every evaluated client's metrics,
raycompo/runfolder/clients_file.py), `costs.csv` (the costs by round and payload key, appended
as each round ends, raycompo/runfolder/costs_file.py) and, with `--log-events`, `events.csv`
(one row per dispatch, appended as each server step ends, raycompo/runfolder/events_file.py).

What belongs to a run folder (`RUN_FILES`, the `*.tmp` of atomic writes, the end-of-run
files config.json lists, the lock of raycompo/runfolder/lockfile.py) is known here: `--overwrite`
removes exactly those, and refuses a folder holding anything else."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

from raycompo.costs.budget import Budget
from raycompo.errors import ConfigError
from raycompo.runfolder.atomic import replace_atomically
from raycompo.runfolder.clients_file import ClientsFile
from raycompo.runfolder.costs_file import FILE as COSTS_FILE
from raycompo.runfolder.costs_file import CostsFile
from raycompo.runfolder.events_file import FILE as EVENTS_FILE
from raycompo.runfolder.events_file import EventsFile, read_events
from raycompo.runfolder.failure import ERROR_FILE, root_error
from raycompo.runfolder.failure import write_error as write_traceback
from raycompo.watch.observers import Observer, Row
from raycompo.watch.per_client import ClientMetrics

STATUSES = ("running", "completed", "diverged", "failed", "interrupted")
RUN_FILES = ("config.json", "metrics.csv", "checkpoint.pt", COSTS_FILE, "clients.csv", EVENTS_FILE)
"""The files every run folder may hold (besides its end-of-run files, its lock and temporaries)."""
END_FILES_KEY = "end_of_run_files"
"""config.json's list of the end-of-run files (a task's figure data) a run wrote."""
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def plain(text: str) -> str:
    """`text` without terminal colour codes (Ray colours its error messages)."""
    return _ANSI.sub("", text)


def error_line(exc: BaseException) -> str:
    """The first line of an error's message (the worker's own error where Ray wrapped it),
    without colour codes (its type when empty)."""
    text = plain(str(root_error(exc))).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write `obj` as JSON to `path` atomically: a temp file renamed over it. When the
    write fails (a full disk) the temp file is removed and `path` keeps its old content."""
    text = json.dumps(obj, indent=2, default=str) + "\n"

    def write(tmp: Path) -> None:
        with open(tmp, "w") as f:
            f.write(text)

    replace_atomically(path, write)


VERSION_KEY = "raycompo_version"
"""config.json's version of raycompo that started the run (its rows from round 0)."""
RESUMED_KEY = "resumed"
"""config.json's list of the resumes, each {"round": the checkpoint's round it went on from,
"raycompo_version": the version that wrote the rows after it}, oldest first."""


def version_record(stored: dict[str, Any] | None = None, from_round: int = 0) -> dict[str, Any]:
    """config.json's entries saying which releases of raycompo wrote the run: for a new run
    (`stored` None) `raycompo_version`, this one's; for a resumed run (`stored`: its
    config.json as it was) the version that started it, kept as recorded (none for a run
    started before 0.1.1, which recorded none), and `resumed`, the resumes recorded before
    with this one added (from its checkpoint's round `from_round`). Neither is part of what
    a resume checks against the run (RunConfig and the checkpoint's fingerprint): a run
    started by another version resumes, and its rows say from which round the other
    version wrote them."""
    from raycompo import __version__

    if stored is None:
        return {VERSION_KEY: __version__}
    out: dict[str, Any] = {}
    if isinstance(stored.get(VERSION_KEY), str):
        out[VERSION_KEY] = stored[VERSION_KEY]
    before = stored.get(RESUMED_KEY)
    resumes = [r for r in before if isinstance(r, dict)] if isinstance(before, list) else []
    out[RESUMED_KEY] = [*resumes, {"round": int(from_round), VERSION_KEY: __version__}]
    return out


def version_note(stored: dict[str, Any], from_round: int) -> str | None:
    """A note for a resume (from its checkpoint's round `from_round`) by another release than
    the one that wrote the run's last rows; None when it is the same. Rows may then differ
    from an uninterrupted run's where the releases draw differently (CHANGELOG.md says which
    do)."""
    from raycompo import __version__

    resumes = stored.get(RESUMED_KEY)
    last = resumes[-1] if isinstance(resumes, list) and resumes and isinstance(resumes[-1], dict) else stored
    was = last.get(VERSION_KEY)
    if was == __version__:
        return None
    was = was if isinstance(was, str) else "0.1.0 or earlier"
    return (f"the run was written by raycompo {was}; the rounds after {from_round} are written by {__version__} "
            "(CHANGELOG.md says what changed between them)")


def read_config(folder: str | Path) -> dict[str, Any]:
    """A run folder's config.json (ConfigError when missing or damaged)."""
    path = Path(folder) / "config.json"
    try:
        cfg = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{folder} holds no run (no config.json); give the --out folder of a run") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path} ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ConfigError(f"{path} is damaged ({exc}); the run cannot be resumed") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path} is damaged (a JSON {type(cfg).__name__}, not an object); the run cannot be resumed")
    return cfg


def read_rows(folder: str | Path, upto_round: int) -> list[dict[str, Any]]:
    """metrics.csv's rows with round <= upto_round, values parsed (numbers, booleans).

    A last line without its line end is a row cut short by a kill during its write: it is
    dropped (the round is replayed from the checkpoint). Any other row that does not read
    back is a ConfigError naming the file."""
    path = Path(folder) / "metrics.csv"
    try:
        with open(path, newline="") as f:  # line ends as written ('\r\n'): a cut one shows
            text = f.read()
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is not readable ({type(exc).__name__}: {exc})") from None
    if not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]  # the cut row (or header) goes
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows = []
    for n, r in enumerate(reader, 2):
        if None in r or None in r.values():  # more or fewer fields than the header
            raise ConfigError(f"{path}: line {n} does not have the header's {len(reader.fieldnames or [])} columns; "
                              "the file is damaged")
        rows.append({k: _parse(v) for k, v in r.items()})
    return [r for r in rows if isinstance(r.get("round"), int) and r["round"] <= upto_round]


def complete_rows(folder: str | Path, upto_round: int) -> list[dict[str, Any]]:
    """The rows of rounds 0..upto_round, each exactly once and in order, as a resume from
    a checkpoint of round `upto_round` needs them; else a ConfigError saying which are
    missing (a row is never relabelled, and a round is never written twice)."""
    path = Path(folder) / "metrics.csv"
    rows = read_rows(folder, upto_round)
    have = [r["round"] for r in rows]
    if have == list(range(upto_round + 1)):
        _check_clients(folder, rows, upto_round)
        return rows
    fix = (f"Put the rows back, or start the run again (--overwrite, or another --out): the checkpoint alone "
           f"cannot rebuild the rows before round {upto_round}")
    if not path.exists():
        raise ConfigError(f"cannot resume {folder}: metrics.csv is missing, and its checkpoint is at round "
                          f"{upto_round}. {fix}")
    missing = sorted(set(range(upto_round + 1)) - set(have))
    if missing:
        raise ConfigError(f"cannot resume {folder}: metrics.csv lacks the rows of round(s) {_spans(missing)} "
                          f"(its checkpoint is at round {upto_round}). {fix}")
    raise ConfigError(f"cannot resume {folder}: metrics.csv holds rounds out of order or twice (up to the "
                      f"checkpoint: {', '.join(map(str, have))}; its checkpoint is at round {upto_round}): it was "
                      f"written by more than one run. {fix}")


def _check_clients(folder: str | Path, rows: list[dict[str, Any]], upto_round: int) -> None:
    """ConfigError unless clients.csv holds every evaluated round of `rows` (a row with the
    mean of a clients.csv metric; round 0 always), the last of them whole (as many rows as
    round 0): else a resume would silently lose those rounds' clients."""
    from raycompo.runfolder.clients_file import rounds_held

    held = rounds_held(folder, upto_round)
    counts, metrics = held if held is not None else ({}, set())
    evaluated = [r["round"] for r in rows if r["round"] == 0 or any(r.get(m) is not None for m in metrics)]
    fix = ("Put the file back as it was, or start the run again (--overwrite, or another --out): the checkpoint "
           "cannot rebuild the clients' rows of earlier rounds")
    if held is None:
        raise ConfigError(f"cannot resume {folder}: clients.csv is missing, and metrics.csv's rounds 0-{upto_round} "
                          f"were written with it (the checkpoint is at round {upto_round}). {fix}")
    missing = [r for r in evaluated if r not in counts]
    if missing:
        raise ConfigError(f"cannot resume {folder}: clients.csv lacks the rows of round(s) {_spans(missing)}, which "
                          f"metrics.csv evaluated (its checkpoint is at round {upto_round}). {fix}")
    last = evaluated[-1]
    if counts[last] != counts[0]:
        raise ConfigError(f"cannot resume {folder}: clients.csv holds {counts[last]} rows of round {last}, and "
                          f"{counts[0]} of round 0: it was cut short. {fix}")


def _spans(rounds: list[int]) -> str:
    """'1-20, 25' for [1, 2, ..., 20, 25]."""
    spans: list[list[int]] = []
    for r in rounds:
        if spans and spans[-1][1] == r - 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _parse(v: str | None) -> Any:
    if v is None or v == "":
        return None
    if v in ("True", "False"):
        return v == "True"
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return v


def run_files(folder: str | Path) -> tuple[list[Path], list[str]]:
    """(the files of a raycompo run in `folder`, the names of everything else there)."""
    folder = Path(folder)
    from raycompo.runfolder.lockfile import NAME as LOCK

    ends: list[str] = []
    try:
        recorded = json.loads((folder / "config.json").read_text()).get(END_FILES_KEY)
        if isinstance(recorded, list):
            ends = [n for n in recorded if isinstance(n, str) and "/" not in n and n not in ("", ".", "..")]
    except (OSError, ValueError, AttributeError):
        pass
    ours = {*RUN_FILES, *ends}
    mine, other = [], []
    for entry in sorted(folder.iterdir()):
        name = entry.name
        base = name[: -len(".tmp")] if name.endswith(".tmp") else name
        if name == LOCK or (name in TRACKER_FOLDERS and entry.is_dir()):
            continue
        if base in ours and (entry.is_file() or entry.is_symlink()):
            mine.append(entry)
        else:
            other.append(name + ("/" if entry.is_dir() else ""))
    return mine, other


TRACKER_FOLDERS = ("mlruns", "wandb")
"""What `--tracker mlflow` / `wandb` keep in a run folder (watch/trackers.py): the trackers'
own stores, which a run over the folder (`--overwrite`) leaves in place and adds to."""

OTHER_KINDS = {"sweep.json": "a sweep (python -m raycompo.tune)", "claim.json": "a reproduction's report "
               "(python -m raycompo.reproduce)"}
"""A file that marks a folder as another command's results, and what it holds."""


def other_kind(out: Path) -> str | None:
    """What `out` holds if it is not a run's folder but another command's results or a
    folder of runs (which a run written over it would hide from `plot` and `--resume`)."""
    for marker, kind in OTHER_KINDS.items():
        if (out / marker).exists():
            return kind
    runs = [p.name for p in sorted(out.iterdir()) if p.is_dir() and (p / "config.json").is_file()]
    if runs:
        return f"run folders ({', '.join(runs[:3])}{', ...' if len(runs) > 3 else ''})"
    return None


def prepare_folder(out: str | Path, overwrite: bool) -> None:
    """Before a new run writes `out`: refuse a folder that holds a run (unless
    `overwrite`) or another command's results (a sweep, a report, run folders: always);
    with `overwrite`, remove every file of the old run (metrics, checkpoint, temporaries,
    end-of-run files), after checking that nothing else is there."""
    out = Path(out)
    if not out.is_dir():
        return
    kind = other_kind(out)
    if kind is not None:
        raise ConfigError(f"{out} holds {kind}, not a run; a run writes a folder of its own: choose another --out")
    mine, other = run_files(out)
    if not mine:
        return
    if not overwrite:
        raise ConfigError(f"{out} already holds a run ({', '.join(p.name for p in mine)}); choose another --out, "
                          f"pass --overwrite, or --resume {out}")
    if other:
        shown = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
        raise ConfigError(f"--overwrite {out}: refused, the folder holds files that are not a raycompo run's "
                          f"({shown}); nothing was removed. Move them away, or choose another --out")
    for p in mine:
        try:
            p.unlink()
        except OSError as exc:
            raise ConfigError(f"--overwrite {out}: cannot remove {p.name} ({exc.strerror or exc})") from None


def resumed_config(folder: str | Path, rounds: int | None = None, changes: dict[str, Any] | None = None):
    """The RunConfig that continues the run in `folder` (`--resume`, `raycompo.resume`).

    `rounds` may change the total (checked against the checkpoint when the run starts);
    `changes` are other RunConfig fields given again. Those that define the run's results
    (`DEFINING`) must equal the recorded ones, else a ConfigError says to start a new run;
    the others (backend, placement, timeouts, data folder) apply to the rest of the run."""
    import dataclasses

    from raycompo.configuration.config import RunConfig, resolve

    stored = read_config(folder)
    cfg = RunConfig.from_record(stored)
    new = dataclasses.replace(cfg, **{k: v for k, v in (changes or {}).items() if k not in DEFINING})
    defining = {k: v for k, v in (changes or {}).items() if k in DEFINING}
    differ = []
    for key, value in defining.items():
        if key == "settings":
            r_was = resolve(cfg, check_clients=False)
            r_now = resolve(dataclasses.replace(cfg, settings={**cfg.settings, **value}), check_clients=False)
            was, now = r_was.effective_settings(), r_now.effective_settings()
            differ += [f"--set {k}={now[k]} (the run has {k}={was[k]})" for k in sorted(now) if now[k] != was[k]]
            if r_was.aggregation is not None:  # the asynchronous aggregation's settings (issue 31)
                a_was, a_now = r_was.aggregation.record(), r_now.aggregation.record()
                differ += [f"--set {k}={a_now[k]} (the run has {k}={a_was[k]})" for k in sorted(a_now)
                           if a_now[k] != a_was[k]]
        elif key in ("task", "algo"):
            from raycompo.configuration.plugins import canonical

            if canonical("task" if key == "task" else "algorithm", value) != getattr(cfg, key):
                differ.append(f"--{key} {value} (the run's is {getattr(cfg, key)})")
        elif key == "uplink":  # the steps' specs as recorded (a file by its absolute path)
            from raycompo.configuration.plugins import canonical

            if [canonical("uplink", v) for v in value] != cfg.uplink:
                differ.append(f"--uplink {value} (the run's is {cfg.uplink})")
        elif key == "system":
            from raycompo.system import canonical_system

            if canonical_system(value) != cfg.system:
                differ.append(f"--system {value} (the run's is {cfg.system})")
        elif key == "threads" and cfg.threads is None:
            new.threads = value  # a run from before threads were recorded: the number given now
        elif value != getattr(cfg, key):
            differ.append(f"--{key.replace('_', '-')} {value} (the run has {getattr(cfg, key)})")
    if differ:
        raise ConfigError(f"--resume {folder} continues the run as it was started; it cannot change "
                          f"{'; '.join(differ)}. To run with these, start a new run in another folder (--out)")
    if rounds is not None:
        new.rounds = rounds
    done = stored.get("rounds_done", 0)
    if stored.get("status") == "completed" and isinstance(done, int) and new.rounds < done:
        raise ConfigError(f"{folder} is already completed ({done} rounds), and a run cannot be cut to "
                          f"{new.rounds} rounds; pass --rounds N (rounds=N) with N > {done} to run more, or start "
                          "a new run in another folder (--out)")
    return new


def finished(folder: str | Path, rounds: int, budget: dict[str, float] | None = None) -> dict[str, Any] | None:
    """config.json of the run in `folder` when a resume has nothing left to do (as Ray
    Tune's restore of a finished experiment): it is completed with exactly `rounds` rounds
    done, or its last row already reaches `budget` (default: the run's own; a run its
    budget stopped is not run a round past it). None otherwise."""
    stored = read_config(folder)
    if stored.get("status") != "completed":
        return None
    return stored if stored.get("rounds_done") == rounds or budget_reached(stored, budget) else None


def budget_reached(stored: dict[str, Any], budget: dict[str, float] | None = None) -> str | None:
    """'budget exchanges=2 reached (exchanges 2)' when the last row recorded in config.json
    `stored` reaches `budget` (default: the run's own `budget`), else None."""
    limits = stored.get("budget") if budget is None else budget
    final = stored.get("final")
    return Budget(limits).reached(final) if limits and isinstance(final, dict) else None


DEFINING = ("task", "algo", "seed", "settings", "eval_every", "eval_clients", "system", "threads", "aggregation",
            "concurrency", "buffer", "compress", "compress_down", "dp_clip", "dp_noise", "dp_delta", "log_events",
            "uplink", "sampler")
"""RunConfig fields a resumed run cannot change: its checkpoint and rows were computed with them
(`threads`: float sums are split over threads, rows differ past 1e-7 with another number;
`log_events`: events.csv holds every step's rows or none)."""


class RunWriter(Observer):
    """The output folder as an observer: config.json written at once ('running'), a
    metrics.csv row per round (and costs.csv's rows of the round; with `log_events`,
    events.csv's rows of the step, kept up to the checkpoint on resume), the final status and
    row at the end. `resume_rows`: the rows kept from an earlier attempt (metrics.csv is
    replaced by a file of them, then appended to); `resume_costs` likewise costs.csv's
    (`costs_file.resume_rows`). A new run (`resume_rows` None) first checks the folder
    (`prepare_folder`: a run there is refused, or removed with `overwrite`)."""

    def __init__(self, out: str | Path, config: dict[str, Any], overwrite: bool = False,
                 resume_rows: list[dict[str, Any]] | None = None, resume_costs: list[dict[str, Any]] | None = None):
        self.dir = Path(out)
        self.metrics_path = self.dir / "metrics.csv"
        self.config_path = self.dir / "config.json"
        self._file: Any = None
        self._writer: csv.DictWriter | None = None
        self.unwritten: OSError | None = None
        """The error that kept the final status out of config.json (e.g. a full disk)."""
        try:
            if self.dir.exists() and not self.dir.is_dir():
                raise ConfigError(f"--out {self.dir} is a file, not a folder; choose another --out")
            if resume_rows is None:
                prepare_folder(self.dir, overwrite)
            self.dir.mkdir(parents=True, exist_ok=True)
            self.config = {**config, "status": "running"}
            write_json_atomic(self.config_path, self.config)
            self._rewrite(resume_rows or [])
            # clients.csv: a resumed run keeps the rows of the rounds metrics.csv keeps
            upto = None if resume_rows is None else max((int(r["round"]) for r in resume_rows), default=-1)
            self.clients = ClientsFile(self.dir, upto)
            self.costs = CostsFile(self.dir, resume_costs)
            self.events = _events_file(self.dir, bool(config.get("log_events")), upto)
        except OSError as exc:
            raise ConfigError(f"cannot write to --out {self.dir}: {exc.strerror or exc}") from None

    def record(self, **extra: Any) -> None:
        """Add entries to config.json now (e.g. the placement of the hosts)."""
        self.config.update(extra)
        write_json_atomic(self.config_path, self.config)

    def truncate(self, upto_round: int) -> None:
        """Drop the rows after `upto_round` (a replay from a checkpoint writes them again)."""
        self._close()
        self._rewrite(read_rows(self.dir, upto_round))
        self.clients.truncate(upto_round)
        self.costs.truncate(upto_round)
        if self.events is not None:
            self.events.truncate(upto_round)

    def _rewrite(self, rows: list[dict[str, Any]]) -> None:
        """metrics.csv := `rows`, atomically (a kill meanwhile leaves the old file whole),
        then open for appending."""
        def write(tmp: Path) -> None:
            with open(tmp, "w", newline="") as f:
                if rows:
                    w = csv.DictWriter(f, fieldnames=list(rows[0]), extrasaction="ignore", restval="")
                    w.writeheader()
                    w.writerows(rows)

        replace_atomically(self.metrics_path, write)
        self._file = open(self.metrics_path, "a", newline="")
        self._writer = None
        if rows:
            self._writer = csv.DictWriter(self._file, fieldnames=list(rows[0]), extrasaction="ignore", restval="")

    def append(self, row: dict[str, Any]) -> None:
        if self._writer is None:
            self._writer = csv.DictWriter(self._file, fieldnames=list(row), extrasaction="ignore", restval="")
            self._writer.writeheader()
        self._writer.writerow(row)
        self._file.flush()

    def write_frames(self, frames: dict[str, Any]) -> None:
        """End-of-run files (pandas DataFrames) by file name, e.g. a task's figure data.
        Their names go to config.json first (so `--overwrite` knows them as the run's),
        then each file is written atomically."""
        if not frames:
            return
        self.record(**{END_FILES_KEY: sorted({*self.config.get(END_FILES_KEY, []), *frames})})
        for name, frame in frames.items():
            replace_atomically(self.dir / name, lambda tmp, frame=frame: frame.to_csv(tmp, index=False))

    def _close(self) -> None:
        if hasattr(self, "clients"):
            self.clients.close()
        if hasattr(self, "costs"):
            self.costs.close()
        if getattr(self, "events", None) is not None:
            self.events.close()
        if self._file is not None and not self._file.closed:
            try:
                self._file.close()
            except OSError:
                pass  # a full disk: the last row may be cut short (read_rows drops it)

    def finish(self, status: str, **extra: Any) -> None:
        self._close()
        if status != "failed":  # an earlier attempt's failure, which a resume went past
            self.config.pop("error", None)
            (self.dir / ERROR_FILE).unlink(missing_ok=True)
        self.config.update(status=status, **extra)
        write_json_atomic(self.config_path, self.config)

    # --- Observer ---------------------------------------------------------------------
    def on_row(self, row: Row) -> None:
        self.append(row)
        self.final = row

    def on_clients(self, clients: ClientMetrics) -> None:
        self.clients.append(clients)

    def on_costs(self, rows: list[Row]) -> None:
        self.costs.append(rows)

    def on_events(self, rows: list[Row]) -> None:
        if self.events is None:  # events without log_events (a driver of another configuration): kept all the same
            self.events = EventsFile(self.dir)
        self.events.append(rows)

    def on_end(self, status: str, final: Row) -> None:
        try:
            self.finish(status, final=final, rounds_done=int(final.get("round", 0)))
        except OSError as write_error:
            if status != "interrupted":
                raise  # the run fails (on_failure tries once more)
            self.unwritten = write_error  # the interruption stays what is reported

    def on_failure(self, exc: BaseException, final: Row) -> None:
        """Mark the run failed, where config.json can still be written; when it cannot
        (a full disk) it keeps its last content, whole, and `unwritten` says why."""
        try:
            self.finish("failed", final=final, rounds_done=int(final.get("round", 0)), error=error_line(exc))
        except OSError as write_error:
            self.unwritten = write_error
        write_traceback(self.dir, exc)  # the whole traceback beside it (runfolder/failure.py)


def _events_file(folder: Path, log_events: bool, upto: int | None) -> EventsFile | None:
    """The run's events.csv: made for a new run that logs its events (`upto` None); a
    resumed run's (from its checkpoint of step `upto`) keeps its rows up to it, also when
    the run no longer logs them. None: the run has none."""
    if upto is None:
        return EventsFile(folder) if log_events else None
    if log_events or (folder / EVENTS_FILE).exists():
        return EventsFile(folder, read_events(folder, upto))
    return None


SEED_FOLDER = "seed-"
"""A population of seeds (`raycompo.run(..., seeds=...)`) writes each seed's run to
`out`/seed-<s>."""


def population_folders(out: str | Path) -> dict[int, Path]:
    """{seed: its run folder} of the population of seeds in `out` (its subfolders seed-<s>
    that hold a run's config.json), in seed order; {} when `out` holds none (or is itself a
    run's folder)."""
    out = Path(out)
    if not out.is_dir() or (out / "config.json").exists():
        return {}
    found = {}
    for sub in out.iterdir():
        seed = sub.name.removeprefix(SEED_FOLDER)
        if sub.name.startswith(SEED_FOLDER) and seed.isdigit() and (sub / "config.json").is_file():
            found[int(seed)] = sub
    return dict(sorted(found.items()))
