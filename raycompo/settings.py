"""Typed settings that the CLI (`--set key=value`) and Ray Tune override by the same flat keys.

An algorithm and a task each declare a dataclass of settings. Each field's docstring
(the string literal under it) gives its meaning and the paper's symbol.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import math
import typing
from typing import Any

from raycompo.errors import ConfigError


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of a settings dataclass (cleanrl style)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(inspect.getsource(klass).strip())
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body  # type: ignore[attr-defined]
        for node, nxt in zip(body, body[1:]):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def parse_sets(items: list[str]) -> dict[str, Any]:
    """The command lines' `--set key=value` items -> {key: parse_value(value)}; a
    ConfigError for an item without '='."""
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = parse_value(value)
    return out


def parse_value(text: str) -> Any:
    """'0.1' -> 0.1, '5' -> 5, 'true' -> True, 'none' -> None, else the string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _coerce(name: str, value: Any, annotation: Any) -> Any:
    """Coerce a parsed value to the field's declared type; reject what does not fit: None
    where the type is not optional, and a bool where a number is wanted (True is not 1)."""
    origin = typing.get_origin(annotation)
    is_union = origin in (typing.Union, getattr(__import__("types"), "UnionType", None))
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    target = args[0] if is_union and args else annotation
    if value is None:
        if is_union and type(None) in typing.get_args(annotation) or annotation is Any:
            return None
        raise ConfigError(f"setting {name}=None is not a valid {getattr(target, '__name__', target)}; give {name} a value of that type")
    if isinstance(value, bool) and target in (int, float):
        raise ConfigError(f"setting {name}={value!r} is not a valid {target.__name__}: a boolean is not a number")
    try:
        if target is bool:
            if isinstance(value, bool):
                return value
            raise ValueError
        if target is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        if target is float:
            out = float(value)
        if target is str:
            return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"setting {name}={value!r} is not a valid {getattr(target, '__name__', target)}") from None
    if target is float:
        if not math.isfinite(out):
            raise ConfigError(f"setting {name}={value!r} must be a finite number")
        return out
    return value


def build(cls: type, overrides: dict[str, Any]) -> Any:
    """Instantiate settings `cls` from its defaults and the overrides that name its fields."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in overrides:
            kwargs[f.name] = _coerce(f.name, overrides[f.name], hints[f.name])
    return cls(**kwargs)


def names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def check_known(overrides: dict[str, Any], *classes: type, context: str) -> None:
    """Reject override keys that no settings class declares, listing the valid ones."""
    known = {n for c in classes for n in names(c)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(
            f"unknown setting(s) {', '.join(unknown)} for {context}; "
            f"valid settings: {', '.join(sorted(known))}"
        )


def require(cond: bool, message: str) -> None:
    """Input check that raises a ConfigError (never `assert`)."""
    if not cond:
        raise ConfigError(message)


def row_scalar(value: Any, like: Any) -> Any:
    """A scalar setting as a factor of the rows of `like` (k, ...): a number as it is; a
    population's per-row values (a (k,) tensor: one trial's setting per row, engine/population.py)
    viewed (k, 1, ...) in `like`'s dtype."""
    if not hasattr(value, "view"):
        return value
    return value.to(like.dtype).view(-1, *([1] * (like.dim() - 1)))
