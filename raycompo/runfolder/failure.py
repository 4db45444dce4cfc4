"""What a failed run leaves for the person who reads it: the whole traceback in the run
folder (`error.txt`), and the lines of it that are in their own code (a plugin's file), which
`python -m raycompo.run` prints under its one-line message.

A run on Ray fails with Ray's error, whose message carries the worker's traceback as text;
an inline run's traceback is the exception's own. Both are read the same way: as text, every
`File "...", line N, in NAME` of a file outside raycompo and outside Python's own folders
(the standard library, site-packages) is the user's.
"""

from __future__ import annotations

import re
import sys
import traceback
from pathlib import Path

ERROR_FILE = "error.txt"
"""A failed run's whole traceback, in its folder (removed when a resume completes it)."""

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PACKAGE = Path(__file__).resolve().parents[1]
_PYTHON = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}


def traceback_text(exc: BaseException) -> str:
    """The exception's whole traceback (with its causes, and Ray's worker traceback inside
    its message), without terminal colour codes."""
    return _ANSI.sub("", "".join(traceback.format_exception(exc)))


def root_error(exc: BaseException) -> BaseException:
    """The error a Ray worker raised, where `exc` is Ray's wrapper of it (`RayTaskError`,
    whose message starts with the worker's name and pid; its `cause` is the error itself,
    itself a wrapper where an actor called another): `exc` otherwise."""
    while type(exc).__name__.startswith("RayTaskError") and isinstance(getattr(exc, "cause", None), BaseException):
        exc = exc.cause  # type: ignore[attr-defined]
    return exc


def user_frames(text: str, most: int = 3) -> list[str]:
    """'FILE:LINE in NAME' of the last `most` frames of `text` (a traceback) that are in
    neither raycompo nor Python's own folders, innermost last, each once."""
    seen: list[str] = []
    for file, line, name in _FRAME.findall(text):
        if _is_users(file):
            frame = f"{file}:{line} in {name}"
            if frame in seen:
                seen.remove(frame)
            seen.append(frame)
    return seen[-most:]


def _is_users(file: str) -> bool:
    if file.startswith("<"):  # <frozen ...>, <string>
        return False
    path = Path(file).resolve()
    return not any(path.is_relative_to(root) for root in (_PACKAGE, *_PYTHON)) and "site-packages" not in path.parts


def write_error(folder: Path, exc: BaseException) -> Path | None:
    """The whole traceback in `folder`/error.txt; None where it could not be written."""
    path = Path(folder) / ERROR_FILE
    try:
        path.write_text(traceback_text(exc))
    except OSError:
        return None
    return path
