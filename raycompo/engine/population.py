"""A population: P runs of one algorithm on one task that differ in a few scalar settings (step
sizes, gamma) or in their seed, run side by side as one computation (issue 42).

Each trial is a run of its own, exactly as alone: its Federation (model, server state,
cohorts, ledger, system clock, transforms), its rows, its folder and checkpoints, in a thread
of this process (`run_population`). What they share is the clients' computation. Every pool
call of a trial's round meets the other trials' at a rendezvous (engine/rendezvous.py); where
they ask the same batched phase of the same round (`batchable`), their members run as chunks of
one `CohortBatch` whose rows are (trial, client) pairs: each row with its trial's model (the
payload's values that differ, as `TrialValues`), its trial's settings (a (k,) tensor of the
values per row where they differ: `Algorithm.row_settings`), its trial's seed, data and
persistent state. Anything else (evaluation, a phase without a population form, compression)
runs trial by trial through each trial's own pool, still in lockstep.

Trials of one seed read one copy of the client data (`Host.share_data`). A client's rows of
every trial are cut into the same chunk (chunks are cut between clients), so a shared data
object's draws, identical for trials of one seed, are counted once for each of them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import torch

from raycompo.algorithms.client_rows import ClientRows, Shares
from raycompo.algorithms.cohort import CohortBatch, TrialValues
from raycompo.engine.batched import book_chunk, checked_answer, clients_per_chunk, gather_bytes
from raycompo.engine.host import Host, to_device
from raycompo.engine.ledger import MemberCosts, samples_read_many
from raycompo.engine.pools import InlinePool
from raycompo.engine.rendezvous import Rendezvous
from raycompo.models.row_products import buffered_products
from raycompo.problems.oracle import metering


@dataclass
class Request:
    """A trial's pool call (`Pool.map`'s arguments)."""

    phase: str
    round_: int
    counts: dict[int, int]
    payload: dict[str, Any]
    reduce: bool
    count: bool
    dispatch: int
    probe: bool


class MemberPool:
    """A trial's pool in a population: its calls go to the rendezvous; its clients' states
    are its own `InlinePool`'s."""

    def __init__(self, pool: InlinePool, population: Population, member: int):
        self.inner, self.population, self.member = pool, population, member
        self.n_clients = pool.n_clients

    def map(self, phase: str, round_: int, counts: dict[int, int], payload: dict[str, Any], reduce: bool = True,
            count: bool = False, dispatch: int = 0, probe: bool = False) -> Any:
        request = Request(phase, round_, counts, payload, reduce, count, dispatch, probe)
        return self.population.rendezvous.call(self.member, request)

    def client_state(self, cid: int) -> Any:
        return self.inner.client_state(cid)

    def client_states(self) -> dict[int, Any]:
        return self.inner.client_states()

    def load_client_states(self, states: dict[int, Any]) -> None:
        self.inner.load_client_states(states)

    def stats(self) -> dict[str, Any]:
        return self.inner.stats()

    def close(self) -> None:
        self.population.rendezvous.leave(self.member)
        self.inner.close()


class Seat:
    """What an inline run of a population is given as `hosts` (engine/pool_factory.py): its
    pool is a `MemberPool` of member `member`."""

    def __init__(self, population: Population, member: int):
        self.population, self.member = population, member

    def inline_pool(self, resolved: Any) -> MemberPool:
        with self.population.lock:  # one pool at a time: each finds the data of those before it
            # the open ones' hosts, offered before this one materializes a client of its own
            others = [other.host for other in self.population.pools.values() if other.host is not None]
            pool = InlinePool(resolved, data_from=others)
            self.population.pools[self.member] = pool
        return MemberPool(pool, self.population, self.member)


class Population:
    """P trials' pools meeting at one rendezvous (see the module doc). `timeout`: the longest
    a trial waits for the others at an exchange."""

    def __init__(self, size: int, timeout: float = 3600.0):
        self.size = size
        self.pools: dict[int, InlinePool] = {}
        self.lock = threading.Lock()
        self.rendezvous = Rendezvous(size, self.answer, timeout)
        self.together = 0
        """Exchanges answered as one computation of several trials (the others: trial by trial)."""

    def seat(self, member: int) -> Seat:
        return Seat(self, member)

    def answer(self, requests: dict[int, Request]) -> dict[int, Any]:
        """Each trial's answer: the batchable requests of several trials as one computation,
        any other on the trial's own pool."""
        results: dict[int, Any] = {}
        try:
            found = groups(requests, self.pools)
        except Exception:  # requests that cannot even be compared: each trial's on its own pool
            found = [[m] for m in sorted(requests)]
        for group in found:
            try:
                if len(group) > 1:
                    results.update(run_together([self.pools[m].host for m in group], [requests[m] for m in group], group))
                    self.together += 1
                else:
                    r = requests[group[0]]
                    results[group[0]] = self.pools[group[0]].map(r.phase, r.round_, r.counts, r.payload, r.reduce,
                                                                 r.count, r.dispatch, r.probe)
            except Exception as exc:  # the trials of this group fail; the others go on
                results.update({m: exc for m in group})
        return results


