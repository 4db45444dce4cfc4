"""A client host: the data and persistent state of one or more clients, for a whole run.

The inline backend uses one Host in the calling process; the Ray backend wraps Host in
an actor (one per block of clients). For each (client, multiplicity) of a call, the host
runs the algorithm's declared client phase `(c, state, payload) -> (contribution, state)`,
stores the returned state (the host owns it: checkpoints read it, restores replace it)
and pre-reduces: `map` returns the multiplicity-weighted sum of its clients'
contributions, accumulated in float64 so that the result does not depend on how clients
are grouped on hosts.
"""

from __future__ import annotations

import os
import time
from collections import deque
from functools import partial
from itertools import pairwise, repeat
from operator import add, itemgetter
from typing import Any, cast

import torch

from raycompo.algorithms.base import Algorithm, State
from raycompo.algorithms.chunk_state import ChunkState
from raycompo.algorithms.client_rows import ClientRows, Shares
from raycompo.compression.uplink import Uplink, split_residuals, with_residuals
from raycompo.configuration.config import Resolved
from raycompo.configuration.vectorize import resolved_plan
from raycompo.engine.allocator import keep_large_allocations
from raycompo.engine.batched import run_batched
from raycompo.engine.client_data import ClientDataCache
from raycompo.engine.ledger import MemberCosts, count_by_key, samples_read
from raycompo.engine.state_store import StateStore
from raycompo.engine.transforms import make_uplink
from raycompo.engine.trial_data import TrialData, sharable
from raycompo.engine.uncounted import UncountedReads
from raycompo.problems.oracle import metering
from raycompo.seeding import client_prefix, generator_from
from raycompo.tasks.base import ClientData, settings_key
from raycompo.tasks.draw_journal import forget
from raycompo.watch.per_client import EVALUATE, N_SAMPLES_KEY, n_samples

DATA_CACHE_CLIENTS = 10_000
"""Clients whose data a host keeps materialized at once (least recently used dropped)."""


_CTX_FIELDS = ("client_id", "data", "scratch", "round", "seed", "device", "dispatch")


class ClientCtx(tuple):
    """What a client phase sees besides its state (see algorithms.base.ClientContext):
    `ClientCtx(client_id, data, scratch=None, round=0, seed=0, device=cpu, dispatch=0)`.

    A tuple of those fields, read by name: a host builds a chunk's contexts with one
    `map` of `tuple.__new__` (`Host.contexts`), not one constructor call per client."""

    client_id: int
    data: ClientData
    scratch: dict[str, Any]
    round: int
    seed: int
    device: torch.device
    dispatch: int
    """The client's earlier dispatches at this round (model version) in an asynchronous run:
    0 for its first (and every synchronous round's); a repeat draws apart (`key_prefix`)."""

    def __new__(cls, client_id: int, data: ClientData, scratch: dict[str, Any] | None = None, round: int = 0,
                seed: int = 0, device: torch.device | None = None, dispatch: int = 0) -> ClientCtx:
        return tuple.__new__(cls, (client_id, data, {} if scratch is None else scratch, round, seed,
                                   torch.device("cpu") if device is None else device, dispatch))

    def __getnewargs__(self) -> tuple:  # type: ignore[override]
        return tuple(self)

    def __repr__(self) -> str:
        return f"ClientCtx(client_id={self.client_id}, round={self.round}, dispatch={self.dispatch})"

    @property
    def key_prefix(self) -> int:
        """The 64-bit state of (seed, CLIENT, client, round), and (DISPATCH, k) for a client's
        k-th repeat dispatch at one model version, folded once per context: every stream of
        this client and round continues it with (step, stream) (`rng`; a batched phase folds
        a whole chunk's at once, algorithms/cohort.py)."""
        prefix = self.__dict__.get("_prefix")
        if prefix is None:
            prefix = self.__dict__["_prefix"] = client_prefix(self.seed, self.client_id, self.round, self.dispatch)
        return prefix

    def rng(self, step: int, stream: int = 0) -> torch.Generator:
        """The stream seeded by (seed, client, round, step, stream) (the same seed as
        `generator(...)` of all five)."""
        return generator_from(self.key_prefix, step, stream)


