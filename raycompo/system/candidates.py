"""Drawing a round's candidates among the online clients, in O(m), never a scan of the n.

Candidates are drawn uniformly with replacement, keyed by (seed, round, stream, attempt,
i), a repeat skipped, and the offline ones rejected, until k are online (at most
`20 k + 100` draws). The keyed draws and the availability look-ups run a batch at a time
in numpy (`draws.indices`, `AvailabilityModel.online_many`), then are taken in order of i:
the same candidates as one draw at a time, for a fraction of the time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from raycompo.errors import ConfigError
from raycompo.system import draws
from raycompo.system.availability import AvailabilityModel

BIG = 64
"""A population of at least BIG times the draws' cap takes the numpy path (a repeat is rare;
`len(seen) < size` always holds)."""


@dataclass
class Drawn:
    """The outcome of one draw of candidates."""

    candidates: list[int]
    """k online candidates (or fewer online and the first to check in after them)."""
    start: float
    """When the last of them is online (the draw's time when all were)."""
    drawn: list[int] = field(default_factory=list)
    """Every distinct client looked at, in order."""
    online: list[int] = field(default_factory=list)
    """Those found online at the draw's time."""


def draw_candidates(availability: AvailabilityModel, pre: int, n_clients: int, k: int, m: int, t: float,
                    key: tuple[int, int, int], profile: str) -> Drawn:
    """k candidates online at t (`key` = (round, stream, attempt)); when fewer of the drawn
    are online, the earliest check-ins among the first offline ones drawn fill the rest
    (bounded work per round) and the draw starts when the last of them is online."""
    pop = availability.population
    size = n_clients if pop is None else len(pop)
    cap = 20 * k + 100
    if pop is None and size >= BIG * cap:  # a large population: each batch taken in numpy
        drawn, online, offline = _draw_large(availability, pre, size, k, t, key, cap)
    else:
        drawn, online, offline = _draw_small(availability, pop, pre, size, k, t, key, cap)
    if len(online) >= k:
        return Drawn(online, t, drawn, online)
    later = sorted((nt, c) for c in offline[: 2 * k + 10] if (nt := availability.next_online(c, t)) is not None)
    if len(online) + len(later) < m:
        raise ConfigError(
            f"system profile {profile!r}: round {key[0]} needs {m} clients, but of the {len(drawn)} drawn at "
            f"simulated time {t:.0f} s only {len(online) + len(later)} are ever online (no client is online often "
            "enough). Check the availability section (p, online_hours, p_day, the trace)")
    fill = later[: k - len(online)]
    return Drawn(online + [c for _, c in fill], fill[-1][0] if fill else t, drawn, online)


def _draw_small(availability: AvailabilityModel, pop: list[int] | None, pre: int, size: int, k: int, t: float,
                key: tuple[int, int, int], cap: int) -> tuple[list[int], list[int], list[int]]:
    """`draw_candidates`' loop, one draw at a time (a batch of keyed draws computed at once):
    (the distinct clients looked at in order, the online ones, the offline ones)."""
    online: list[int] = []
    offline: list[int] = []
    drawn: list[int] = []
    seen: set[int] = set()
    i = 0
    while len(online) < k and i < cap and len(seen) < size:
        batch = min(cap - i, max(2 * (k - len(online)) + 16, 32))
        drawn_ids = draws.indices(pre, size, i, batch, *key).tolist()
        cs = drawn_ids if pop is None else [pop[h] for h in drawn_ids]
        for c, is_on in zip(cs, availability.online_many(cs, t)):
            i += 1
            if c in seen:
                continue
            seen.add(c)
            drawn.append(c)
            (online if is_on else offline).append(c)
            if len(online) >= k or len(seen) >= size:
                break
    return drawn, online, offline


def _draw_large(availability: AvailabilityModel, pre: int, size: int, k: int, t: float,
                key: tuple[int, int, int], cap: int) -> tuple[list[int], list[int], list[int]]:
    """`draw_candidates`' loop for a population of at least BIG * cap, a batch of keyed draws
    at a time in numpy: (the distinct clients looked at in order, the online ones, the
    offline ones: listed only when fewer than k are online, the one case that reads them).
    The same clients as one draw at a time: a repeat is skipped, and the batch is cut after
    the k-th online one."""
    took: list[np.ndarray] = []
    took_on: list[np.ndarray] = []
    n_online = i = 0
    while n_online < k and i < cap:
        batch = min(cap - i, 8 * (k - n_online) + 32)
        ids = draws.indices(pre, size, i, batch, *key)
        on = availability.online_array(ids, t)
        hits = np.flatnonzero(on)  # positions of the online ones
        need = k - n_online
        # a repeat matters only up to the k-th online draw (the batch is cut after it)
        end = int(hits[need - 1]) + 1 if len(hits) >= need else batch
        ordered = np.sort(ids[:end])
        at = None
        if took or bool((ordered[1:] == ordered[:-1]).any()):  # a repeat possible: keep each first draw
            first = np.zeros(batch, dtype=bool)
            first[np.unique(ids, return_index=True)[1]] = True
            if took:
                first &= ~np.isin(ids, np.concatenate(took))
            at = np.flatnonzero(first)
            ids, on = ids[at], on[at]
            hits = np.flatnonzero(on)
        if len(hits) >= need:  # the k-th online one is in this batch: stop after it
            j = int(hits[need - 1])
            ids, on = ids[: j + 1], on[: j + 1]
            i += (j if at is None else int(at[j])) + 1
            n_online = k
        else:
            i += batch
            n_online += len(hits)
        took.append(ids)
        took_on.append(on)
    ids = took[0] if len(took) == 1 else np.concatenate(took)
    on = took_on[0] if len(took) == 1 else np.concatenate(took_on)
    online = ids[on].tolist()
    return ids.tolist(), online, ([] if len(online) >= k else ids[~on].tolist())
