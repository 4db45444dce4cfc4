"""What the public functions accept, checked in one place before anything runs.

The command line's parser checks each option's type (`--rounds 5x` is refused); a Python
caller has no parser, so `raycompo.run`, `resume`, `tune`, `plot`, `task_from_arrays` and
`task_from_clients` declare what each argument accepts as an `Arg`, and `check` turns a
wrong type or value into one `ConfigError` that names the function, the argument, what it
got and what it accepts:

    raycompo.run: rounds must be an integer >= 1, got '5' (a str)

The range checks shared with the command line (rounds >= 1, a known backend, ...) stay
where the command line meets them too (`config.resolve`, the settings' `validate`); the
ranges here are for the arguments only Python has, and say the same. This module sits at
the bottom of the layers (it imports only `errors`): the choices (backends, trackers,
progress modes...) are passed in by the function that owns them.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from raycompo.errors import ConfigError

KINDS = {
    "int": "an integer",
    "number": "a number",
    "bool": "True or False",
    "str": "a non-empty string",
    "text": "a string",
    "choice": "one of",
    "names": "a name or a list of names, each one of",
    "strings": "a list of non-empty strings",
    "seeds": "a non-empty list of distinct integers >= 0",
    "specs": "a list (maybe empty) of specs ('package.module:ClassName', 'path/to/file.py:ClassName') or classes",
    "mapping": "a dict with string keys",
    "path": "a path (a str or a pathlib.Path)",
    "paths": "a list of paths",
    "callable": "a function",
    "instances": "a list of",
    "type": "a class",
}
"""Each kind an `Arg` may accept, as a message says it."""


@dataclass(frozen=True)
class Arg:
    """What one argument accepts: values of any of `kinds` (see KINDS), within the bounds
    (`at_least` <= value, `above` < value, `at_most` >= value, `below` > value; numbers
    only), one of
    `choices` ('choice', 'names'), instances of `cls` ('instances'), or None where `none`."""

    kinds: tuple[str, ...]
    at_least: float | None = None
    above: float | None = None
    at_most: float | None = None
    below: float | None = None
    choices: tuple[str, ...] = ()
    cls: type | None = None
    none: bool = False

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown:  # a programming error in a table, not a user's
            raise ValueError(f"unknown argument kinds {unknown}; known: {', '.join(KINDS)}")

    def accepts(self) -> str:
        """What the argument accepts, in words: 'an integer >= 1 or None'."""
        words = []
        for kind in self.kinds:
            text = KINDS[kind]
            if kind in ("choice", "names"):
                text += " " + ", ".join(repr(c) for c in self.choices)
            elif kind == "instances" and self.cls is not None:
                text += " " + self.cls.__name__ + " objects"
            elif kind in ("int", "number"):
                bounds = [f"{op} {_num(b)}" for op, b in ((">=", self.at_least), (">", self.above),
                                                         ("<=", self.at_most), ("<", self.below)) if b is not None]
                text += "".join(" " + " and ".join(bounds) if bounds else "")
            words.append(text)
        if self.none:
            words.append("None")
        return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]

    def admits(self, value: Any) -> bool:
        """True when `value` is one that the argument accepts."""
        if value is None:
            return self.none
        return any(_ADMITS[kind](self, value) for kind in self.kinds)


def positive_int(none: bool = False) -> Arg:
    """An integer >= 1 (a count: rounds, clients, threads...), or None where `none`."""
    return Arg(("int",), at_least=1, none=none)


def check(where: str, values: Mapping[str, Any], table: Mapping[str, Arg]) -> dict[str, Any]:
    """`values` by argument name, each checked against its `Arg` in `table` (names not in
    the table pass unchecked). Integers and numbers of other types (numpy's) come back as
    Python's int and float, so config.json records them as numbers. Raises ConfigError:
    '<where>: <name> must be <what it accepts>, got <value> (a <type>)'."""
    out = dict(values)
    for name, arg in table.items():
        if name not in values:
            continue
        value = values[name]
        if not arg.admits(value):
            raise ConfigError(f"{where}: {name} must be {arg.accepts()}, got {shown(value)}")
        out[name] = _plain(value)
    return out


def shown(value: Any) -> str:
    """A value as a message shows it: its repr (cut at 60 characters) and its type."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    kind = type(value).__name__
    return f"{text} ({'an' if kind[:1] in 'aeiou' else 'a'} {kind})"


def _plain(value: Any) -> Any:
    if isinstance(value, bool) or type(value) in (int, float):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value


def _num(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _in_bounds(arg: Arg, value: float) -> bool:
    return ((arg.at_least is None or value >= arg.at_least) and (arg.above is None or value > arg.above)
            and (arg.at_most is None or value <= arg.at_most) and (arg.below is None or value < arg.below))


def _is_int(arg: Arg, value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not _is_bool(value) and _in_bounds(arg, int(value))


def _is_number(arg: Arg, value: Any) -> bool:
    return (isinstance(value, numbers.Real) and not _is_bool(value) and math.isfinite(float(value))
            and _in_bounds(arg, float(value)))


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or type(value).__name__ == "bool_"  # numpy's too


def _is_str(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != ""


def _is_path(value: Any) -> bool:
    return _is_str(value) or isinstance(value, os.PathLike)


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _is_vector(value: Any) -> bool:
    """A 1-D numpy array (e.g. `np.arange(5)` for seeds)."""
    return type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 1


_ADMITS = {
    "int": _is_int,
    "number": _is_number,
    "bool": lambda arg, v: _is_bool(v),
    "str": lambda arg, v: _is_str(v),
    "text": lambda arg, v: isinstance(v, str),
    "choice": lambda arg, v: isinstance(v, str) and v in arg.choices,
    "names": lambda arg, v: (isinstance(v, str) and v in arg.choices)
    or (_is_list(v) and all(isinstance(n, str) and n in arg.choices for n in v)),
    "strings": lambda arg, v: _is_list(v) and len(v) > 0 and all(_is_str(s) for s in v),
    "seeds": lambda arg, v: (_is_list(v) or _is_vector(v)) and len(v) > 0 and len(set(v.tolist() if _is_vector(v) else v)) == len(v)
    and all(_is_int(Arg(("int",), at_least=0), s) for s in v),
    "specs": lambda arg, v: _is_list(v) and all(_is_str(s) or isinstance(s, type) for s in v),
    "mapping": lambda arg, v: isinstance(v, Mapping) and all(isinstance(k, str) for k in v),
    "path": lambda arg, v: _is_path(v),
    "paths": lambda arg, v: _is_list(v) and len(v) > 0 and all(_is_path(p) for p in v),
    "callable": lambda arg, v: callable(v),
    "instances": lambda arg, v: _is_list(v) and arg.cls is not None and all(isinstance(o, arg.cls) for o in v),
    "type": lambda arg, v: isinstance(v, type),
}
