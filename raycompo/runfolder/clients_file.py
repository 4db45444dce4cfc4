"""A run folder's `clients.csv`: every evaluated client's metrics, one tidy row per
(round, client, metric).

Columns: `round`, `client`, `metric`, `value`, `n_samples` (the client's number of
training samples n_i), then, when the run has a simulated system
(`Federation.client_columns`), that system's per-client columns. Rows are appended at
each evaluation, before the evaluation's metrics.csv row and before any checkpoint of
that round, and flushed: a resumed run (and a recovery from a dead actor) keeps exactly
the rows of the rounds up to its checkpoint, then writes the later ones again, so no
round's rows are lost or written twice. Read it with `pandas.read_csv` or
`read_clients(folder)`; `RunResult.clients` is the same frame.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

from raycompo.errors import ConfigError
from raycompo.runfolder.atomic import replace_atomically
from raycompo.runfolder.round_rows import close_quietly
from raycompo.watch.per_client import ClientMetrics

FILE = "clients.csv"


class ClientsFile:
    """`clients.csv` of the run folder `folder`, appended to at each evaluation. `upto_round`
    None: a new run (no file until its first evaluation); a round: a resumed run keeps the
    rows of rounds 0..upto_round that the file holds and drops the others."""

    def __init__(self, folder: str | Path, upto_round: int | None = None):
        self.path = Path(folder) / FILE
        self._file: Any = None
        self._header: list[str] | None = None
        self._rewrite(upto_round)

    def _rewrite(self, upto_round: int | None) -> None:
        """The file := its header and rows of rounds <= upto_round (no file when None, or
        when there is none to keep from), atomically. It is opened (and created) by the
        first `append`."""
        self.close()
        self._header = None
        if upto_round is None or not self.path.exists():
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            return

        def write(tmp: Path) -> None:
            with open(tmp, "w", newline="") as out:
                _copy_rows(self.path, out, upto_round)

        replace_atomically(self.path, write)
        self._header = _header(self.path)

    def truncate(self, upto_round: int) -> None:
        """Drop the rows of rounds after `upto_round` (a replay from a checkpoint writes them again)."""
        self._rewrite(upto_round)

    def append(self, clients: ClientMetrics) -> None:
        """One evaluation's rows (with the header first in an empty file); a column the
        header lacks is left out, one it has that this evaluation lacks is left empty."""
        cols = clients.columns_of_rows()
        if self._file is None or self._file.closed:
            self._file = open(self.path, "a", newline="")
        writer = csv.writer(self._file, lineterminator="\n")
        if self._header is None:
            self._header = list(cols)
            writer.writerow(self._header)
        size = len(cols["round"])
        writer.writerows(zip(*(cols.get(h, [None] * size) for h in self._header)))
        self._file.flush()

    def close(self) -> None:
        close_quietly(self._file)


def _header(path: Path) -> list[str] | None:
    with open(path, newline="") as f:
        line = f.readline()
    return next(csv.reader([line.rstrip("\n")])) if line.endswith("\n") else None


def _copy_rows(path: Path, out: Any, upto_round: int) -> int:
    """Copy `path`'s header and its rows of rounds <= upto_round to `out`, streaming (rounds
    are in order: the copy stops at the first later round); a last line without its line
    end (a kill during its write) is dropped. Returns the number of rows copied."""
    copied = 0
    with open(path, newline="") as f:
        header = f.readline()
        if not header.endswith("\n"):
            return 0
        if not header.startswith("round,"):
            raise ConfigError(f"{path} is not a raycompo clients.csv (its header is {header.strip()[:80]!r}); "
                              "move it away, or start the run again (--overwrite)")
        out.write(header)
        for n, line in enumerate(f, 2):
            if not line.endswith("\n"):
                break
            head = line.split(",", 1)[0]
            try:
                round_ = int(head)
            except ValueError:
                raise ConfigError(f"{path}: line {n} does not start with a round number ({head[:20]!r}); "
                                  "the file is damaged") from None
            if round_ > upto_round:
                break
            out.write(line)
            copied += 1
    return copied


def rounds_held(folder: str | Path, upto_round: int) -> tuple[dict[int, int], set[str]] | None:
    """({round: rows} of the rounds <= upto_round that the folder's clients.csv holds, the
    metric names of its round-0 rows), streaming; None when there is no file. A last line
    without its line end is not counted (a kill during its write). ConfigError when the
    file is not a clients.csv."""
    path = Path(folder) / FILE
    try:
        f = open(path, newline="")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{path} is not readable ({exc.strerror or exc})") from None
    counts: dict[int, int] = {}
    metrics: set[str] = set()
    with f:
        header = f.readline()
        if not header.endswith("\n"):
            return counts, metrics
        names = next(csv.reader([header.rstrip("\n")]))
        if names[:1] != ["round"] or "metric" not in names:
            raise ConfigError(f"{path} is not a raycompo clients.csv (its header is {header.strip()[:80]!r}); "
                              "move it away, or start the run again (--overwrite)")
        at = names.index("metric")
        for n, line in enumerate(f, 2):
            if not line.endswith("\n"):
                break
            fields = next(csv.reader([line]))
            try:
                round_ = int(fields[0])
            except (ValueError, IndexError):
                raise ConfigError(f"{path}: line {n} does not start with a round number; the file is damaged") from None
            if round_ > upto_round:
                break
            counts[round_] = counts.get(round_, 0) + 1
            if round_ == 0 and at < len(fields):
                metrics.add(fields[at])
    return counts, metrics


def read_clients(folder: str | Path) -> Any:
    """A run folder's clients.csv as a pandas DataFrame (empty when the run wrote none; a
    last line cut short is dropped). ConfigError when it does not read as one."""
    import io

    import pandas as pd

    path = Path(folder) / FILE
    if not path.exists():
        return pd.DataFrame(columns=["round", "client", "metric", "value", "n_samples"])
    try:
        with open(path, newline="") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"{path} is not readable ({exc.strerror or exc})") from None
    text = text[: text.rfind("\n") + 1]
    if not text:
        return pd.DataFrame(columns=["round", "client", "metric", "value", "n_samples"])
    try:
        frame = pd.read_csv(io.StringIO(text))
    except ValueError as exc:  # pandas' ParserError, EmptyDataError
        raise ConfigError(f"{path} does not read as a CSV file ({exc})") from None
    missing = [c for c in ("round", "client", "metric", "value") if c not in frame.columns]
    if missing:
        raise ConfigError(f"{path} is not a raycompo clients.csv: no column {', '.join(missing)}")
    if "n_samples" in frame.columns:
        frame["n_samples"] = frame["n_samples"].astype("Int64") if frame["n_samples"].notna().all() else frame["n_samples"]
    return frame