for _i, _name in enumerate(_CTX_FIELDS):  # the fields, read by C (no Python call per read)
    setattr(ClientCtx, _name, property(itemgetter(_i), doc=f"The context's `{_name}`."))
del _i, _name

_new_ctx = partial(tuple.__new__, ClientCtx)
"""A context from a tuple of its fields (`Host.contexts`)."""


def new_rounds(datas: list[Any]) -> None:
    """`data.new_round()` of each (where it has one): for `ClientData` itself, its
    remembered draws cleared by one `map` of `dict.clear` (no Python call per client)."""
    kinds = set(map(type, datas))
    if kinds == {ClientData}:
        forget(datas)  # what a batched chunk's journal still owes them (tasks/draw_journal.py)
        deque(map(dict.clear, [d._drawn for d in datas]), maxlen=0)
        return
    if not any(hasattr(kind, "new_round") for kind in kinds):  # data of kinds without one (meta-learning tasks')
        return
    for data in datas:
        new_round = getattr(data, "new_round", None)
        if new_round is not None:
            new_round()


def to_device(obj: Any, device: torch.device) -> Any:
    """Tensors in nested dicts / lists / tuples moved to `device`."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, Shares):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(v, device) for v in obj)
    return obj


def add_into(acc: dict[str, Any], out: dict[str, Any], weight: float = 1.0) -> None:
    """acc += weight * out, tensors in float64 on the CPU."""
    for k, v in out.items():
        v = v.detach().to("cpu", torch.float64) if isinstance(v, torch.Tensor) else float(v)
        acc[k] = acc[k] + weight * v if k in acc else weight * v


class Host:
    """Construction only records its arguments; `ready()` loads the data. A failure there
    (missing data, bad settings) reaches the caller as its own exception: Ray passes a
    method's error through, but only the message of an actor constructor's."""

    def __init__(self, resolved: Resolved, client_ids: range | list[int], device: str | None = None,
                 num_threads: int | None = None, state_budget_bytes: int | None = None, run: str | None = None):
        self._args: tuple | None = (resolved, device, num_threads, state_budget_bytes)
        # A block of consecutive ids is kept as a range: O(1), whatever the population.
        self.client_ids = as_range(client_ids)
        self.busy_seconds = 0.0
        self._repr = host_repr(self.client_ids, resolved.n_clients, resolved.config.task, run)

    def __repr__(self) -> str:
        """What the Ray dashboard's Actors page shows (Repr column) and what prefixes the
        actor's log lines: which clients, which task, which run. Ray reads it once, when the
        actor is created."""
        return self._repr

    def ready(self, data_from: list[Host] | None = None) -> int:
        """Build the task and the algorithm, and materialize one client so that missing data
        or a bad partition fails now (once). Returns the number of clients hosted.
        `data_from`: hosts whose client data this one reads where they are the same data
        (`share_data` with the first that has them), before any client is materialized
        here: a population's trials hold no data of their own, not even for a moment."""
        if self._args is not None:
            self._setup(*self._args)
            self._args = None
            for other in data_from or ():
                if self.share_data(other):
                    break
            if len(self.client_ids):
                self.clients.prefetch([self.client_ids[0]])
        return len(self.client_ids)

    def _setup(self, r: Resolved, device: str | None, num_threads: int | None, state_budget_bytes: int | None) -> None:
        if num_threads:
            torch.set_num_threads(num_threads)
        if device is None:
            device = "cuda" if r.config.gpus_per_actor > 0 and torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        self.seed = r.config.seed
        self.sampler = r.config.sampler  # how clients' mini-batches are drawn (ClientData.sampler)
        self.task = r.make_task().to(self.device)
        self.algorithm = r.algo_cls(r.algo_settings, self.task)
        self.uncounted = UncountedReads(self.algorithm)  # a plugin's reads the ledger cannot see
        # An empty initial state (the base's): an absent state reads as {} (`keep_state`).
        self._stateless = type(self.algorithm).init_client_state is Algorithm.init_client_state
        # Phases whose clients run as batched chunks (raycompo/configuration/vectorize.py, engine/batched.py).
        self.batched = set(resolved_plan(r, self.task).phases)
        self.batched_budget_bytes = r.config.vectorize_memory_mb * 2**20
        if self.batched - {"evaluate"}:  # batched local steps reuse freed heap memory (engine/allocator.py)
            keep_large_allocations()
        # Client data is materialized when a client is first used, at most
        # DATA_CACHE_CLIENTS at a time (rebuilt identically from (seed, client id) later).
        # A reset host keeps its materialized data when the data are the same (`reset`).
        # Batched local steps gather from one stacked slab of the clients' training samples
        # (engine/data_slab.py; a copy of them): only where a phase other than the
        # evaluation runs batched.
        key = data_key(r, self.device)
        slab = bool(self.batched - {"evaluate"})
        kept_key, kept = getattr(self, "_kept_data", (None, None))
        self._kept_data: tuple[Any, Any] = (None, None)
        if kept is None or kept_key != key or (kept.rows is not None) != slab:
            kept = ClientDataCache(self.task.clients, max_clients=DATA_CACHE_CLIENTS, device=self.device, slab=slab)
        self.clients, self._data_key = kept, key
        # Idle clients' persistent state: compact, spilled to disk past the budget.
        self.states = StateStore(state_budget_bytes, os.environ.get("RAYCOMPO_SPILL_DIR"), device=self.device)
        self.scratch: dict[Any, dict[str, Any]] = {}
        self.scratch_round = -1
        # What clients send up on its way (compression, DP clipping; engine/transforms.py).
        self.uplink: Uplink | None = make_uplink(r, self.algorithm)
        self._exchanges: dict[int, int] = {}
        self._exchanges_round = -1

    def share_data(self, other: Host) -> bool:
        """Read client data from `other`'s cache where they are the very same data (the same
        `data_key`, both with or both without a slab, plain `ClientData`): the trials of one
        seed in a population (engine/population.py) keep one copy of the samples, each with
        counters of its own (`TrialData`). True where shared."""
        if other._data_key != self._data_key or (other.clients.rows is None) != (self.clients.rows is None):
            return False
        shared = other.clients.shared if isinstance(other.clients, TrialData) else other.clients
        if not len(self.client_ids) or not sharable(shared.get(self.client_ids[0])):
            return False
        if not isinstance(other.clients, TrialData):
            other.clients = TrialData(shared)
        self.clients = TrialData(shared)
        return True

    def exchange_number(self, cid: int, round_: int) -> int:
        """Client cid's count of transformed exchanges before this one in round `round_`
        (a key of its compression draws: FedDRO's I + 1 exchanges draw apart)."""
        if round_ != self._exchanges_round:
            self._exchanges, self._exchanges_round = {}, round_
        n = self._exchanges.get(cid, 0)
        self._exchanges[cid] = n + 1
        return n

    def exchange_numbers(self, ids: list[int], round_: int) -> list[int]:
        """`exchange_number` of each of `ids` (distinct), in order, for a batched chunk: with
        a constant number of Python calls (a dict's C methods over the ids)."""
        if round_ != self._exchanges_round:
            self._exchanges, self._exchanges_round = {}, round_
        before = list(map(self._exchanges.get, ids, repeat(0, len(ids))))
        self._exchanges.update(zip(ids, map(add, before, repeat(1, len(ids)))))
        return before

    def context(self, cid: int, round_: int, dispatch: int = 0) -> ClientCtx:
        """Client cid's context in round `round_` (its `dispatch`-th repeat at that model
        version: a scratch of its own, its draws counted afresh)."""
        if round_ != self.scratch_round:  # scratch lives for one round
            self.scratch, self.scratch_round = {}, round_
        data = self.clients.get(cid)
        try:  # the run's sampler (host data may be kept from a run that drew with another)
            if data.sampler != self.sampler:
                data.sampler = self.sampler
        except AttributeError:  # data of a kind of its own (meta-learning tasks'): it draws its own way
            pass
        slot = cid if dispatch == 0 else (cid, dispatch)
        scratch = self.scratch.get(slot)
        if scratch is None:  # the client's first phase of the round (or of this dispatch)
            scratch = self.scratch[slot] = {}
            new_round = getattr(data, "new_round", None)
            if new_round is not None:
                new_round()
        return ClientCtx(cid, data, scratch, round_, self.seed, self.device, dispatch)

    def contexts(self, ids: list[int], round_: int, dispatch: int = 0) -> tuple[list[ClientCtx], list[int] | None]:
        """`context(cid, round_, dispatch)` of each of `ids` (distinct), and their n_i (None
        where a client's data has no `num_samples`), built for the whole chunk at once: the
        data in one `ClientDataCache.get_many`, the contexts with one `map` (a batched
        chunk's Python work does not grow with its clients)."""
        if round_ != self.scratch_round:  # scratch lives for one round
            self.scratch, self.scratch_round = {}, round_
        datas = self.clients.get_many(ids)
        sampler = self.sampler
        try:  # the run's sampler, as `context` sets it (attribute reads only: no call per client)
            for data in datas:
                if data.sampler != sampler:
                    data.sampler = sampler
        except AttributeError:  # data of a kind of its own (meta-learning tasks'): it draws its own way
            pass
        known = [self.clients.sizes[cid] for cid in ids]
        sizes = None if None in known else cast("list[int]", known)
        slots = ids if dispatch == 0 else [(cid, dispatch) for cid in ids]
        scratch = self.scratch
        fresh = [i for i, slot in enumerate(slots) if slot not in scratch]
        if fresh:  # the clients' first phase of the round (or of this dispatch)
            scratch.update([(slots[i], {}) for i in fresh])
            new_rounds([datas[i] for i in fresh])
        ctxs = list(map(_new_ctx, zip(ids, datas, [scratch[slot] for slot in slots], repeat(round_),
                                        repeat(self.seed), repeat(self.device), repeat(dispatch))))
        return ctxs, sizes

    def state(self, c: ClientCtx) -> State:
        """Client c's persistent state, created by the algorithm on first use."""
        found = self.states.get(c.client_id)
        return self.algorithm.init_client_state(c) if found is None else found

    def states_of(self, ctxs: list[ClientCtx]) -> list[State]:
        """`state(c)` for each context; for an algorithm that keeps no state (an empty
        initial state, and nothing stored yet) fresh empty dicts, without asking the store."""
        if self._stateless and not len(self.states):
            return [{} for _ in ctxs]
        return [self.state(c) for c in ctxs]

    def chunk_states(self, ids: list[int], ctxs: list[ClientCtx]) -> ChunkState | list[State]:
        """The states of a batched chunk's clients (`ids`, their contexts `ctxs`): a
        `ChunkState` of stacked rows read from the store at once (`StateStore.get_many`)
        where their states are all in memory and of one layout of tensors (a client without
        one has the empty initial state); else `states_of(ctxs)`, client by client."""
        if self._stateless and not len(self.states):
            return [{} for _ in ids]
        got = self.states.get_many(ids)
        if got is None:
            return self.states_of(ctxs)
        tensors, present = got
        if not self._stateless and not present.all():  # new clients: the algorithm's initial state, one by one
            return self.states_of(ctxs)
        return ChunkState(len(ids), tensors, torch.from_numpy(present))

    def keep_states(self, ids: list[int], states: ChunkState | list[State]) -> None:
        """`keep_state(cid, state)` for a chunk: a `ChunkState` of stacked rows written at
        once (`StateStore.put_many`); where nothing would be stored (an algorithm that keeps
        no state), nothing is done."""
        if isinstance(states, ChunkState):
            if states.tensors and states.present is None:
                self.states.put_many(ids, states.tensors)
                return
            states = list(states)
        if self._stateless and not len(self.states) and not any(states):
            return
        for cid, st in zip(ids, states):
            self.keep_state(cid, st)

    def keep_state(self, cid: int, state: State) -> None:
        """Store client cid's new state; an empty state where the algorithm's initial state
        is empty and the client has none stored is not stored (reading it back gives the
        same {}): an algorithm that keeps no state costs the store nothing."""
        if self._stateless and not state and (not len(self.states) or cid not in self.states):
            return
        self.states.put(cid, state)

    def map(self, phase: str, round_: int, items: list[tuple[int, int]], payload: dict[str, Any], reduce: bool = True,
            count: bool = False, dispatch: int = 0, probe: bool = False):
        """Run client phase `phase` for each (client, multiplicity); sum or collect.
        `count`: also return, as `(result, MemberCosts)`, each member's samples read and
        values / bytes returned (engine/ledger.py). `dispatch`: the members' repeat number at
        this model version (`ClientCtx.dispatch`). `probe`: what they would return, leaving
        no trace: their states, scratch and exchange counts are as before the call (an
        asynchronous run predicts its first dispatches' work so)."""
        if not probe:
            return self._map(phase, round_, items, payload, reduce, count, dispatch)
        ids = [cid for cid, _ in items]
        kept, exchanges = self.states.snapshot(ids), dict(self._exchanges)
        try:
            return self._map(phase, round_, items, payload, reduce, count, dispatch)
        finally:
            for cid in ids:
                if cid in kept:
                    self.states.put(cid, kept[cid])
                else:
                    self.states.discard(cid)
                self.scratch.pop(cid if dispatch == 0 else (cid, dispatch), None)
            self._exchanges = exchanges

    def _map(self, phase: str, round_: int, items: list[tuple[int, int]], payload: dict[str, Any], reduce: bool,
             count: bool, dispatch: int):
        t0 = time.perf_counter()
        run_phase = self.algorithm.phase(phase)
        payload = to_device(payload, self.device)
        costs = MemberCosts() if count else None
        if phase in self.batched:  # the clients in batched chunks (engine/batched.py)
            batched = run_batched(self, phase, round_, items, payload, reduce, costs, dispatch)
            self.busy_seconds += time.perf_counter() - t0
            return (batched, costs) if count else batched
        result: dict[Any, Any] = {}
        uplink = self.uplink if count else None  # a server round's exchanges only
        for cid, mult in items:
            c = self.context(cid, round_, dispatch)
            read = samples_read(c.data) if costs is not None else 0
            state, residuals = split_residuals(self.state(c)) if uplink else (self.state(c), {})
            calls = 0
            if costs is None:
                out, new_state = run_phase(c, state, payload)
            else:
                with metering() as meter:
                    out, new_state = run_phase(c, state, payload)
                read = samples_read(c.data) - read
                calls = meter.total
                self.uncounted.check(phase, read, calls)
            encoded: dict[str, list[int]] = {}
            if uplink is not None:  # compressed, clipped: what the server decodes
                out, (residuals,), encoded = uplink.apply(phase, round_, [(cid, self.exchange_number(cid, round_))],
                                                          out, payload, [residuals], batched=False)
                new_state = with_residuals(new_state, residuals)
            if costs is not None:  # the contribution as sent, before the float64 pre-reduction
                sizes = count_by_key(out)
                sizes.update({key: (sizes[key][0], size) for key, (size,) in encoded.items()})
                costs.add(cid, mult, read * mult, sizes, calls * mult, {key: size for key, (size,) in encoded.items()})
            self.keep_state(cid, new_state)
            if reduce:
                add_into(result, out, float(mult))
            else:
                result[cid] = to_device(out, torch.device("cpu"))
                if phase == EVALUATE:  # each client's n_i, for clients.csv (raycompo/watch/per_client.py)
                    result[cid][N_SAMPLES_KEY] = n_samples(c.data)
        self.busy_seconds += time.perf_counter() - t0
        answer = result if reduce else ClientRows.of(result)
        return (answer, costs) if count else answer

    def client_state(self, cid: int) -> State:
        """A client's persistent state on the CPU ({} before its first phase)."""
        return self.states.snapshot([cid]).get(cid, {})

    def client_states(self, ids: list[int] | None = None) -> dict[int, State]:
        """Every stored client state (or those of `ids`), on the CPU: what a checkpoint saves."""
        return self.states.snapshot(ids)

    def load_client_states(self, states: dict[int, State]) -> None:
        """Replace this host's client states (restore from a checkpoint); scratch is dropped."""
        mine = {cid: s for cid, s in states.items() if cid in self.client_ids}
        self.states.clear()
        self.states.load(mine)
        self.scratch, self.scratch_round = {}, -1

    def stats(self) -> dict[str, float]:
        return {
            "busy_seconds": self.busy_seconds,
            "state_memory_bytes": float(self.states.memory_bytes),
            "state_spilled_bytes": float(self.states.spilled_bytes),
            "data_materialized": float(self.clients.materialized),
        }

    def close(self) -> None:
        """Remove spill files (the actor's end does the rest)."""
        if hasattr(self, "states"):  # a host whose `ready` failed has none
            self.states.close()

    def reset(self, resolved: Resolved, client_ids: range | list[int], device: str | None = None, num_threads: int | None = None,
              state_budget_bytes: int | None = None) -> int:
        """Become, in this process, what `Host(resolved, client_ids, ...)` then `ready()`
        would be: a sweep's next trial reuses the host actor (engine/host_actors.py). New
        config, seed, task, algorithm and block of clients; client states, scratch and busy
        time start empty. Kept: the process (its imports, torch's first-use set-up), the
        partition cache of `tasks.base.clients`, and the materialized client data when
        `data_key` is unchanged (data are a pure function of it, so results are those of a
        fresh host). Returns the number of clients hosted."""
        kept = (self._data_key, self.clients) if hasattr(self, "clients") else (None, None)
        self.close()
        for name in ("task", "algorithm", "clients", "states", "scratch"):
            self.__dict__.pop(name, None)
        self.__init__(resolved, client_ids, device, num_threads, state_budget_bytes)  # type: ignore[misc]
        self._kept_data = kept
        return self.ready()

    def footprint(self) -> dict[str, Any]:
        """This process's memory (resident and unique MB; psutil, Ray's copy if need be)
        and the large optional libraries it has imported: what a host costs to keep."""
        import sys

        try:
            import psutil
        except ImportError:
            import ray  # noqa: F401, I001  (puts its bundled psutil on sys.path)
            import psutil
        mem = psutil.Process().memory_full_info()
        heavy = ("torchvision", "pandas", "pyarrow", "matplotlib", "optuna", "scipy", "sklearn", "mlxtend", "torch._dynamo")
        return {"rss_mb": mem.rss / 2**20, "uss_mb": getattr(mem, "uss", 0) / 2**20, "pid": os.getpid(),
                "imported": [m for m in heavy if m in sys.modules]}


def data_key(r: Resolved, device: torch.device) -> tuple:
    """What a host's client data depend on: the task, its settings, the seed, the data
    folder and the device."""
    return (r.task_cls, settings_key(r.task_settings), r.config.seed, r.config.data_dir, str(device))


def host_repr(ids: range | list[int], n_clients: int, task: str, run: str | None) -> str:
    """`Host(clients 0-99 of 1000, task dro-mnist5k, run runs/x)`."""
    if not len(ids):
        which = "no clients"
    elif isinstance(ids, range):
        which = f"clients {ids[0]}-{ids[-1]}" if len(ids) > 1 else f"client {ids[0]}"
    else:
        which = f"{len(ids)} clients in {ids[0]}-{ids[-1]}"
    return f"Host({which} of {n_clients}, task {task}" + (f", run {run})" if run else ")")


def as_range(ids: range | list[int]) -> range | list[int]:
    """Client ids as a step-1 range where they are consecutive (a range is kept as it is,
    never expanded), else sorted: the check allocates nothing of their length."""
    if isinstance(ids, range) and ids.step == 1:
        return ids
    ids = sorted(ids)
    if ids and all(b - a == 1 for a, b in pairwise(ids)):
        return range(ids[0], ids[-1] + 1)
    return ids
