"""What one exchange between the server and its clients cost, client by client.

An exchange is one `ctx.map` (or `ctx.map_each`) of a server round: the server sends a
payload to every member of a cohort, each member runs a client phase and returns its
contribution. The engine's ledger (`raycompo.engine.ledger`) records one `ExchangeCost`
per exchange, counted as the protocol would send it (every member receives the whole
payload and returns its whole contribution; not as hosts pre-reduce them), and the
simulated system's clock (`raycompo.system`) turns each record into simulated seconds.

This module sits at the bottom of the package (it imports nothing of raycompo) so that
both the engine, which produces the records, and the system model below it, which reads
them, can name the type; and it holds the one list of the cost columns (`LEDGER_COLUMNS`,
`SYSTEM_COLUMNS` with its `DROPPED_COLUMNS`), which the ledger, the simulated system, the
budget and the cost axes all read, so that a column is named in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

LEDGER_COLUMNS = ("samples", "oracle_calls", "values_up", "values_down", "bytes_up", "bytes_down", "exchanges")
"""The ledger's cumulative cost columns of metrics.csv, in order (every run; docs/costs.md)."""

DROPPED_COLUMNS = ("dropped_bytes_down", "dropped_bytes_up", "dropped_samples", "dropped_oracle_calls")
"""What the dropped candidates of the synchronous rounds cost, cumulative, shown apart from
the ledger's columns (which count the cohort's exchanges only): bytes received and sent,
samples drawn and oracle calls made until each stopped (`raycompo.system.dropped`;
docs/costs.md). Floats: work in progress when a candidate stopped counts in proportion."""

SYSTEM_COLUMNS = ("sim_time", "dropped", "wasted_s") + DROPPED_COLUMNS
"""The simulated system's columns of metrics.csv, after the ledger's (only with --system;
docs/system.md): cumulative simulated seconds, clients selected but not used this round,
cumulative device-seconds of work thrown away, then what that work received, sent and
computed (`DROPPED_COLUMNS`)."""

PRIVACY_COLUMNS = ("epsilon",)
"""Client-level DP's column of metrics.csv, last (only with --dp-clip; docs/compression.md):
the cumulative privacy loss epsilon at --dp-delta."""

COST_COLUMNS = LEDGER_COLUMNS + SYSTEM_COLUMNS + PRIVACY_COLUMNS
"""Every cost column a row may hold: what a budget, a cost axis or a plot may name."""

CUMULATIVE_COLUMNS = LEDGER_COLUMNS + ("sim_time",) + DROPPED_COLUMNS + ("epsilon",)
"""The cost columns that only grow over a run: those a budget may limit."""

BREAKDOWN_COLUMNS = ("round", "direction", "key", "values", "bytes")
"""The columns of the ledger's per-key breakdown by round (the run folder's costs.csv)."""

BREAKDOWN_KEY = "_costs"
"""The key under which a round's row carries its breakdown rows (dicts of
`BREAKDOWN_COLUMNS`) to the run loop, which takes them out of the row before any observer
sees it and hands them to `Observer.on_costs` (they are not metrics.csv columns)."""


@dataclass
class ExchangeCost:
    """One exchange (one `ctx.map`): per member of the cohort, what it received, returned
    and read. All per-member lists are aligned with `clients`."""

    round: int
    """The round being run, 1-based: the `round` of the metrics.csv row it is counted in."""
    phase: str
    """The client phase the exchange ran (e.g. 'local', 'inner')."""
    index: int
    """0-based position of this exchange within its round (FedDRO: 0 .. I)."""
    clients: list[int]
    """The members, each once, sorted by client id."""
    multiplicity: list[int]
    """How many times each member was drawn (a client drawn twice works twice)."""
    samples: list[int]
    """Data points each member drew in this exchange (the papers' sample complexity; a task
    of a meta-batch on the meta-learning tasks), multiplicity included."""
    values_down: list[int]
    """Real values each member received (the payload's tensor elements and numbers)."""
    values_up: list[int]
    """Real values each member returned (its contribution), multiplicity included."""
    bytes_down: list[int]
    """`values_down` in bytes, each value at its dtype's size."""
    bytes_up: list[int]
    """`values_up` in bytes."""
    by_key: dict[str, dict[str, int]] = field(default_factory=dict)
    """Totals over the members by payload / contribution key:
    {'down:<key>' | 'up:<key>': {'values': ..., 'bytes': ...}}."""
    oracle_calls: list[int] = field(default_factory=list)
    """Oracle calls each member made in this exchange, multiplicity included: each function,
    gradient, Jacobian or Hessian-vector evaluation on one data point is one call (a
    stochastic gradient by backpropagation is two: its forward and its backward pass),
    counted where the task's oracles are evaluated (raycompo/problems/oracle.py). The work
    a device computes; empty where a record was built without it (then read `samples`)."""
    barrier: bool = True
    """True: a synchronous exchange, which the server closes when its last member finishes
    (the simulated clock moves by it). False: an asynchronous server step's arrivals, each at
    its own time on the event clock (engine/asynchronous.py), which moved the clock already."""

    @property
    def size(self) -> int:
        """Number of distinct members."""
        return len(self.clients)
