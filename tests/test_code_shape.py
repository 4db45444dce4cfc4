"""The shape of raycompo's code (issue 39, "a house by its rooms"): no function is longer
than `MAX_LINES` code lines, so each reads on one screen and its steps have names."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "raycompo"

MAX_LINES = 60
"""The most code lines one function may have."""


def code_lines(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The lines from `node`'s `def` to its end that hold code: not blank, not a comment
    alone, not its docstring (a nested function's lines count toward the enclosing one;
    decorators are not counted)."""
    body = node.body
    doc: set[int] = set()
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        doc = set(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    end = node.end_lineno or node.lineno
    return sum(1 for i in range(node.lineno, end + 1)
               if i not in doc and (text := lines[i - 1].strip()) and not text.startswith("#"))


def long_functions(source: str, limit: int) -> list[tuple[int, str, int]]:
    """(line, name, code lines) of every function in `source` longer than `limit`."""
    lines = source.splitlines()
    return [(node.lineno, node.name, n) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (n := code_lines(lines, node)) > limit]


def test_no_function_is_longer_than_the_limit():
    offenders = [f"{path.relative_to(PACKAGE.parent)}:{line} {name} {n}"
                 for path in sorted(PACKAGE.rglob("*.py"))
                 for line, name, n in long_functions(path.read_text(encoding="utf-8"), MAX_LINES)]
    assert not offenders, (f"{len(offenders)} function(s) over {MAX_LINES} code lines (docstrings, comments and "
                           "blank lines not counted); split them into named steps:\n" + "\n".join(offenders))


def test_the_count_skips_docstrings_comments_and_blank_lines_and_takes_in_nested_functions():
    source = textwrap.dedent('''
        @decorator
        def outer(a,
                  b):
            """A docstring
            of two lines."""
            # a comment

            x = a  # code with a comment
            def inner():
                """Its docstring counts toward outer."""
                return x
            return inner
        ''')
    assert {name: n for _, name, n in long_functions(source, 0)} == {"outer": 7, "inner": 2}
