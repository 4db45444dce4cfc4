"""Reading a user's CSV file (a device table, an availability trace): untrusted input."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from contextlib import contextmanager

from raycompo.errors import ConfigError


@contextmanager
def csv_reader(path: str, where: str) -> Iterator[csv.DictReader]:
    """A `csv.DictReader` over `path`. A missing file, or one that cannot be read as CSV, is a
    ConfigError that names `where` (e.g. 'device CSV my.csv'); the caller checks the rows."""
    try:
        with open(path, newline="") as f:
            yield csv.DictReader(f)
    except FileNotFoundError:
        raise ConfigError(f"{where} does not exist") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{where} is not a readable CSV ({type(exc).__name__}: {exc})") from None
