"""The driver: owns the global model and the round loop.

One round:
  1. the algorithm's `server_round` samples cohorts and calls client hooks through the
     pool (inline, or Ray host actors), receiving pre-reduced sums, and applies the
     server rule;
  2. every `eval_every` rounds every client evaluates the new global model on its data;
  3. the driver turns per-client metrics into a row: means over clients, the worst
     client (lowest accuracy, highest loss), the task's pooled metrics (e.g. rates
     over all evaluated clients' data) and the spread over clients (std, percentiles);
     the per-client values travel on with the row (raycompo/watch/per_client.py).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch

from raycompo.algorithms.client_rows import ClientRows
from raycompo.configuration.config import Resolved, RunConfig, resolve
from raycompo.costs.budget import Budget, check_budget
from raycompo.costs.exchange import BREAKDOWN_KEY, ExchangeCost
from raycompo.engine.asynchronous import AsyncServer
from raycompo.engine.closing import ClosingRule, SyncRounds
from raycompo.engine.exchange import Exchange
from raycompo.engine.ledger import Ledger
from raycompo.engine.pool_factory import make_pool
from raycompo.engine.pools import Pool
from raycompo.engine.transforms import Transforms
from raycompo.errors import ConfigError
from raycompo.seeding import SERVER, generator
from raycompo.system import make_system
from raycompo.system.event_log import EVENTS_KEY, EventLog
from raycompo.watch.per_client import (
    CLIENTS_KEY,
    N_SAMPLES_KEY,
    ClientColumns,
    ClientMetrics,
    spread,
)

EVAL_STREAM = 99
"""Server random stream of the evaluation sample (apart from the algorithms' streams)."""


RANDPERM_MAX_CLIENTS = 2**16
"""Cohort draws over at most this many clients (or of more than half of them) use
`torch.randperm(n)`, O(n): the draws every run and reproduction so far was made with.
Larger populations use an O(m) draw (`draw_cohort`)."""


def draw_cohort(n: int, m: int, gen: torch.Generator, randperm_max: int = RANDPERM_MAX_CLIENTS) -> list[int]:
    """m distinct client ids of range(n), uniformly, sorted; seeded by `gen` alone.

    n <= randperm_max, or m > n / 2: the first m of `torch.randperm(n)` (O(n) time and
    memory: 0.3 s per draw at n = 10^7). Otherwise O(m): ids drawn with replacement, a
    repeat discarded, until m distinct ones (the first m distinct of an i.i.d. uniform
    sequence are a uniform m-subset; at m <= n / 2 that takes fewer than 1.4 m draws on
    average). Each id is a uniform 62-bit integer mod n (bias below n / 2^62;
    `torch.randint(n)` itself takes 32-bit integers mod n for n < 2^32, a bias of n / 2^32).
    Different draws than randperm's for the same seed, hence the threshold.
    """
    if m >= n:
        return list(range(n))
    if n <= randperm_max or 2 * m > n:
        return sorted(torch.randperm(n, generator=gen)[:m].tolist())
    chosen: set[int] = set()
    while len(chosen) < m:  # each draw adds at most one id: never more than m
        chosen.update((torch.randint(2**62, (m - len(chosen),), generator=gen) % n).tolist())
    return sorted(chosen)


class RoundCtx:
    """What `server_round` sees (implements algorithms.base.RoundContext). With `counted`
    (a server round's context), every `map` / `map_each` is an exchange: recorded in the
    federation's ledger and passed to its `exchange_listeners` (engine/ledger.py), and
    cohorts are chosen by the simulated system (`Federation.system`); evaluation's contexts
    (`global_metrics`, `eval_clients`) are not counted and draw their own."""

    def __init__(self, fed: Federation, round_: int, counted: bool = False):
        self.fed = fed
        self.round = round_
        self.n_clients = fed.n_clients
        self.counted = counted and fed.counting
        self.selects = counted

    def rng(self, stream: int = 0) -> torch.Generator:
        return generator(self.fed.seed, SERVER, self.round, stream)

    def sample(self, m: int, stream: int = 0) -> list[int]:
        """m of n clients without replacement, sorted: uniformly (`draw_cohort`), or, with a
        simulated system, m of the clients online at the round's start, the first to finish
        of an over-selected few (raycompo/system/simulator.py: `System.select`)."""
        if m >= self.n_clients:
            return list(range(self.n_clients))

        def draw(k: int) -> list[int]:
            return draw_cohort(self.n_clients, k, self.rng(stream))

        return self.fed.system.select(m, stream, draw) if self.selects else draw(m)

    def _pool(self, phase: str) -> Pool:
        self.fed.algorithm.phase(phase)  # an undeclared phase fails here, not in an actor
        assert self.fed.pool is not None, "the federation's pool is not started"
        return self.fed.pool

    def map(self, phase: str, cohort: list[int], payload: dict[str, Any]) -> dict[str, Any]:
        """Sum over the cohort (with multiplicity) of the client phase's contributions."""
        sums = self._exchange(phase, dict(Counter(cohort)), payload, True)
        return {k: v.to(self.fed.dtype) if isinstance(v, torch.Tensor) else v for k, v in sums.items()}

    def map_each(self, phase: str, cohort: list[int], payload: dict[str, Any]) -> dict[int, dict[str, Any]]:
        """Each client's contribution from the client phase, by client id."""
        return self.map_rows(phase, cohort, payload).as_dict()

    def map_rows(self, phase: str, cohort: list[int], payload: dict[str, Any]) -> ClientRows:
        """`map_each`'s contributions as the chunks computed them (algorithms/client_rows.py):
        read every member's value at once with `stacked` / `flat`, no work per member."""
        return ClientRows.of(self._exchange(phase, {c: 1 for c in cohort}, payload, False))

    def _exchange(self, phase: str, counts: dict[int, int], payload: dict[str, Any], reduce: bool) -> Any:
        """One pool call; counted, it is an exchange: the one path of engine/exchange.py."""
        if not self.counted:
            return self._pool(phase).map(phase, self.round, counts, payload, reduce)
        self._pool(phase)
        return self.fed.exchange.run(phase, self.round, counts, payload, reduce)


def summarize(per_client: dict[int, dict[str, float]], worst: dict[str, str]) -> dict[str, float]:
    """Mean over clients of each metric, and `<key>_worst` for the metrics the task declares
    (`Task.worst`: the client with the highest ('max') or lowest ('min') value). Keys
    starting with '_' are inputs of `Task.pooled_metrics`, not columns."""
    keys = [k for k in next(iter(per_client.values())) if not k.startswith("_")]
    row: dict[str, float] = {}
    for k in keys:
        vals = [float(m[k]) for m in per_client.values()]
        row[k] = sum(vals) / len(vals)
        if k in worst:
            row[f"{k}_worst"] = max(vals) if worst[k] == "max" else min(vals)
    return row


PoolFactory = Callable[[Resolved], Pool]


class Federation:
    """The driver: the global model w, the server state, the round counter and the pool.
    Inline it lives in the caller's process; on Ray it is the actor `driver`."""

    def __init__(self, cfg: RunConfig | dict | Resolved, pool_factory: PoolFactory | None = None, start: bool = True,
                 run: str | None = None):
        """`start=False` defers building the pool (host actors, data) to `start()`: a driver
        actor does it in a method call so that a user error there reaches the caller.
        `run` names the run (output folder, namespace) in `repr`."""
        r = cfg if isinstance(cfg, Resolved) else resolve(cfg if isinstance(cfg, RunConfig) else RunConfig.from_dict(cfg))
        self.resolved = r
        self.run_label = run
        self.cfg = r.config
        self.seed = r.config.seed
        task = r.make_task()
        self.task = task
        self.n_clients = r.n_clients
        self.algorithm = r.algo_cls(r.algo_settings, task)
        self.w = task.init_weights()
        self.dtype = self.w.dtype
        self.state = self.algorithm.init_server_state(self.w, self.n_clients)
        self.round = 0
        self.elapsed = 0.0
        self.ledger = Ledger()
        """What the run's exchanges cost so far (engine/ledger.py): the cost columns."""
        self.exchange_listeners: list[Callable[[ExchangeCost], None]] = []
        """Called with every exchange's `costs.ExchangeCost` once the ledger recorded it
        (e.g. the simulated system's clock). Empty by default."""
        self.counting = True
        """False turns counting off (the overhead benchmark only): no cost columns change."""
        self.system = make_system(r.system_profile, self.seed, self.n_clients, self.w.numel(),
                                  self.w.numel() * self.w.element_size(), r.system_tables)
        """The simulated system (raycompo/system/; `NoSystem` without --system): it chooses the
        cohorts, its clock hears every exchange (an `exchange_listeners` entry), it adds the
        columns sim_time, dropped, wasted_s, dropped_*."""
        self.client_columns: ClientColumns | None = (
            self.system.client_columns if self.system.on else None)  # type: ignore[assignment]
        """More per-client columns of clients.csv for the evaluated clients: with --system,
        {client id: its device and how often it was drawn, online, selected, dropped since
        the previous evaluation} for the clients asked (O(asked)); None without."""
        self.exchange_listeners.append(self.system.on_exchange)
        self.transforms = Transforms.make(r, self.n_clients, self.algorithm, self.w.numel())
        """The driver's payload transforms (engine/transforms.py): --compress-down, the DP
        noise and accountant (the column epsilon); None without --compress / --dp-clip."""
        self.stop_checks: list[Callable[[dict[str, Any]], str | None]] = []
        """Each sees a round's cost columns (`cost_columns`) once it ended; the first reason
        it returns ends the run there, status 'completed' (e.g. the config's budget)."""
        budget = Budget(check_budget(self.cfg.budget, getattr(self.cfg, "system", None)))
        if budget:
            self.stop_checks.append(budget.reached)
        self.exchange = Exchange(self)
        """The one path of every exchange (engine/exchange.py): transforms, pool, ledger, listeners."""
        self.events: EventLog | None = EventLog() if getattr(self.cfg, "log_events", False) else None
        """The run's event log (`--log-events`: events.csv, one row per dispatch), or None."""
        self.system.events = self.events
        self.asynchronous: AsyncServer | None = (
            AsyncServer(self, r.aggregation, self.algorithm.asynchronous(r.algo_settings), self.events)
            if r.aggregation else None)
        """With --aggregation buffered|async, the event state of the asynchronous server
        (engine/asynchronous.py): a round is then one server step."""
        self.closing: ClosingRule = self.asynchronous or SyncRounds(self, RoundCtx, self.events)
        """How a server step closes (engine/closing.py): synchronous rounds, or the
        asynchronous server's buffer."""
        self._pool_factory = pool_factory or default_pool
        self.pool: Pool | None = None
        if start:
            self.start()

    def __repr__(self) -> str:
        """What the Ray dashboard's Actors page shows for the actor `driver` (Repr column)."""
        c = self.cfg
        run = f"run {self.run_label}, " if self.run_label else ""
        return f"Driver({run}task {c.task}, algo {c.algo}, {self.n_clients} clients, {c.rounds} rounds)"

    def start(self) -> None:
        if self.pool is None:
            self.pool = self._pool_factory(self.resolved)

    def eval_clients(self) -> list[int]:
        """All clients, or `eval_clients` of them drawn for this round (seeded)."""
        k = self.cfg.eval_clients
        if k is None or k >= self.n_clients:
            return list(range(self.n_clients))
        return RoundCtx(self, self.round).sample(k, stream=EVAL_STREAM)

    def evaluate(self) -> dict[str, float]:
        """The evaluated clients' metrics as row columns: means, worst client, pooled,
        global, then the spread over clients."""
        return self.evaluate_clients()[0]

    def evaluate_clients(self) -> tuple[dict[str, float], ClientMetrics]:
        """`evaluate`'s columns and the per-client values themselves (for clients.csv)."""
        assert self.pool is not None
        answer = self.pool.map("evaluate", self.round, {c: 1 for c in self.eval_clients()}, {"w": self.w}, False)
        per_client = answer.as_dict() if isinstance(answer, ClientRows) else answer
        clients = ClientMetrics.build(self.round, per_client,
                                      self.client_columns(sorted(per_client)) if self.client_columns else None)
        self.system.reported()  # its per-client counters are in these rows: a new window begins
        for metrics in per_client.values():
            metrics.pop(N_SAMPLES_KEY, None)  # the engine's, not the task's: pooled_metrics never sees it
        row = summarize(per_client, self.task.worst)
        row.update(self.task.pooled_metrics(per_client))
        row.update(self.algorithm.global_metrics(RoundCtx(self, self.round), self.w, row))
        row.update(spread(per_client, self.task.worst))
        return row, clients

    def _evaluated(self) -> dict[str, Any]:
        """`evaluate`'s columns and, under `CLIENTS_KEY`, the per-client values, which travel
        with the row to the run loop (engine/loop.py hands them to the observers)."""
        row, clients = self.evaluate_clients()
        return {**row, CLIENTS_KEY: clients}

    def initial_row(self) -> dict[str, Any]:
        return {"round": 0, **self._evaluated(), "round_time": 0.0, "wall_time": 0.0, "diverged": False,
                **self.cost_columns()}

    def cost_columns(self) -> dict[str, Any]:
        """The cumulative cost columns of this round's row (engine/ledger.py), then, with
        --system, the simulated system's (sim_time, dropped, wasted_s, dropped_*)."""
        cols = {**self.ledger.columns(), **self.system.columns(), **self.closing.columns()}  # async: staleness_*, in_flight
        if self.transforms is not None:
            cols.update(self.transforms.columns())
        return cols

    def run_round(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        self.w, self.state = self.closing.step(self.w, self.state)  # a synchronous round or an asynchronous step
        self.round += 1
        breakdown = self.ledger.close_round(self.round)
        if self.transforms is not None:
            self.transforms.close_round(self.round)
        round_time = time.perf_counter() - t0
        self.elapsed += round_time
        costs = self.cost_columns()
        stopped = next((reason for check in self.stop_checks if (reason := check(costs))), None)
        row: dict[str, Any] = {"round": self.round}
        finite = bool(torch.isfinite(self.w).all())
        if finite and (self.round % self.cfg.eval_every == 0 or self.round == self.cfg.rounds or stopped):
            row.update(self._evaluated())
        row["round_time"] = round_time
        row["wall_time"] = self.elapsed
        row["diverged"] = not finite or any(
            isinstance(v, float) and not math.isfinite(v) for k, v in row.items() if "loss" in k
        )
        row.update(costs)  # after the columns that existed before them
        row[BREAKDOWN_KEY] = breakdown  # costs.csv's rows of this round (taken out by the run loop)
        if self.events is not None:
            row[EVENTS_KEY] = self.events.take()  # events.csv's rows of this step (taken out likewise)
        if stopped:
            row["stopped"] = stopped  # the last row only: not a metrics.csv column
        return row

    def run_rounds(self, count: int) -> list[dict[str, Any]]:
        """Several rounds in one call (fewer round trips from the caller); stops at
        divergence or at a stop check (a budget)."""
        rows = []
        for _ in range(count):
            rows.append(self.run_round())
            if rows[-1]["diverged"] or rows[-1].get("stopped"):
                break
        return rows

    def global_model(self) -> torch.Tensor:
        return self.w

    def artifacts(self) -> dict[str, Any]:
        """The task's end-of-run files for the current global model."""
        return self.task.artifacts(self.w, self.algorithm)

    def server_state(self) -> dict[str, Any]:
        return self.state

    def client_state(self, cid: int) -> dict[str, Any]:
        assert self.pool is not None
        return self.pool.client_state(cid)

    def pool_stats(self) -> dict[str, Any]:
        """The pool's counters (see `Pool.stats`); on Ray one round trip to every host."""
        assert self.pool is not None
        return self.pool.stats()

    def checkpoint(self) -> dict[str, Any]:
        """Everything needed to continue from this round boundary (engine/checkpoint.py)."""
        assert self.pool is not None
        return {
            "round": self.round,
            "w": self.w,
            "server_state": self.state,
            "client_states": self.pool.client_states(),
            "elapsed": self.elapsed,
            "config": self.cfg.to_dict(),
            "ledger": self.ledger.state(),
            "system": self.system.state(),
            **({"asynchronous": self.asynchronous.state()} if self.asynchronous is not None else {}),
            **({"events": self.events.state()} if self.events is not None else {}),
            **({"transforms": self.transforms.state()} if self.transforms is not None else {}),
        }

    def restore(self, ckpt: dict[str, Any]) -> None:
        """Continue from a checkpoint (same config): model, server and client states."""
        assert self.pool is not None
        if tuple(ckpt["w"].shape) != tuple(self.w.shape):
            raise ConfigError(f"the checkpoint's model has shape {tuple(ckpt['w'].shape)}, this run's "
                              f"{tuple(self.w.shape)}: it belongs to another run and was not restored")
        self.round, self.w, self.state = int(ckpt["round"]), ckpt["w"].to(self.dtype), ckpt["server_state"]
        self.elapsed = float(ckpt["elapsed"])
        self.ledger = Ledger()
        if "ledger" in ckpt:  # (a checkpoint from before the ledger: counts start at 0)
            self.ledger.load(ckpt["ledger"], self.round)
        self.system.load(ckpt.get("system"))  # the same clock goes on
        if self.asynchronous is not None and ckpt.get("asynchronous") is not None:  # clients in flight go on
            self.asynchronous.load(ckpt["asynchronous"])
        if self.events is not None:  # dispatch numbers go on
            self.events.load(ckpt.get("events"))
        if self.transforms is not None and ckpt.get("transforms") is not None:  # server residuals, accountant
            self.transforms.load(ckpt["transforms"], self.round)
        self.pool.load_client_states(ckpt["client_states"])

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


def default_pool(resolved: Resolved) -> Pool:
    """The pool of the config's backend (`engine.pool_factory.POOLS`)."""
    return make_pool(resolved)
