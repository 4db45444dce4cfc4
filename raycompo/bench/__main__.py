"""`python -m raycompo.bench NAME [ARGS...]`: run benchmark NAME with ARGS (see the package's
docstring, printed by `--help` or no NAME). Options and no NAME run the `round` benchmark."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

import raycompo.bench as bench
from raycompo.errors import RaycompoError


def resolve(name: str) -> Callable[[list[str] | None], Any]:
    """The `main(argv)` of benchmark `name` (a key of `BENCHMARKS`); imports its module."""
    return importlib.import_module(bench.BENCHMARKS[name]).main


def split_args(args: list[str]) -> tuple[str, list[str]]:
    """(benchmark name, its arguments) of a non-empty command line: options and no NAME
    name the default benchmark. The name is not checked against `BENCHMARKS` here."""
    if args[0].startswith("-"):  # `python -m raycompo.bench --threads 1`: the round benchmark
        return bench.DEFAULT, args
    return args[0], args[1:]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    names = ", ".join(bench.BENCHMARKS)
    if not args or args[0] in ("-h", "--help", "help"):
        print((bench.__doc__ or "").strip())
        return 0
    name, args = split_args(args)
    if name not in bench.BENCHMARKS:
        print(f"python -m raycompo.bench: unknown benchmark {name!r}; one of: {names}", file=sys.stderr)
        return 2
    try:
        rc = resolve(name)(args)
    except RaycompoError as exc:  # a setting the engine refuses (e.g. --m above --clients): its message
        print(f"python -m raycompo.bench {name}: error: {exc}", file=sys.stderr)
        return 2
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())
