"""Reading a user's CSV file (a device table, an availability trace): untrusted input."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from contextlib import contextmanager

from raycompo.errors import ConfigError


@contextmanager
def csv_reader(path: str, where: str) -> Iterator[csv.DictReader]:
    """A `csv.DictReader` over `path`, UTF-8 with or without a byte-order mark (Excel saves
    one), the header's names stripped of spaces. A missing file, one that cannot be read as
    CSV, or a header naming a column twice is a ConfigError that names `where` (e.g. 'device
    CSV my.csv'); the caller checks the rows."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames is not None:
                reader.fieldnames = [name.strip() for name in reader.fieldnames]
                twice = sorted({n for n in reader.fieldnames if reader.fieldnames.count(n) > 1})
                if twice:
                    raise ConfigError(f"{where}: the header names column(s) {', '.join(map(repr, twice))} more than "
                                      "once; each column once")
            yield reader
    except FileNotFoundError:
        raise ConfigError(f"{where} does not exist") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{where} is not a readable CSV ({type(exc).__name__}: {exc})") from None
