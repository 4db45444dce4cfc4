"""The cost ledger: what every exchange of a run cost, counted from the engine contract.

An exchange is one `ctx.map` / `ctx.map_each` of a server round (evaluation is not
communication: `Federation.evaluate` and the maps an algorithm's `global_metrics` makes
are not counted). For each one the driver builds a `costs.ExchangeCost`, per member of
the cohort, as the protocol would send it (not as hosts pre-reduce contributions):

* values down: every tensor element and every Python number of the payload, once per
  member (a member drawn twice receives the payload once and works twice);
* values up: the same count of the member's contribution, times its multiplicity;
* bytes: each tensor element at its dtype's size (float32 4, float64 8, int64 8, ...),
  a Python number (bool, int, float) as 8 bytes; strings and None are not values;
* samples: the data points the member drew (`ClientData.batch` / `outer_batch` / `take`,
  full-batch reads, `CohortBatch.batch`), multiplicity included;
* oracle calls: the function, gradient, Jacobian and Hessian-vector evaluations on one data
  point each that the member's phase made, counted where the task's oracles are evaluated
  (raycompo/problems/oracle.py), multiplicity included.

Hosts count their members' contributions and samples where they run them
(`MemberCosts`): O(m) per exchange, from tensor shapes only, never their
data. The `Ledger` keeps the cumulative totals (the metrics.csv columns `samples`, `oracle_calls`,
`values_up`, `values_down`, `bytes_up`, `bytes_down`, `exchanges`), which survive
checkpoints, and the per-key breakdown of the round in progress: `close_round` hands a
round's rows out (the run loop appends them to the run folder's `costs.csv`) and keeps
only their count, so that its checkpointed state does not grow with the rounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from raycompo.algorithms.client_rows import Shares
from raycompo.costs.exchange import BREAKDOWN_COLUMNS, LEDGER_COLUMNS, ExchangeCost

NUMBER_BYTES = 8
"""Bytes of a Python number (bool, int, float) in a payload or contribution: 64 bits."""

COLUMNS = LEDGER_COLUMNS
"""The cumulative cost columns of metrics.csv, in order (named once, in `raycompo.costs.exchange`)."""


def count_values(obj: Any) -> tuple[int, int]:
    """(values, bytes) of a payload or contribution: tensor elements at their dtype's size,
    Python numbers at NUMBER_BYTES, nested dicts / lists / tuples summed. Reads shapes and
    dtypes only."""
    if isinstance(obj, torch.Tensor):
        n = obj.numel()
        return n, n * obj.element_size()
    if isinstance(obj, (bool, int, float)):
        return 1, NUMBER_BYTES
    if isinstance(obj, Shares):  # the clients' entries, as a dict of them counts (not its addressing)
        return count_values(obj.values)
    if isinstance(obj, dict):
        obj = obj.values()
    elif not isinstance(obj, (list, tuple)):
        return 0, 0  # a string, None, ...: not a value
    values = size = 0
    for v in obj:
        a, b = count_values(v)
        values += a
        size += b
    return values, size


def count_by_key(obj: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """{key: (values, bytes)} of a payload or contribution (nested values under their
    top-level key)."""
    return {str(k): count_values(v) for k, v in obj.items()}


def samples_read(data: Any) -> int:
    """The training samples a client's data object has handed out so far (its
    `samples_read` counter; 0 for a data object without one)."""
    return int(getattr(data, "samples_read", 0))


def samples_read_many(datas: list[Any]) -> list[int]:
    """`samples_read` of each data object, read as plain attributes (no call per client)
    where they all have the counter."""
    try:
        return [d.samples_read for d in datas]
    except AttributeError:
        return [samples_read(d) for d in datas]


MemberSizes = dict[str, tuple["int | np.ndarray", "int | np.ndarray"]]
"""A batched chunk's {key: (values, bytes)} of one member's contribution: numbers shared by
every member, or (k,) arrays where each has its own (a `Shares`' lengths)."""


@dataclass
class MemberCosts:
    """What a host returns besides its (pre-reduced) contributions: per member it ran,
    aligned lists, and its per-key totals of values up (multiplicity included)."""

    clients: list[int] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)
    oracle_calls: list[int] = field(default_factory=list)
    values_up: list[int] = field(default_factory=list)
    bytes_up: list[int] = field(default_factory=list)
    by_key: dict[str, list[int]] = field(default_factory=dict)
    """{key: [values, bytes]} summed over this host's members."""
    encoded: dict[int, dict[str, int]] = field(default_factory=dict)
    """{client: {key: bytes of one message}} of the keys sent compressed (`--compress`):
    what a caller that records each member apart (the asynchronous path) needs, since a
    member's contribution as returned is the decoded one. Empty without compression."""

    def add(self, cid: int, mult: int, samples: int, per_key: dict[str, tuple[int, int]], oracle_calls: int = 0,
            encoded: dict[str, int] | None = None) -> None:
        """Member `cid` (drawn `mult` times) read `samples` and made `oracle_calls` (all its
        work, multiplicity included) and returned one contribution of `per_key` (values,
        bytes) per key; `encoded`: the keys of those bytes that are compressed messages."""
        if encoded:
            self.encoded[cid] = encoded
        values = size = 0
        for key, (v, b) in per_key.items():
            values += v
            size += b
            acc = self.by_key.get(key)
            if acc is None:
                self.by_key[key] = [v * mult, b * mult]
            else:
                acc[0] += v * mult
                acc[1] += b * mult
        self.clients.append(cid)
        self.samples.append(samples)
        self.oracle_calls.append(oracle_calls)
        self.values_up.append(values * mult)
        self.bytes_up.append(size * mult)

    def add_many(self, cids: list[int], mults: list[int], samples: list[int],
                 per_key: MemberSizes | list[dict[str, tuple[int, int]]], oracle_calls: list[int],
                 encoded: dict[str, list[int]] | None = None) -> None:
        """`add` for k members at once (a batched chunk): `samples` and `oracle_calls` per
        member (multiplicity included), `per_key` one contribution's (values, bytes) per key
        (numbers shared by all or (k,) arrays, `MemberSizes`; or a list of each member's
        dict), `encoded` {key: each member's bytes of that key's compressed message}
        (replacing the key's bytes). Without a list, a constant number of Python calls
        whatever k."""
        encoded = encoded or {}
        if isinstance(per_key, list):  # each member's own sizes: one by one
            for i, cid in enumerate(cids):
                mine = {key: sizes[i] for key, sizes in encoded.items()}
                sizes = {**per_key[i], **{key: (per_key[i][key][0], b) for key, b in mine.items()}}
                self.add(cid, mults[i], samples[i], sizes, oracle_calls[i], mine)
            return
        m = np.asarray(mults, dtype=np.int64)
        values = np.zeros(len(cids), dtype=np.int64)
        size = np.zeros(len(cids), dtype=np.int64)
        for key, (v, b) in per_key.items():
            b = np.asarray(encoded[key] if key in encoded else b, dtype=np.int64)
            values += v
            size += b
            acc = self.by_key.setdefault(key, [0, 0])
            acc[0] += int((m * v).sum())
            acc[1] += int((m * b).sum())
        if encoded:  # each member's compressed keys (a dict each: with compression only)
            keys = list(encoded)
            self.encoded.update(zip(cids, [dict(zip(keys, row)) for row in zip(*encoded.values())]))
        self.clients += cids
        self.samples += samples
        self.oracle_calls += oracle_calls
        self.values_up += (m * values).tolist()
        self.bytes_up += (m * size).tolist()

    def merge(self, other: MemberCosts) -> None:
        """Append another host's members (disjoint from these)."""
        self.clients += other.clients
        self.samples += other.samples
        self.oracle_calls += other.oracle_calls
        self.values_up += other.values_up
        self.bytes_up += other.bytes_up
        for key, (v, b) in other.by_key.items():
            acc = self.by_key.setdefault(key, [0, 0])
            acc[0] += v
            acc[1] += b
        self.encoded.update(other.encoded)


