"""The event queue of an asynchronous federation (issue 31): who is in flight, in which
order updates arrive, and who fills a freed slot. Pure Python, no model, no torch.

Time moves only by events taken from one heap (SimPy's rule). An event is
(time, kind, seq, client, version):

* kind ARRIVAL (0): the update of the client dispatched as number `seq` arrives (or, with
  `lost`, its client went offline before it finished: its slot frees at that time);
* kind DISPATCH (1): a freed slot is filled at `time`.

The heap orders by (time, kind, seq): at equal times arrivals come before dispatches, and
arrivals in dispatch order; so a client dispatched at the instant of a server step gets
the new model. Each push and pop is O(log C) for C clients in flight; nothing is a
structure of the n clients (the in-flight set holds C ids).

A freed slot is filled by a client drawn uniformly (keyed by (seed, dispatch number,
attempt)) among those online and not in flight; after `draw_cap(C)` rejected draws the
earliest check-in among the offline ones drawn fills it at that later time.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from raycompo.errors import ConfigError
from raycompo.system import draws

ARRIVAL = 0
DISPATCH = 1
DISPATCH_DRAW = 11
"""Purpose of the dispatch draws (raycompo/system/draws.py: apart from the system's others)."""
SCAN_MAX = 1_000_000
"""A population at most this large is scanned for a free client when draws keep hitting
clients in flight (C close to n): O(n) then, rare, and never at 10^7 clients."""


def draw_cap(concurrency: int) -> int:
    """Draws tried for one slot before falling back to the earliest check-in."""
    return 20 * concurrency + 100


@dataclass(order=True)
class Event:
    """One entry of the heap, ordered by (time, kind, seq)."""

    time: float
    kind: int
    seq: int
    client: int = field(compare=False, default=-1)
    """The client (ARRIVAL; a reserved DISPATCH); -1: a DISPATCH still to draw."""
    version: int = field(compare=False, default=-1)
    """ARRIVAL: the model version the client downloaded."""
    lost: bool = field(compare=False, default=False)
    """ARRIVAL: the client went offline before finishing; its update never arrives."""
    start: float = field(compare=False, default=0.0)
    """ARRIVAL: when the client was dispatched (its device-seconds so far: time - start)."""

    def row(self) -> list[Any]:
        return [self.time, self.kind, self.seq, self.client, self.version, self.lost, self.start]


class Queue:
    """The heap of events, the in-flight set and the dispatch counter; `state()` /
    `load()` are plain lists for checkpoints."""

    def __init__(self) -> None:
        self.heap: list[Event] = []
        self.in_flight: set[int] = set()
        """Clients dispatched (or reserved for a later check-in) and not yet arrived or lost."""
        self.next_seq = 0
        """Number of the next dispatch (and of the next slot request)."""
        self.now = 0.0

    def push(self, e: Event) -> None:
        heapq.heappush(self.heap, e)

    def pop(self) -> Event:
        e = heapq.heappop(self.heap)
        self.now = max(self.now, e.time)
        return e

    def peek(self) -> Event | None:
        return self.heap[0] if self.heap else None

    def request_slot(self, t: float) -> None:
        """A slot is free at time t: a DISPATCH event (processed after any arrival at t)."""
        self.push(Event(t, DISPATCH, self.take_seq()))

    def take_seq(self) -> int:
        s = self.next_seq
        self.next_seq += 1
        return s

    def arrivals_in_flight(self) -> int:
        return len(self.in_flight)

    def state(self) -> dict[str, Any]:
        return {"heap": [e.row() for e in sorted(self.heap)], "in_flight": sorted(self.in_flight),
                "next_seq": self.next_seq, "now": self.now}

    def load(self, state: dict[str, Any]) -> None:
        self.heap = [Event(float(t), int(k), int(s), int(c), int(v), bool(lost), float(st))
                     for t, k, s, c, v, lost, st in state["heap"]]
        heapq.heapify(self.heap)
        self.in_flight = {int(c) for c in state["in_flight"]}
        self.next_seq, self.now = int(state["next_seq"]), float(state["now"])


def draw_client(seed_prefix: int, seq: int, t: float, population: list[int] | None, n_clients: int,
                in_flight: set[int], online: Callable[[int, float], bool],
                next_online: Callable[[int, float], float | None], cap: int) -> tuple[int, float]:
    """(client, start time) for dispatch number `seq` at time t: uniform draws keyed by
    (seed, seq, attempt) among the population, rejecting clients in flight and offline;
    after `cap` draws, the earliest check-in among the offline ones drawn (start > t).
    ConfigError when no free client is ever online."""
    size = n_clients if population is None else len(population)
    offline: list[int] = []
    seen: set[int] = set()
    for i in range(cap):
        h = draws.index(seed_prefix, size, seq, i)
        c = h if population is None else population[h]
        if c in in_flight or c in seen:
            continue
        seen.add(c)
        if online(c, t):
            return c, t
        offline.append(c)
    if not offline and size <= SCAN_MAX:  # C close to n: the few free clients, found by a scan
        free = [c for c in (range(n_clients) if population is None else population) if c not in in_flight]
        if free:
            c = free[draws.index(seed_prefix, len(free), seq, cap)]
            if online(c, t):
                return c, t
            offline.append(c)
    later = sorted((nt, c) for c in offline if (nt := next_online(c, t)) is not None)
    if not later:
        raise ConfigError(f"no client that is not in flight is ever online after simulated time {t:.0f} s "
                          f"({len(in_flight)} in flight): lower --concurrency or check the availability section")
    nt, c = later[0]
    return c, nt
