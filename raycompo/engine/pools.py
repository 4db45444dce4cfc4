"""Host pools: where client hooks run. Both offer `map(phase, round, counts, payload, reduce)`.

`counts` maps client id -> multiplicity in the cohort (a client drawn twice counts twice).
"""

from __future__ import annotations

import math
from typing import Any

from raycompo.config import RunConfig
from raycompo.engine.host import Host, add_into


def combine(parts: list[dict[str, Any]], reduce: bool) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for p in parts:
        if reduce:
            add_into(out, p)
        else:
            out.update(p)
    return out


class InlinePool:
    """All clients in one Host in this process: sequential, the reference backend."""

    def __init__(self, cfg: RunConfig, n_clients: int):
        self.host = Host(cfg, list(range(n_clients)))
        self.host.ready()

    def map(self, phase: str, round_: int, counts: dict[int, int], payload: dict[str, Any], reduce: bool = True):
        items = sorted(counts.items())
        return combine([self.host.map(phase, round_, items, payload, reduce)], reduce)

    def client_state(self, cid: int) -> dict[str, Any]:
        return self.host.client_state(cid)

    def close(self) -> None:
        self.host = None  # type: ignore[assignment]


def placement(n_clients: int, clients_per_actor: int) -> list[list[int]]:
    """Contiguous blocks of client ids, one block per host actor."""
    n_hosts = math.ceil(n_clients / clients_per_actor)
    return [list(range(j * clients_per_actor, min(n_clients, (j + 1) * clients_per_actor))) for j in range(n_hosts)]