def groups(requests: dict[int, Request], pools: dict[int, InlinePool]) -> list[list[int]]:
    """The members whose requests run as one computation (`batchable` with the first of
    their group), in member order; every other member alone."""
    out: list[list[int]] = []
    for m in sorted(requests):
        for group in out:
            lead = group[0]
            if batchable(pools[lead].host, requests[lead], pools[m].host, requests[m]):
                group.append(m)
                break
        else:
            out.append([m])
    return out


def batchable(host_a: Host, a: Request, host_b: Host, b: Request) -> bool:
    """Whether two trials' requests can be rows of one batched computation: the same batched
    phase of the same round of one algorithm (declared in its `population_phases`), settings
    that differ only where the algorithm takes them per row (`row_settings`), no uplink
    transform, and payloads of the same keys whose values are equal or tensors of one shape."""
    cls = type(host_a.algorithm)
    same = (a.phase, a.round_, a.reduce, a.count, a.dispatch) == (b.phase, b.round_, b.reduce, b.count, b.dispatch)
    if not same or a.probe or b.probe or type(host_b.algorithm) is not cls:
        return False
    if a.phase not in cls.__dict__.get("population_phases", ()) or a.phase not in host_a.batched & host_b.batched:
        return False
    if host_a.uplink is not None or host_b.uplink is not None or host_a.device != host_b.device:
        return False
    if differing_settings(host_a.algorithm.s, host_b.algorithm.s) - set(cls.row_settings):
        return False
    return same_payload_shape(a.payload, b.payload, cls.row_payload)


def differing_settings(a: Any, b: Any) -> set[str]:
    """Names of the fields of two settings dataclasses whose values differ."""
    return {f.name for f in fields(a) if getattr(a, f.name) != getattr(b, f.name)}


def same_payload_shape(a: dict[str, Any], b: dict[str, Any], numbers: frozenset[str] = frozenset()) -> bool:
    """Payloads of the same keys, each value equal or a tensor of one shape and dtype, or
    under a key of `numbers` two floats (`Algorithm.row_payload`); values that cannot be
    compared, e.g. lists of tensors, are not the same."""
    if a.keys() != b.keys():
        return False
    for key, va in a.items():
        vb = b[key]
        if isinstance(va, torch.Tensor) and isinstance(vb, torch.Tensor):
            if va.shape != vb.shape or va.dtype != vb.dtype:
                return False
            continue
        if key in numbers and type(va) is float and type(vb) is float:
            continue
        try:
            if isinstance(va, torch.Tensor) or isinstance(vb, torch.Tensor) or bool(va != vb):
                return False
        except (RuntimeError, TypeError, ValueError):
            return False
    return True


def trial_payload(payloads: list[dict[str, Any]], device: torch.device) -> dict[str, Any]:
    """The trials' payloads as one: a value they share as it is, tensors that differ stacked
    as `TrialValues` (row p: trial p's), floats that differ (`Algorithm.row_payload`) as a
    `TrialValues` of a (P,) float64 tensor."""
    out: dict[str, Any] = {}
    for key, first in payloads[0].items():
        values = [p[key] for p in payloads]
        if isinstance(first, torch.Tensor) and any(v is not first and not torch.equal(v, first) for v in values[1:]):
            out[key] = TrialValues(torch.stack([to_device(v, device) for v in values]))
        elif type(first) is float and any(v != first for v in values[1:]):
            out[key] = TrialValues(torch.tensor(values, dtype=torch.float64, device=device))
        else:
            out[key] = to_device(first, device)
    return out


def row_algorithm(hosts: list[Host], trials: list[int], device: torch.device, dtype: torch.dtype) -> Any:
    """An algorithm for a chunk whose row i belongs to trial `trials[i]`: the first trial's
    settings, with each setting that differs between trials as a (k,) tensor of the rows'
    values (`Algorithm.row_settings`), in the models' `dtype`."""
    first = hosts[0].algorithm
    differ: set[str] = set()
    for host in hosts[1:]:
        differ |= differing_settings(first.s, host.algorithm.s)
    if not differ:
        return first
    values = {name: torch.tensor([float(getattr(hosts[t].algorithm.s, name)) for t in trials], dtype=dtype, device=device)
              for name in sorted(differ)}
    return type(first)(replace(first.s, **values), hosts[0].task)


def model_dtype(payload: dict[str, Any]) -> torch.dtype:
    """The dtype of the payload's first floating tensor (the models'; not the trials' numbers
    of a `row_payload` key), float32 without one."""
    for value in payload.values():
        if isinstance(value, TrialValues) and value.stacked.dim() == 1:
            continue
        t = value.stacked if isinstance(value, TrialValues) else value
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            return t.dtype
    return torch.float32


