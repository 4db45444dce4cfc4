"""The command lines the documentation pages show, read one way for the two tests that use
them: tests/test_docs.py checks each against its command line's parser, and
tests/test_docs_commands.py runs each. Also the one list of the commands neither runs here,
each with its reason."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: line prefixes of commands that are not run (nor parsed) by the tests, with the reason
NOT_RUN: dict[str, str] = {
    "python3 -m venv": "the README's install: .ci/run runs it in a fresh environment",
    "pip install": "installs packages (network): .ci/run installs the extras (dev, mlflow, wandb, docs)",
    "python -m pytest": "the test suite itself: .ci/run runs it",
    "python -m mkdocs": "the docs build: tests/test_docs.py::test_docs_build_strict and .ci/run run it",
    "lint-imports": "the layers check: .ci/run runs it at the repository's root (and tests/test_layers.py)",
    "python -m mypy": "the static check of the engine contract: .ci/run runs it at the repository's root",
    "mlflow ui": "MLflow's own server (needs a browser)",
    "ray start": "Ray's own command line: a long-lived cluster for the whole machine",
    "ray metrics": "Ray's own command line: downloads and starts Prometheus",
    "grafana-server": "Grafana's server: not installed here",
    "prometheus ": "Prometheus's own server: tests/test_prometheus.py starts one the same way",
    "export ": "sets an environment variable for the commands after it",
}

ENV_ASSIGNMENT = re.compile(r"^([A-Z_][A-Z0-9_]*)=(\S*)$")


@dataclass(frozen=True)
class Doc:
    """One command of a page: where it is and its text (continuations joined)."""

    page: str
    line: int
    text: str

    def where(self) -> str:
        return f"{self.page}:{self.line}"


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


def page_commands(path: Path) -> list[Doc]:
    """The commands of one page."""
    page = path.relative_to(ROOT).as_posix()
    return [Doc(page, start, text) for start, text in bash_blocks(path)]


DOCS = [d for p in PAGES for d in page_commands(p)]
"""Every command of README.md and docs/*.md, in page order."""


def split_env(text: str) -> tuple[dict[str, str], list[str]]:
    """(leading VAR=value assignments, the command's words), without its comment."""
    argv = shlex.split(text, comments=True)
    env = {}
    while argv and ENV_ASSIGNMENT.match(argv[0]):
        name, value = ENV_ASSIGNMENT.match(argv.pop(0)).groups()
        env[name] = value
    return env, argv


def words(text: str) -> list[str]:
    """The command's words, without its comment and leading VAR=value assignments."""
    return split_env(text)[1]


def not_run(argv: list[str]) -> str | None:
    """Why the command `argv` is not run here (NOT_RUN), or None."""
    text = " ".join(argv) + " "
    return next((why for prefix, why in NOT_RUN.items() if text.startswith(prefix)), None)
