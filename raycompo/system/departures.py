"""When a client in flight goes offline (issue 31): a client dispatched at `start` that would
finish at `finish` is lost if its online interval ends before: its update never arrives,
its work is wasted. One question, answered for the built-in availability models from the
same keyed draws that say who is online (raycompo/system/availability.py):

    departure(model, c, start, finish) -> the first time in (start, finish) at which c is
    offline, or None when it stays online throughout.

* `Always`: never;
* `Bernoulli`: the first slot boundary k * slot_s < finish whose slot k is off;
* `Diurnal`: the end of today's window (a 24 h window goes on into the next day if that
  day is on);
* `Trace`: the end of the interval holding `start` (intervals are merged when read).

An availability model of another kind (a plugin) has no departures.
"""

from __future__ import annotations

import math
from typing import Any

from raycompo.system.availability import DAY_S, Bernoulli, Diurnal, Trace


def departure(model: Any, c: int, start: float, finish: float) -> float | None:
    """The time client c, online at `start`, goes offline before `finish` (None: it does not)."""
    if getattr(model, "always", True) or finish <= start:
        return None
    if isinstance(model, Bernoulli):
        k = math.floor(start / model.slot_s) + 1
        while k * model.slot_s < finish:
            if not model._on(c, k):
                return k * model.slot_s
            k += 1
        return None
    if isinstance(model, Diurnal):
        x = model._local(c, start)
        day = math.floor(x / DAY_S)
        end = start + (day * DAY_S + model.window - x)
        while end < finish:
            if model.window >= DAY_S and model._day_on(c, day + 1):  # a 24 h window: on into the next day
                day += 1
                end += DAY_S
                continue
            return end
        return None
    if isinstance(model, Trace):
        starts, ends, base, i = model._find(c, start)
        if i < 0:
            return None
        end = base + ends[i]
        return end if end < finish else None
    return None
