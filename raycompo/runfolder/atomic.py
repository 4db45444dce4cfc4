"""Writing a file atomically: the content goes to a temp file beside it, which is renamed over
the file. A kill or a full disk meanwhile leaves the old file whole and no temp file behind.
Used for every file of a run folder that is rewritten (config.json, metrics.csv, clients.csv,
costs.csv, checkpoint.pt, the end-of-run frames). It imports nothing of raycompo."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def replace_atomically(path: str | Path, write: Callable[[Path], None]) -> None:
    """Call `write(tmp)` to write the new content to a temp file beside `path` (`path` +
    '.tmp'), then rename it over `path`; when anything fails the temp file is removed and the
    error raised."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
