"""Reading a run folder's CSV of rows by round (costs.csv, events.csv): written by one run,
appended to as each round (server step) ends, read back on resume and by users. The file is
untrusted input: its header must be the expected one, each line a row of the expected types,
the rounds never going backwards; a last line cut short (a kill during its write) is dropped.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from raycompo.errors import ConfigError
from raycompo.runfolder.atomic import replace_atomically


class RoundRowsFile:
    """A run folder's CSV of rows by round: replaced by its header and `rows` (what a resumed
    run keeps; none for a new run), atomically, then appended to as each round ends (flushed).
    A subclass names its `FILE`, its `COLUMNS`, how a row becomes cells (`cells`) and how the
    file reads back (`read`)."""

    FILE = ""
    COLUMNS: tuple[str, ...] = ()

    def __init__(self, folder: str | Path, rows: list[dict[str, Any]] | None = None):
        self.path = Path(folder) / self.FILE
        self._file: Any = None
        self._rewrite(rows or [])

    def cells(self, rows: list[dict[str, Any]]) -> list[list[Any]]:
        return [[r[c] for c in self.COLUMNS] for r in rows]

    def read(self, upto: int) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _rewrite(self, rows: list[dict[str, Any]]) -> None:
        self.close()

        def write(tmp: Path) -> None:
            with open(tmp, "w", newline="") as out:
                writer = csv.writer(out, lineterminator="\n")
                writer.writerow(self.COLUMNS)
                writer.writerows(self.cells(rows))

        replace_atomically(self.path, write)

    def append(self, rows: list[dict[str, Any]]) -> None:
        """One round's rows, written and flushed."""
        if not rows:
            return
        if self._file is None or self._file.closed:
            self._file = open(self.path, "a", newline="")
        csv.writer(self._file, lineterminator="\n").writerows(self.cells(rows))
        self._file.flush()

    def truncate(self, upto: int) -> None:
        """Drop the rows of rounds after `upto` (a replay from a checkpoint writes them again)."""
        self.close()
        self._rewrite(self.read(upto))

    def close(self) -> None:
        close_quietly(self._file)


def close_quietly(file: Any) -> None:
    """Close an appended run-folder file, if open; a full disk's error is let go: the last line
    may be cut short, and it is dropped when the file is read back."""
    if file is not None and not file.closed:
        try:
            file.close()
        except OSError:
            pass


def read_round_rows(path: Path, columns: Sequence[str], types: Sequence[Callable[[str], Any]], upto: int | None,
                    expected: str) -> list[dict[str, Any]]:
    """The rows of the CSV at `path` (of rounds <= `upto` in its first column, all when None) as
    dicts of `columns`, each field read by its `types` entry; [] without a file. ConfigError
    when the header is not `columns`, a line is damaged (`expected` says what a row holds) or
    the rounds go backwards."""
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
    if tuple(header) != tuple(columns):
        raise ConfigError(f"{path} is not a raycompo {path.name} (its header is {','.join(header)[:80]!r}, not "
                          f"{','.join(columns)!r}); move it away, or start the run again (--overwrite)")
    rows: list[dict[str, Any]] = []
    last, first = 0, columns[0]
    for n, fields in enumerate(lines, 2):
        try:
            if len(fields) != len(columns):
                raise ValueError
            row = {c: t(v) for c, t, v in zip(columns, types, fields)}
        except ValueError:
            raise ConfigError(f"{path}: line {n} is not a row of {expected} ({','.join(fields)[:60]!r}); "
                              "the file is damaged") from None
        if row[first] < last:
            raise ConfigError(f"{path}: line {n} is of {first} {row[first]} after rows of {first} {last}: the file "
                              "was written by more than one run, or is damaged")
        last = row[first]
        if upto is not None and last > upto:
            break
        rows.append(row)
    return rows
