"""The values a system's user files may hold (issue 33): numbers in every form a person
writes them (`as_number`), and the range of each kind of quantity (`RANGES`), wide enough
for any device and narrow enough that the clock's arithmetic stays finite. Read by the
profile's checks (`profile.number`, the settings' `bounded` ranges of the availability
models and selection policies), the device CSV and the trace."""

from __future__ import annotations

import math
from typing import Any

RANGES = {
    "flops": (1.0, 1e20),
    "weight": (0.0, math.inf),
    "bytes_per_s": (1.0, 1e15),
    "latency_s": (0.0, 1e5),
    "flop_per_sample_per_param": (0.0, 1e9),
    "slot_s": (1e-3, 1e12),
    "period_s": (1e-3, 1e12),
    "time_s": (0.0, 1e12),
    "deadline_s": (0.0, 1e12),
}
"""(lowest, highest) value of each kind of quantity a profile, a device CSV or a trace
takes. Wide enough for any device (1 FLOP/s to 1e20, 1 B/s to 1 PB/s, a day of latency),
narrow enough that every product the clock forms (samples * FLOP per sample / FLOP/s,
bytes / bandwidth, a slot index t / slot_s) stays a finite float."""

NUMBER_FORMS = "e.g. 6, 0.05, 1e9, 1.0e+9, 1_000"
"""The forms of a number named in a message that refuses one."""


def as_number(value: Any) -> float | None:
    """`value` as a float when it is a number or a string a person writes as one ('1e9',
    '1.0e9', '1_000', '2.5E+3': YAML 1.1 readers such as PyYAML leave 1e9 and 1.0e9 as
    strings); None otherwise (a boolean, any other string or type)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # an integer beyond any float
            return math.inf
    return None
