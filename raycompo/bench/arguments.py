"""Argument types of the benchmarks' command lines: a count or a size out of range is an
argparse error (exit 2, naming the option) rather than a default taken silently or a figure
of nothing."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"an integer >= 1, got {value}")
    return value
