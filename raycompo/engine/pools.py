"""Pools: where client phases run. Every backend's pool implements `Pool`.

`counts` maps client id -> multiplicity in the cohort (a client drawn twice counts twice).
A pool also owns its clients' persistent states: `client_states` gathers them (for a
checkpoint) and `load_client_states` puts them back (resume, recovery).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from raycompo.algorithms.base import State
from raycompo.algorithms.client_rows import ClientRows
from raycompo.configuration.config import Resolved
from raycompo.engine.host import Host, add_into


@runtime_checkable
class Pool(Protocol):
    """The engine's one contract with a backend."""

    n_clients: int

    def map(self, phase: str, round_: int, counts: dict[int, int], payload: dict[str, Any], reduce: bool = True,
            count: bool = False, dispatch: int = 0, probe: bool = False) -> Any:
        """reduce: the float64 sum over clients (with multiplicity) of the phase's
        contributions; otherwise each client's contribution, a `ClientRows` (a Mapping
        {client id: contribution}; a {client id: contribution} dict is taken too). `count`: `(that, MemberCosts)`,
        the members' samples read and contribution sizes (engine/ledger.py). `dispatch`:
        the members' repeat number at this model version; `probe`: the answer without any
        client's state moving (`Host.map`)."""
        ...

    def client_state(self, cid: int) -> State: ...

    def client_states(self) -> dict[int, State]: ...

    def load_client_states(self, states: dict[int, State]) -> None: ...

    def stats(self) -> dict[str, Any]:
        """Counters since the start: `host_busy_max_s`, `host_busy_mean_s`, `host_busy_s`
        ({host name: seconds in client phases}) and, where payloads travel, `bytes_sent`."""
        ...

    def close(self) -> None: ...


def combine(parts: list[Any], reduce: bool) -> Any:
    """The hosts' answers as one: the sum of their sums (reduce), else every member's
    contribution (`ClientRows`, the hosts' parts in order)."""
    if not reduce:
        return ClientRows.merge(parts)
    out: dict[Any, Any] = {}
    for p in parts:
        add_into(out, p)
    return out


class InlinePool:
    """All clients in one Host in this process: sequential, the reference backend. `data_from`:
    hosts whose client data this one reads where they are the same (`Host.ready`)."""

    def __init__(self, resolved: Resolved, data_from: list[Host] | None = None):
        self.n_clients = resolved.n_clients
        self.host = Host(resolved, range(self.n_clients), state_budget_bytes=resolved.config.state_budget_bytes())
        self.host.ready(data_from)

    def map(self, phase: str, round_: int, counts: dict[int, int], payload: dict[str, Any], reduce: bool = True,
            count: bool = False, dispatch: int = 0, probe: bool = False) -> Any:
        items = sorted(counts.items())
        if count:
            result, costs = self.host.map(phase, round_, items, payload, reduce, True, dispatch, probe)
            return combine([result], reduce), costs
        return combine([self.host.map(phase, round_, items, payload, reduce, False, dispatch, probe)], reduce)

    def client_state(self, cid: int) -> State:
        return self.host.client_state(cid)

    def client_states(self) -> dict[int, State]:
        return self.host.client_states()

    def load_client_states(self, states: dict[int, State]) -> None:
        self.host.load_client_states(states)

    def stats(self) -> dict[str, Any]:
        busy = self.host.busy_seconds
        return {"host_busy_max_s": busy, "host_busy_mean_s": busy, "host_busy_s": {"inline": busy}}

    def close(self) -> None:
        if self.host is not None:
            self.host.close()
        self.host = None  # type: ignore[assignment]