def exchange_cost(round_: int, phase: str, index: int, counts: dict[int, int], payload: dict[str, Any],
                  members: MemberCosts, encoded: dict[str, int] | None = None) -> ExchangeCost:
    """The record of one exchange: the hosts' `members` (any order) sorted by client id,
    with the payload's values down (the same for every member; a key sent compressed,
    `encoded`, at its message's bytes)."""
    order = sorted(range(len(members.clients)), key=members.clients.__getitem__)
    clients = [members.clients[i] for i in order]
    down = count_by_key(payload)
    down.update({key: (down[key][0], size) for key, size in (encoded or {}).items()})
    vdown = sum(v for v, _ in down.values())
    bdown = sum(b for _, b in down.values())
    k = len(clients)
    by_key = {f"down:{key}": {"values": v * k, "bytes": b * k} for key, (v, b) in down.items()}
    by_key.update({f"up:{key}": {"values": v, "bytes": b} for key, (v, b) in members.by_key.items()})
    return ExchangeCost(
        round=round_, phase=phase, index=index, clients=clients,
        multiplicity=[counts[c] for c in clients],
        samples=[members.samples[i] for i in order],
        values_down=[vdown] * k, values_up=[members.values_up[i] for i in order],
        bytes_down=[bdown] * k, bytes_up=[members.bytes_up[i] for i in order],
        by_key=by_key, oracle_calls=[members.oracle_calls[i] for i in order],
    )


