"""One exchange, written once (DESIGN.md, "One exchange function"): every exchange of every run,
synchronous or asynchronous, per client or batched, inline or on Ray, goes through these
steps, in this order:

1. `send`: the payload through the downlink transforms (`--compress-down`; the driver's
   `engine/transforms.Transforms.payload`), and the encoded size of each compressed key;
2. `compute`: the pool runs the client phase; the hosts apply the uplink transforms to what
   each member returns (`compression/uplink.Uplink.steps`, in order: compress, clip, the
   user's `--uplink` steps) and count its costs;
3. `release`: the DP noise on what the server releases and the accountant told;
4. `record`: the ledger (metrics.csv's cost columns, costs.csv per key) and the listeners
   (the simulated clock, a user's `Federation.exchange_listeners`).

A closing rule decides who is waited for and when (engine/closing.py: the synchronous
round, with or without a deadline; engine/asynchronous.py: FedBuff's buffer, FedAsync), never
what is sent, counted or accounted: it calls these steps. `run` is the synchronous
composition (a round's `ctx.map` / `ctx.map_each`): all four at once. An asynchronous server
sends once per model version, computes the clients dispatched with that version, and
releases and records at the server step that applies their updates (`ExchangeCost.barrier`
False: the event loop, not the exchange, moves the clock).
"""

from __future__ import annotations

from typing import Any

from raycompo.costs.exchange import ExchangeCost
from raycompo.engine.ledger import MemberCosts, count_by_key, exchange_cost


class Exchange:
    """The steps of an exchange of the driver `fed` (a `Federation`): its pool, transforms,
    ledger and listeners."""

    def __init__(self, fed: Any):
        self.fed = fed

    # --- 1. down ---------------------------------------------------------------------
    def send(self, phase: str, round_: int, index: int, payload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
        """The payload as the members decode it, and {key: encoded bytes of one message} of
        each key sent compressed (the payload is broadcast: every member gets the same)."""
        t = self.fed.transforms
        return (payload, {}) if t is None else t.payload(phase, round_, index, payload)

    @staticmethod
    def down_sizes(payload: dict[str, Any], encoded: dict[str, int]) -> dict[str, tuple[int, int]]:
        """{key: (values, bytes)} one member receives: a compressed key's bytes are its message's."""
        down = count_by_key(payload)
        down.update({key: (down[key][0], size) for key, size in encoded.items()})
        return down

    # --- 2. the pool -----------------------------------------------------------------
    def compute(self, phase: str, round_: int, counts: dict[int, int], payload: dict[str, Any], reduce: bool,
                dispatch: int = 0, probe: bool = False) -> tuple[Any, MemberCosts]:
        """The members' contributions (summed with `reduce`, else by client) as the server
        decodes them, and each member's costs (`MemberCosts`)."""
        pool = self.fed.pool
        assert pool is not None, "the federation's pool is not started"
        return pool.map(phase, round_, counts, payload, reduce, count=True, dispatch=dispatch, probe=probe)

    # --- 3. what the server releases -------------------------------------------------------
    def release(self, phase: str, round_: int, index: int, result: Any, reduce: bool, members: int) -> Any:
        """`result` with the DP noise (on the sum, or on each member's contribution), the
        accountant told of the exchange; unchanged without DP."""
        t = self.fed.transforms
        return result if t is None else t.noise(phase, round_, index, result, reduce, members)

    # --- 4. the record -----------------------------------------------------------------
    def record(self, cost: ExchangeCost) -> None:
        """The ledger, then every listener, hear of the exchange."""
        self.fed.ledger.record(cost)
        for listener in self.fed.exchange_listeners:
            listener(cost)

    # --- the synchronous composition ---------------------------------------------------------
    def run(self, phase: str, round_: int, counts: dict[int, int], payload: dict[str, Any], reduce: bool) -> Any:
        """One exchange of server round `round_` (0-based), every step at once: what the
        server receives (the sum with `reduce`, else {client: contribution})."""
        index = self.fed.ledger.next_index(round_ + 1)
        payload, encoded = self.send(phase, round_, index, payload)
        result, members = self.compute(phase, round_, counts, payload, reduce)
        cost = exchange_cost(round_ + 1, phase, index, counts, payload, members, encoded)
        result = self.release(phase, round_, index, result, reduce, len(counts))
        self.record(cost)
        return result
