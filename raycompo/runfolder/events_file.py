"""A run folder's `events.csv` (`--log-events`): one row per dispatch, its client, the model
version it downloaded, when it was sent and when it finished or left (simulated seconds),
and its fate (raycompo/system/event_log.py says what each column and fate means).

Columns: `step`, `dispatch`, `client`, `version`, `dispatched_s`, `finished_s` (empty
without --system: there is no clock), `fate` (applied, stale, dropped, lost), `staleness`
(empty unless applied or stale). The file is made (its header) when the run starts; a
server step's rows are appended as it ends, before its metrics.csv row and before any
checkpoint of that step, and flushed. A resumed run (and a recovery from a dead actor)
keeps the rows of the steps up to its checkpoint and writes the later ones again, so no
row is lost or written twice. Read it with `pandas.read_csv` or `read_events(folder)`;
`RunResult.events` is the same frame.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raycompo.errors import ConfigError
from raycompo.runfolder.round_rows import RoundRowsFile, read_round_rows
from raycompo.system.event_log import EVENT_COLUMNS, FATES

FILE = "events.csv"


def _optional(kind: type) -> Any:
    """A cell's parser: '' is None, anything else `kind(cell)`."""
    return lambda v: None if v == "" else kind(v)


def _fate(v: str) -> str:
    if v not in FATES:
        raise ValueError(v)
    return v


_TYPES = (int, int, int, int, _optional(float), _optional(float), _fate, _optional(int))
"""The parser of each of `EVENT_COLUMNS`."""


class EventsFile(RoundRowsFile):
    """`events.csv` of the run folder `folder` (`RoundRowsFile`: its header and the kept `rows`,
    then appended to step by step); None is an empty cell."""

    FILE = FILE
    COLUMNS = EVENT_COLUMNS

    def cells(self, rows: list[dict[str, Any]]) -> list[list[Any]]:
        return [["" if r[c] is None else r[c] for c in EVENT_COLUMNS] for r in rows]

    def read(self, upto: int) -> list[dict[str, Any]]:
        return read_events(self.path.parent, upto)


def read_events(folder: str | Path, upto_step: int | None = None) -> list[dict[str, Any]]:
    """events.csv's rows (of steps <= `upto_step`, all when None) as dicts of
    `EVENT_COLUMNS` (ints; the times floats or None; staleness an int or None); [] without
    a file; a last line cut short (a kill during its write) is dropped. ConfigError when a
    line is damaged, a fate unknown, or steps go backwards (the file is untrusted input)."""
    return read_round_rows(Path(folder) / FILE, EVENT_COLUMNS, _TYPES, upto_step,
                           f"{', '.join(EVENT_COLUMNS)} with a fate among {', '.join(FATES)}")


def check_resume(folder: str | Path, upto_step: int, log_events: bool, state: dict[str, Any] | None = None) -> None:
    """ConfigError when a run that logs its events resumes from its checkpoint of step
    `upto_step` > 0 and its events.csv is missing (the rows of the steps before are lost:
    the checkpoint cannot rebuild them), does not read back, or holds another number of rows
    up to that step than the checkpoint's event log handed out (`state`: its `EventLog.state()`)."""
    path = Path(folder) / FILE
    if log_events and upto_step > 0 and not path.exists():
        raise ConfigError(f"cannot resume {folder}: events.csv is missing, and the run logs its events "
                          f"(--log-events) up to its checkpoint (step {upto_step}). Put it back, or start the run "
                          "again (--overwrite, or another --out): the checkpoint alone cannot rebuild the rows")
    rows = read_events(folder, upto_step)
    counted = (state or {}).get("rows")
    if log_events and counted is not None and len(rows) != int(counted):
        raise ConfigError(f"cannot resume {folder}: events.csv holds {len(rows)} rows up to step {upto_step}, and the "
                          f"checkpoint's event log handed out {counted}: the file was cut short or damaged. Put it "
                          "back, or start the run again (--overwrite, or another --out)")
