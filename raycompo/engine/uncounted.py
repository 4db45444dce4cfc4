"""Telling a user why a phase's samples are not counted (issue 32).

The ledger counts data points where they are drawn (`ClientData.batch`, `outer_batch`,
`take`, `full`, `CohortBatch.batch`) and oracle calls where the task is evaluated
(raycompo/problems/oracle.py). An algorithm that evaluates the task on data it takes
straight from `c.data.x` / `c.data.y` has its oracle calls counted, but no draw to count:
its `samples` would stay 0 without a word. A host warns once per phase of an algorithm
that is not raycompo's own when a phase made oracle calls and drew no data point.
"""

from __future__ import annotations

import warnings
from typing import Any

BUILT_IN = "raycompo."
"""Module prefix of raycompo's own algorithms (their phases that evaluate the task on
points drawn earlier in the round, e.g. FedDRO's cached batch, are checked by the ledger tests)."""


def message(algorithm: str, phase: str) -> str:
    """The warning for `phase` of `algorithm`."""
    return (f"raycompo: algorithm {algorithm}'s phase {phase!r} evaluated the task on data points but drew "
            "none through c.data.batch / outer_batch / take / full: its samples column counts 0 for it (its "
            "oracle_calls are counted). Draw the data through those methods to have it counted (docs/costs.md)")


class UncountedReads:
    """Warns once per phase, for an algorithm defined outside raycompo, when a phase made
    oracle calls but drew no data point."""

    def __init__(self, algorithm: Any):
        self.name = str(getattr(algorithm, "name", type(algorithm).__name__))
        self.active = not type(algorithm).__module__.startswith(BUILT_IN)
        self.warned: set[str] = set()

    def check(self, phase: str, samples: int, oracle_calls: int) -> None:
        """After one member's phase: its samples drawn and oracle calls made."""
        if self.active and oracle_calls > 0 and samples == 0 and phase not in self.warned:
            self.warned.add(phase)
            warnings.warn(message(self.name, phase), RuntimeWarning, stacklevel=2)
