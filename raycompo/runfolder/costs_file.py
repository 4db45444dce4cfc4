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

from pathlib import Path
from typing import Any

from raycompo.costs.exchange import BREAKDOWN_COLUMNS
from raycompo.errors import ConfigError
from raycompo.runfolder.round_rows import RoundRowsFile, read_round_rows

FILE = "costs.csv"

_TYPES = (int, str, str, int, int)
"""The type of each of `BREAKDOWN_COLUMNS` (a key stays a string, even '1')."""


class CostsFile(RoundRowsFile):
    """`costs.csv` of the run folder `folder` (`RoundRowsFile`: its header and the kept `rows`,
    then appended to round by round)."""

    FILE = FILE
    COLUMNS = BREAKDOWN_COLUMNS

    def read(self, upto: int) -> list[dict[str, Any]]:
        return read_costs(self.path.parent, upto)


def read_costs(folder: str | Path, upto_round: int | None = None) -> list[dict[str, Any]]:
    """costs.csv's rows (of rounds <= `upto_round`, all when None) as dicts of
    `BREAKDOWN_COLUMNS`; [] without a file; a last line cut short (a kill during its
    write) is dropped. ConfigError when a line is damaged or rounds go backwards."""
    return read_round_rows(Path(folder) / FILE, BREAKDOWN_COLUMNS, _TYPES, upto_round,
                           "round, direction, key, values, bytes")


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
