"""A run folder's `costs.csv`: the ledger's per-key costs by round (engine/ledger.py), one
row per (round, direction, key).

Columns: `round`, `direction` ('down' / 'up'), `key` (the payload's or contribution's
top-level key), `values`, `bytes`. The file is made (its header) when the run starts; a
round's rows are appended as it ends, before its metrics.csv row and before any checkpoint
of that round, and flushed. The ledger's checkpointed state keeps only how many rows were
written (not the rows, so that a checkpoint does not grow with the rounds): a resumed run
(and a recovery from a dead actor) keeps the file's rows of the rounds up to its
checkpoint, which must be exactly that many (a file cut short or damaged is refused, like
a damaged metrics.csv), then writes the later ones again, so no row is lost or written
twice. Read it with `pandas.read_csv` or `read_costs(folder)`; `RunResult.costs` is the
same frame.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from raycompo.costs.exchange import BREAKDOWN_COLUMNS
from raycompo.errors import ConfigError
from raycompo.runfolder.atomic import replace_atomically

FILE = "costs.csv"

_TYPES = (int, str, str, int, int)
"""The type of each of `BREAKDOWN_COLUMNS` (a key stays a string, even '1')."""


class CostsFile:
    """`costs.csv` of the run folder `folder`: replaced by its header and `rows` (what a
    resumed run keeps; none for a new run), atomically, then appended to round by round."""

    def __init__(self, folder: str | Path, rows: list[dict[str, Any]] | None = None):
        self.path = Path(folder) / FILE
        self._file: Any = None
        self._rewrite(rows or [])

    def _rewrite(self, rows: list[dict[str, Any]]) -> None:
        self.close()

        def write(tmp: Path) -> None:
            with open(tmp, "w", newline="") as out:
                writer = csv.writer(out, lineterminator="\n")
                writer.writerow(BREAKDOWN_COLUMNS)
                writer.writerows([r[c] for c in BREAKDOWN_COLUMNS] for r in rows)

        replace_atomically(self.path, write)

    def append(self, rows: list[dict[str, Any]]) -> None:
        """One round's rows (`Observer.on_costs`), written and flushed."""
        if not rows:
            return
        if self._file is None or self._file.closed:
            self._file = open(self.path, "a", newline="")
        csv.writer(self._file, lineterminator="\n").writerows([r[c] for c in BREAKDOWN_COLUMNS] for r in rows)
        self._file.flush()

    def truncate(self, upto_round: int) -> None:
        """Drop the rows of rounds after `upto_round` (a replay from a checkpoint writes them again)."""
        self.close()
        self._rewrite(read_costs(self.path.parent, upto_round))

    def close(self) -> None:
        if self._file is not None and not self._file.closed:
            try:
                self._file.close()
            except OSError:
                pass  # a full disk: the last line may be cut short (it is dropped when read back)


def read_costs(folder: str | Path, upto_round: int | None = None) -> list[dict[str, Any]]:
    """costs.csv's rows (of rounds <= `upto_round`, all when None) as dicts of
    `BREAKDOWN_COLUMNS`; [] without a file; a last line cut short (a kill during its
    write) is dropped. ConfigError when a line is damaged or rounds go backwards."""
    path = Path(folder) / FILE
    try:
        with open(path, newline="") as f:
            text = f.read()
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is not readable ({type(exc).__name__}: {exc})") from None
    text = text[: text.rfind("\n") + 1]  # the cut line (or header) goes
    if not text:
        return []
    lines = csv.reader(io.StringIO(text, newline=""))
    header = next(lines)
    if tuple(header) != BREAKDOWN_COLUMNS:
        raise ConfigError(f"{path} is not a raycompo costs.csv (its header is {','.join(header)[:80]!r}, not "
                          f"{','.join(BREAKDOWN_COLUMNS)!r}); move it away, or start the run again (--overwrite)")
    rows: list[dict[str, Any]] = []
    last = 0
    for n, fields in enumerate(lines, 2):
        try:
            if len(fields) != len(BREAKDOWN_COLUMNS):
                raise ValueError
            row = {c: t(v) for c, t, v in zip(BREAKDOWN_COLUMNS, _TYPES, fields)}
        except ValueError:
            raise ConfigError(f"{path}: line {n} is not a row of round, direction, key, values, bytes "
                              f"({','.join(fields)[:60]!r}); the file is damaged") from None
        if row["round"] < last:
            raise ConfigError(f"{path}: line {n} is of round {row['round']} after rows of round {last}: the file "
                              "was written by more than one run, or is damaged")
        last = row["round"]
        if upto_round is not None and last > upto_round:
            break
        rows.append(row)
    return rows


def resume_rows(folder: str | Path, upto_round: int, ledger_state: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The rows of costs.csv a run resumed from its checkpoint of round `upto_round` keeps:
    exactly as many as the checkpoint's ledger counted (`Ledger.state()`), else a
    ConfigError (the file was cut or damaged). A checkpoint from before costs.csv was
    written per round holds the rows themselves: they are taken from it."""
    state = ledger_state or {}
    if isinstance(state.get("rows"), list):
        return [{c: t(v) for c, t, v in zip(BREAKDOWN_COLUMNS, _TYPES, r)} for r in state["rows"]
                if int(r[0]) <= upto_round]
    rows = read_costs(folder, upto_round)
    if "breakdown_rows" in state and len(rows) != int(state["breakdown_rows"]):
        path = Path(folder) / FILE
        has = "is missing" if not path.exists() else f"holds {len(rows)} rows of rounds up to {upto_round}"
        raise ConfigError(f"cannot resume {folder}: costs.csv {has}, where its checkpoint (round {upto_round}) "
                          f"counted {state['breakdown_rows']}: the file was cut short or damaged. Put it back, or "
                          "start the run again (--overwrite, or another --out): the checkpoint alone cannot "
                          "rebuild the rows")
    return rows
