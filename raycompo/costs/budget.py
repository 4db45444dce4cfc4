"""A cost budget: end a run at the first round whose cumulative cost reaches a limit.

`--budget samples=1e6 bytes_up=2e9` (`budget={...}` in `raycompo.run`, `RunConfig.budget`)
ends the run, status 'completed', at the first round where any listed cost column
(`samples`, `values_up`, `values_down`, `bytes_up`, `bytes_down`, `exchanges`; `sim_time`
and the dropped candidates' `dropped_bytes_down`, ... with a simulated system; `epsilon` with client-level DP, docs/compression.md) is >= its value: sweeps compare algorithms at equal cost. The
budget only reads the cost columns (engine/ledger.py) once a round ended, like the
divergence check; the last round is evaluated whatever `eval_every` says.

This module imports nothing of raycompo but its errors and the column names
(`raycompo.costs.exchange`): the config checks a budget, the engine's driver applies it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from raycompo.costs.exchange import CUMULATIVE_COLUMNS, SYSTEM_COLUMNS
from raycompo.errors import ConfigError

BUDGET_KEYS = CUMULATIVE_COLUMNS
"""The cost columns a budget may limit (`sim_time` exists only with a simulated system,
`epsilon` only with client-level DP, --dp-clip: the config checks that), named once in
`raycompo.costs.exchange`."""

NEEDS_SYSTEM = tuple(k for k in BUDGET_KEYS if k in SYSTEM_COLUMNS)
"""Budget keys whose column only a simulated system (`--system`) writes: `sim_time` and
what dropped candidates cost (`costs.DROPPED_COLUMNS`)."""


def parse_budget(items: list[str]) -> dict[str, float]:
    """`['samples=1e6', 'bytes_up=2e9']` (the command line) -> {'samples': 1e6, ...};
    ConfigError for an item that is not KEY=NUMBER (checked further by `check_budget`)."""
    out: dict[str, float] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--budget expects KEY=VALUE, got {item!r}; keys: {', '.join(BUDGET_KEYS)}")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"--budget {key.strip()}: {value!r} is not a number") from None
    return out


def check_budget(budget: Any, system: Any = None) -> dict[str, float]:
    """The budget as {key: limit}, or ConfigError naming the key, what it got and what is
    accepted: known keys only, limits finite numbers > 0, `sim_time` only with a `system`."""
    if budget is None:
        return {}
    if not isinstance(budget, Mapping):
        raise ConfigError(f"budget must be a mapping of cost column to limit (e.g. {{'samples': 1e6}}), "
                          f"got {type(budget).__name__} {budget!r}")
    out: dict[str, float] = {}
    for key, value in budget.items():
        if key not in BUDGET_KEYS:
            raise ConfigError(f"unknown budget key {key!r}; accepted: {', '.join(BUDGET_KEYS)}")
        if key in NEEDS_SYSTEM and not system:
            raise ConfigError(f"budget {key} needs a simulated system (--system PROFILE): without one a run has "
                              f"no {key} column; budget keys without it: "
                              f"{', '.join(k for k in BUDGET_KEYS if k not in NEEDS_SYSTEM)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ConfigError(f"budget {key} must be a finite number > 0, got {value!r}")
        out[str(key)] = float(value)
    return out


class Budget:
    """The stop check of a budget: `reached(columns)` names the first limit that the
    cumulative cost columns reach (None while none is reached)."""

    def __init__(self, limits: Mapping[str, float]):
        self.limits = dict(limits)

    def __bool__(self) -> bool:
        return bool(self.limits)

    def reached(self, columns: Mapping[str, Any]) -> str | None:
        """'budget samples=1000 reached (samples 1040)' for the first limit reached, else None.
        A limit whose column the row does not hold is an error, never a budget that silently
        never stops (a column renamed in one place and not in another)."""
        for key, limit in self.limits.items():
            value = columns.get(key)
            if value is None:
                raise ConfigError(f"budget {key}={limit:g}: the run's rows have no column {key!r} (their cost "
                                  f"columns: {', '.join(k for k in columns if k in BUDGET_KEYS) or 'none'})")
            if value >= limit:
                return f"budget {key}={limit:g} reached ({key} {value:g})"
        return None