def member_cost(costs: MemberCosts, i: int, contribution: dict[str, Any], down: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """Member i of `costs` alone (an asynchronous client's update, recorded when it arrives):
    samples, oracle calls, values and bytes up, and {key: (values, bytes)} down and up (a
    key sent compressed at its message's bytes)."""
    c = costs.clients[i]
    up = count_by_key(contribution)  # the decoded contribution: a compressed key's bytes are its message's
    up.update({key: (up[key][0], size) for key, size in costs.encoded.get(c, {}).items()})
    return {"samples": costs.samples[i], "oracle_calls": costs.oracle_calls[i] if costs.oracle_calls else 0,
            "values_up": costs.values_up[i], "bytes_up": costs.bytes_up[i], "down": down, "up": up}


def arrivals_cost(round_: int, phase: str, index: int, members: list[tuple[int, dict[str, Any]]]) -> ExchangeCost:
    """The record of an asynchronous server step: each (client, `member_cost`) whose update
    arrived in it (a client that arrived twice counts twice), not a barrier."""
    by_client: dict[int, list[int]] = {}  # mult, samples, calls, values / bytes down, values / bytes up
    by_key: dict[str, dict[str, int]] = {}
    for c, cost in members:
        acc = by_client.setdefault(c, [0] * 7)
        down = [sum(v for v, _ in cost["down"].values()), sum(b for _, b in cost["down"].values())]
        for j, v in enumerate([1, cost["samples"], cost["oracle_calls"], *down, cost["values_up"], cost["bytes_up"]]):
            acc[j] += v
        for direction in ("down", "up"):
            for key, (v, b) in cost[direction].items():
                k = by_key.setdefault(f"{direction}:{key}", {"values": 0, "bytes": 0})
                k["values"] += v
                k["bytes"] += b
    clients = sorted(by_client)
    col = [[by_client[c][j] for c in clients] for j in range(7)]
    return ExchangeCost(round=round_, phase=phase, index=index, clients=clients, multiplicity=col[0], samples=col[1],
                        values_down=col[3], values_up=col[5], bytes_down=col[4], bytes_up=col[6], by_key=by_key,
                        oracle_calls=col[2], barrier=False)


class Ledger:
    """Cumulative costs of a run: the totals (`COLUMNS`) and the per-key values and bytes in
    each direction of the round in progress (handed out by `close_round`). Its `state()`
    goes into checkpoints."""

    def __init__(self) -> None:
        self.totals: dict[str, int] = dict.fromkeys(COLUMNS, 0)
        self.closed_rows = 0
        """How many breakdown rows the closed rounds had (costs.csv holds them, not the
        ledger): a resume checks the file against it."""
        self._open: dict[tuple[int, str, str], list[int]] = {}
        self._next_index: dict[int, int] = {}

    def next_index(self, round_: int) -> int:
        """The 0-based position within round `round_` of its next exchange."""
        return self._next_index.get(round_, 0)

    def record(self, cost: ExchangeCost) -> None:
        """Add one exchange to the totals and the per-key breakdown."""
        t = self.totals
        t["samples"] += sum(cost.samples)
        t["oracle_calls"] += sum(cost.oracle_calls)
        t["values_up"] += sum(cost.values_up)
        t["values_down"] += sum(cost.values_down)
        t["bytes_up"] += sum(cost.bytes_up)
        t["bytes_down"] += sum(cost.bytes_down)
        t["exchanges"] += 1
        self._next_index[cost.round] = cost.index + 1
        for name, amount in cost.by_key.items():
            direction, key = name.split(":", 1)
            acc = self._open.get((cost.round, direction, key))
            if acc is None:
                acc = self._open[(cost.round, direction, key)] = [0, 0]
            acc[0] += amount["values"]
            acc[1] += amount["bytes"]

    def close_round(self, round_: int) -> list[dict[str, Any]]:
        """Round `round_`'s per-key sums (called once the round ended), as breakdown rows
        {round, direction, key, values, bytes} sorted by direction and key; the caller
        writes them (costs.csv), the ledger only counts them (`closed_rows`)."""
        rows = [dict(zip(BREAKDOWN_COLUMNS, (r, direction, key, v, b)))
                for (r, direction, key), (v, b) in sorted(self._open.items()) if r == round_]
        self.closed_rows += len(rows)
        self._open = {k: v for k, v in self._open.items() if k[0] != round_}
        self._next_index.pop(round_, None)
        return rows

    def columns(self) -> dict[str, int]:
        """The cumulative columns of a metrics row."""
        return dict(self.totals)

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps: the totals and the number of breakdown rows written so
        far (not the rows: the state's size does not grow with the rounds)."""
        return {"totals": dict(self.totals), "breakdown_rows": self.closed_rows}

    def load(self, state: dict[str, Any], round_: int) -> None:
        """Continue from a checkpoint's `state()` taken at round `round_` (a checkpoint from
        before costs.csv was written per round holds the rows themselves: they are counted)."""
        self.totals = {c: int(state["totals"].get(c, 0)) for c in COLUMNS}
        if "rows" in state:
            self.closed_rows = sum(1 for r in state["rows"] if int(r[0]) <= round_)
        else:
            self.closed_rows = int(state.get("breakdown_rows", 0))
        self._open, self._next_index = {}, {}
