"""A system's state in a checkpoint: the clock, the last round's workload, the run's totals
(with the dropped candidates' costs) and the per-client counters of the current window (O(window), see `counters`), with the
profile it was taken with, so that a resumed run continues the same clock or is refused
with what differs."""

from __future__ import annotations

from typing import Any

from raycompo.errors import ConfigError
from raycompo.system.profile import used


def state(system: Any) -> dict[str, Any]:
    """Plain numbers and lists of `system` (a `simulator.System`), each part's own `state()`
    under the keys checkpoints have always had: the clock's `now` and `workload`, the
    totals' `wasted_s`, `dropped_costs`, `counters`."""
    return {"profile": system.profile.name, "profile_record": system.profile.record(),
            **system.clock.state(), **system.totals.state(),
            "dropped_costs": system.dropped_costs.state(),
            "counters": system.counters.state()}


def differences(was: Any, now: Any, path: str = "") -> list[str]:
    """The fields of two profile records that differ, as 'key X there, Y here'."""
    if isinstance(was, dict) and isinstance(now, dict):
        out = []
        for k in sorted({*was, *now}, key=lambda k: (k != "name", str(k))):  # the name first
            out += differences(was.get(k, "(none)"), now.get(k, "(none)"), f"{path}.{k}" if path else str(k))
        return out
    return [] if was == now else [f"{path} {was!r} there, {now!r} here"]


def load(system: Any, st: dict[str, Any]) -> None:
    """Continue `system` from `st` (a checkpoint's). A checkpoint taken with another profile
    is refused, naming the fields that differ: its clock is another system's."""
    here = system.profile.record()
    was = used(st.get("profile_record") or {"name": st.get("profile")})  # (a record from before `used`: the same)
    differ = differences(was, {k: here.get(k) for k in was} if "profile_record" not in st else here)
    if differ:
        shown = "; ".join(differ[:4]) + (f"; and {len(differ) - 4} more" if len(differ) > 4 else "")
        raise ConfigError(f"the checkpoint's simulated system was taken with profile {was.get('name')!r} and this run "
                          f"has profile {system.profile.name!r}, which differ: {shown}. Its clock and counters are "
                          "that profile's: resume with the profile the run was started with (config.json's "
                          "system_profile), or start a new run (another --out)")
    system.clock.load(st)
    system.totals.load(st)
    system.dropped_costs.load(st.get("dropped_costs"))
    counters = st.get("counters")
    if isinstance(counters, dict) and "events" in counters:
        system.counters.load(counters)
