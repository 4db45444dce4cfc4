"""The command lines a documentation page shows: what tests/test_docs.py checks and
tests/test_docs_commands.py runs, read the same way by both."""

from __future__ import annotations

from pathlib import Path


def bash_blocks(path: Path) -> list[tuple[int, str]]:
    """(the line it starts on, the command) of each command line of the page's fenced bash
    blocks: continuation lines joined, comments and blank lines dropped."""
    out, block, pending, start = [], False, "", 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            block = stripped == "```bash" if not block else False
            continue
        if not block:
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        text = (pending + stripped).strip()
        pending = ""
        if text and not text.startswith("#"):
            out.append((start, text))
    return out