def client_groups(counts: list[dict[int, int]], rows: int) -> list[list[int]]:
    """The union of the trials' members, sorted, cut between clients into groups of about
    `rows` rows (every trial's row of a client in the group of that client)."""
    clients = sorted(set().union(*counts))
    per_client = max(1, len(counts))
    size = max(1, rows // per_client)
    return [clients[i:i + size] for i in range(0, len(clients), size)]


def run_together(hosts: list[Host], requests: list[Request], members: list[int]) -> dict[int, Any]:
    """Requests of several trials (`batchable`) as one computation: chunks whose rows are
    (trial, client) pairs, trial by trial within a chunk; each trial's answer as its own
    pool's (`Host.map`)."""
    t0 = time.perf_counter()
    lead, first = hosts[0], requests[0]
    phase, round_, dispatch = first.phase, first.round_, first.dispatch
    payload = trial_payload([r.payload for r in requests], lead.device)
    costs = [MemberCosts() if r.count else None for r in requests]
    results: list[Any] = [{} if r.reduce else ClientRows() for r in requests]
    union = sorted(set().union(*[r.counts for r in requests]))
    gathered = gather_bytes(lead, phase, [(union[0], 1)])
    for clients in client_groups([r.counts for r in requests], clients_per_chunk(lead, union[0])):
        parts = []
        for t, (host, r) in enumerate(zip(hosts, requests)):
            chunk = [(cid, r.counts[cid]) for cid in clients if cid in r.counts]
            if chunk:
                ctxs, sizes = host.contexts([cid for cid, _ in chunk], round_, dispatch)
                parts.append((t, chunk, ctxs, sizes, list(host.chunk_states([cid for cid, _ in chunk], ctxs))))
        run_chunk(hosts, requests, parts, payload, gathered, costs, results)
    for host in hosts:
        host.busy_seconds += (time.perf_counter() - t0) / len(hosts)
    return {m: ((res, c) if r.count else res) for m, res, c, r in zip(members, results, costs, requests)}


def run_chunk(hosts: list[Host], requests: list[Request], parts: list[tuple], payload: dict[str, Any], gathered: int,
              costs: list[MemberCosts | None], results: list[Any]) -> None:
    """One chunk: `parts` holds each trial's (trial, chunk, contexts, sizes, states)."""
    lead, phase = hosts[0], requests[0].phase
    ctxs = [c for part in parts for c in part[2]]
    sizes = None if any(part[3] is None for part in parts) else [n for part in parts for n in part[3]]
    trials = [part[0] for part in parts for _ in part[1]]
    cb = CohortBatch(ctxs, lead.task, lead.device, gathered, sizes=sizes)
    cb.trials = torch.tensor(trials, dtype=torch.long, device=lead.device)
    algorithm = row_algorithm(hosts, trials, lead.device, model_dtype(payload))
    fn = getattr(algorithm, type(algorithm).batched_phases[phase])
    states = [s for part in parts for s in part[4]]
    read = samples_read_many([c.data for c in ctxs])
    try:
        with metering(len(ctxs)) as meter, buffered_products():  # to float rounding, as a population is
            answer = fn(cb, states, payload)
    finally:
        cb.close()  # the draws counted for the whole chunk, handed to its clients
    out, new_states = checked_answer(phase, fn, answer, cb.ids)
    calls = meter.per_row()
    at = 0
    for t, chunk, part_ctxs, _, _ in parts:
        rows = slice(at, at + len(chunk))
        at += len(chunk)
        mine = {key: value.rows(rows) if isinstance(value, Shares) else value[rows] for key, value in out.items()}
        book_chunk(hosts[t], phase, chunk, part_ctxs, mine, list(new_states[rows]), requests[t].reduce, results[t],
                   costs[t], read[rows], calls[rows], {})


def run_population(runs: list[Callable[[Seat], Any]], timeout: float = 3600.0,
                   population: Population | None = None) -> tuple[list[Any], Population]:
    """Run `runs[p](seat p)` (each a run of the inline backend given `hosts=seat`), each in a
    thread of its own, as one population (`population`: one made by the caller, who may
    `cancel` its rendezvous from another thread). Returns each one's result, or the exception
    it raised, in order, and the population (its counters). Waits for them all; an interrupt
    here (Ctrl-C) cancels every trial."""
    population = population or Population(len(runs), timeout)
    results: list[Any] = [None] * len(runs)

    def one(p: int) -> None:
        try:
            results[p] = runs[p](population.seat(p))
        except BaseException as exc:  # each trial's own outcome, as alone
            results[p] = exc
        finally:
            population.rendezvous.leave(p)

    threads = [threading.Thread(target=one, args=(p,), name=f"raycompo-trial-{p}", daemon=True) for p in range(len(runs))]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    except BaseException as exc:
        population.rendezvous.cancel(exc)
        for thread in threads:
            thread.join(timeout)
        raise
    return results, population
