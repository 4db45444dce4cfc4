"""The docs' commands and the docs build.

Every line of a fenced ```bash block in README.md and docs/*.md is either a
`python -m raycompo.<module> ...` command, checked here without running it, or matches one
of tests/doc_pages.py's `NOT_RUN` (the test fails on any other line, so a new kind of
command has to be added there with the reason it is not checked here). A checked command:

- names a module that exists and has a command line;
- is accepted by that command line's own argument parser (`build_parser()` of
  raycompo.run, raycompo.tune.cli, raycompo.reproduce, raycompo.plot, raycompo.grafana;
  for raycompo.bench the dispatch `split_args` and then the benchmark's `build_parser()`):
  parsed only, nothing runs;
- names files that exist (`examples/...`, `sweeps/...`, `cluster/...`, also in a
  `FILE.py:Class` spec), and registered names that exist: `--task`, `--algo`, a sweep's
  `--space`, a reproduction's claim, a benchmark.

tests/test_docs_commands.py runs every command, as printed but shortened (docs/index.md,
"Every command on these pages runs"). The commands are also run, with small settings, by
the tests that own them:
tests/test_cli.py and tests/test_durability.py (runs, `--resume`, `--list`),
tests/test_examples.py (every file of examples/, from the command line, on Ray and in a
sweep), tests/test_tune*.py and tests/test_sweep*.py (sweeps), tests/test_reproduce*.py,
tests/test_plot.py, tests/test_grafana.py, tests/test_memory.py (population scale),
tests/test_bench*.py (the benchmarks' dispatch and options) and tests/test_observability.py
(progress); the README's install and test commands are what .ci/run runs.

Last, the docs build in strict mode (mkdocs.yml: a broken link between pages or an API
reference that does not resolve fails it), skipped when mkdocs is not installed
(`pip install -e ".[docs]"`).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from tests.doc_pages import DOCS, ROOT, not_run, words

#: file paths a command may name, relative to the repository root
REPO_DIRS = ("examples/", "sweeps/", "cluster/")

COMMANDS = [(d.page, d.text) for d in DOCS]


def skipped(command: str) -> str | None:
    return not_run(words(command))


def check_paths(argv: list[str]) -> None:
    for word in argv:
        for part in word.split("="):  # --with SPEC=LABEL
            path = part.split(":")[0]  # FILE.py:Class
            if path.startswith(REPO_DIRS):
                assert (ROOT / path).exists(), f"{path} does not exist"


def parse_with(parser: argparse.ArgumentParser, args: list[str]) -> argparse.Namespace:
    try:
        return parser.parse_args(args)
    except SystemExit as exc:
        raise AssertionError(f"{parser.prog} refuses {args} (exit {exc.code})") from None


def check_name(kind: str, spec: str | None) -> None:
    """A `--task` / `--algo` value names a registered class or a file that exists."""
    if spec is None or ":" in spec:
        return  # the default, or a FILE.py:Class / module:Class spec (files: check_paths)
    from raycompo.configuration import plugins

    assert spec in plugins.registered(kind), f"unknown {kind} {spec!r}"


def check_run(args: list[str]) -> None:
    from raycompo.run import build_parser

    ns = parse_with(build_parser(), args)
    check_name("task", ns.task if "--task" in args else None)
    check_name("algorithm", ns.algo if "--algo" in args else None)


def check_tune(args: list[str]) -> None:
    from raycompo.tune.cli import build_parser

    ns = parse_with(build_parser(), args)
    space = getattr(ns, "space", None)
    if space and not space.endswith((".yaml", ".yml")):
        assert (ROOT / "sweeps" / f"{space}.yaml").exists(), f"no sweeps/{space}.yaml"


def check_reproduce(args: list[str]) -> None:
    from raycompo.reproduce.__main__ import build_parser
    from raycompo.reproduce.claims import CLAIMS

    ns = parse_with(build_parser(), args)
    assert ns.name is None or ns.name in CLAIMS, f"unknown claim {ns.name!r}"


def check_bench(args: list[str]) -> None:
    import raycompo.bench as bench
    from raycompo.bench.__main__ import split_args

    assert args, "python -m raycompo.bench with no NAME only prints the list"
    name, rest = split_args(args)
    assert name in bench.BENCHMARKS, f"unknown benchmark {name!r}"
    module = importlib.import_module(bench.BENCHMARKS[name])
    parse_with(module.build_parser(), rest)


def parser_check(module: str) -> Callable[[list[str]], None]:
    def check(args: list[str]) -> None:
        parse_with(importlib.import_module(module).build_parser(), args)
    return check


CHECKS: dict[str, Callable[[list[str]], None]] = {
    "raycompo.run": check_run,
    "raycompo.tune": check_tune,
    "raycompo.reproduce": check_reproduce,
    "raycompo.bench": check_bench,
    "raycompo.plot": parser_check("raycompo.plot"),
    "raycompo.grafana": parser_check("raycompo.grafana"),
}


def test_the_pages_show_commands():
    pages = {page for page, _ in COMMANDS}
    assert {"README.md", "docs/running.md", "docs/sweeps.md", "docs/reproductions.md"} <= pages
    assert sum(" ".join(words(c)).startswith("python -m raycompo.") for _, c in COMMANDS) >= 40


CHECKED = [(page, c) for page, c in COMMANDS if skipped(c) is None]
NOT_RUN_HERE = [(page, c) for page, c in COMMANDS if skipped(c) is not None]


@pytest.mark.parametrize(("page", "command"), CHECKED, ids=[f"{p}: {c[:90]}" for p, c in CHECKED])
def test_documented_command(page, command, monkeypatch):
    monkeypatch.chdir(ROOT)  # the docs' commands run from the repository root
    argv = words(command)
    check_paths(argv)
    assert argv[:2] == ["python", "-m"] and argv[2].startswith("raycompo."), (
        f"{page}: {command!r} is neither `python -m raycompo...` nor in tests/doc_pages.py's NOT_RUN (add it with a reason)")
    module = argv[2]
    assert importlib.util.find_spec(module) is not None, f"{page}: no module {module}"
    assert module in CHECKS, f"{page}: no parser check for {module} (add one to CHECKS)"
    CHECKS[module](argv[3:])


def test_commands_not_run_here_name_files_that_exist():
    """The commands of NOT_RUN (installs, other programs' servers) are not run, but the files
    they name exist; they are few, each for a reason (no skipped test per command)."""
    for _page, command in NOT_RUN_HERE:
        check_paths(words(command))
    assert len(NOT_RUN_HERE) < len(CHECKED) / 3


def test_a_bad_option_is_caught():
    """The check is real: an option the command line does not have fails it."""
    with pytest.raises(AssertionError, match="refuses"):
        check_run(["--task", "dro-mnist5k", "--no-such-option"])
    with pytest.raises(AssertionError, match="refuses"):
        check_bench(["round", "--no-such-option"])
    with pytest.raises(AssertionError, match="unknown benchmark"):
        check_bench(["no-such-benchmark"])
    with pytest.raises(AssertionError, match="does not exist"):
        check_paths(["--algo", "examples/no_such_file.py:X"])


def test_api_reference_covers_every_public_name():
    import raycompo

    text = (ROOT / "docs" / "api.md").read_text()
    missing = [name for name in raycompo.__all__ if f"raycompo.{name}" not in text]
    assert not missing, f"docs/api.md does not document {missing}"


def test_readme_links_every_docs_page():
    readme = (ROOT / "README.md").read_text()
    pages = [p.name for p in (ROOT / "docs").glob("*.md") if p.name != "index.md"]
    assert [p for p in pages if f"(docs/{p}" not in readme] == []


def test_docs_build_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        pytest.skip('mkdocs / mkdocstrings not installed (pip install -e ".[docs]")')
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "Run one federated experiment" in api  # raycompo.run's docstring, rendered
