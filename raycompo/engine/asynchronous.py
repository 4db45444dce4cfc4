"""The asynchronous server loop (issue 31): FedBuff (`--aggregation buffered`) and FedAsync
(`--aggregation async`) on the simulated clock, for any algorithm that declares a
`Buffered` form (raycompo/algorithms/base.py). See docs/system.md for the event model.

One call of `AsyncServer.step` is one server step (one row of metrics.csv): events are taken
from the queue (raycompo/system/events.py) until K updates were accepted, then the buffer is
applied. What happens at each event:

* DISPATCH at t: a client drawn among those online and not in flight downloads the current
  version v (`Algorithm.async_payload`); its update arrives at t + member_time(device,
  predicted work), the predicted work being the mean member's samples and upload of the
  last computed group (the payload's bytes are exact). All dispatches of one instant are
  one group.
* ARRIVAL at t: the client leaves the in-flight set and its slot is requested at t (filled
  after every arrival at t); tau = (versions applied now) - v; tau > max_staleness: dropped
  (its work counted as wasted), else its update joins the buffer.
* The K-th accepted update applies the buffer: FedBuff z <- z - eta_g (1/K) sum s(tau)
  (z^v - y); FedAsync (K = 1) z <- (1 - alpha s(tau)) z + alpha s(tau) y, for the model and
  each declared estimate z.

Every exchange goes through the one path of engine/exchange.py: a version's payload is sent
once (`Exchange.send`: `--compress-down` applies), the clients dispatched with it are computed
by the pool (the hosts' uplink transforms apply), and a server step's arrivals are recorded
(`Exchange.record`: the ledger, costs.csv per key, the listeners). The server step's rule is a
policy object (engine/async_rules.py: FedBuff, FedAsync).

The clients' computations are lazy: a client's update is computed when first needed (its
arrival), together with every other dispatched client not yet computed, one pool call per
(model version, repeat): clients dispatched with the same version run as one batched
computation. A client's draws are keyed by (client, version, k), k its earlier dispatches at
that version (`ClientCtx.dispatch`), so two dispatches never share mini-batches and each
counts its samples; a computation depends only on that key and the client's own state, so
laziness changes no number. A client that goes offline before it finishes is never computed
(its state does not move): the first group's work, which predicts everyone's finish times
before anything was computed, is found by a probe (`Pool.map(probe=True)`: the group's
contributions, with every state as it was). The ledger counts a client's download, samples
and upload in the row of the step at which its update arrived (accepted, or dropped as too
stale); a lost client's work until it left is charged as a synchronous round charges a
departed candidate (the `dropped_*` columns, from the predicted work); clients still in
flight at the end are not counted. With an event log (`--log-events`) every dispatch's fate
is logged at the step that decides it.
"""

from __future__ import annotations

from typing import Any

import torch

from raycompo.algorithms.client_rows import ClientRows
from raycompo.engine.async_rules import apply, f64, make_rule
from raycompo.engine.ledger import MemberCosts, arrivals_cost, member_cost
from raycompo.system import draws
from raycompo.system.clock import Workload, member_time, member_work
from raycompo.system.event_log import Dispatch, EventLog
from raycompo.system.events import (
    ARRIVAL,
    DISPATCH,
    DISPATCH_DRAW,
    Event,
    Queue,
    draw_cap,
    draw_client,
)

COLUMNS = ("staleness_mean", "staleness_max", "in_flight")
"""Columns of an asynchronous run's rows (besides sim_time, dropped, wasted_s): the
staleness of the updates this server step applied, and clients in flight after it."""


class AsyncServer:
    """The event state of an asynchronous run, owned by the `Federation` (the driver): its
    closing rule (engine/closing.py)."""

    def __init__(self, fed: Any, plan: Any, form: Any, events: EventLog | None = None):
        self.fed = fed
        self.plan = plan
        self.form = form
        self.rule = make_rule(plan)
        self.events = events
        self.queue = Queue()
        self.started = False
        self.versions: dict[int, dict[str, Any]] = {}
        """version -> {'payload' (as decoded), 'down' ({key: (values, bytes)} one member
        receives), 'z'} while a dispatched client of that version is not computed."""
        self.pending: list[tuple[int, int, int, int]] = []
        """(seq, client, version, repeat) of dispatched clients not computed yet, in dispatch order."""
        self.results: dict[int, dict[str, Any]] = {}
        """seq -> the computed update of a client in flight: 'y' ({quantity: y} or, FedBuff,
        the delta z^v - y where the server had a value), 'delta' (which quantities are
        deltas), 'cost' (`ledger.member_cost`)."""
        self.work: Workload | None = None
        """The predicted work of a member: the mean of the last computed group."""
        self.repeats: tuple[int, dict[int, int]] = (-1, {})
        """(version, {client: dispatches at that version so far}): a client's next repeat number."""
        self._draw = draws.prefix(fed.seed, DISPATCH_DRAW)
        self.last: dict[str, Any] = {"staleness_mean": None, "staleness_max": None, "in_flight": 0}

    # --- one server step ------------------------------------------------------------
    def step(self, w: torch.Tensor, state: dict[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Take events until K updates are accepted; apply them. Returns the new (w, state)."""
        fed, q, plan = self.fed, self.queue, self.plan
        version = fed.round  # server steps applied so far
        if not self.started:
            for _ in range(plan.concurrency):
                q.request_slot(0.0)
            self.started = True
        accepted: list[tuple[int, dict[str, Any]]] = []
        arrived: list[tuple[int, dict[str, Any]]] = []  # (client, cost) of every update that arrived
        system = fed.system
        system.begin_round(version + 1)  # this step's `dropped` and per-client window (no barrier here)
        while len(accepted) < plan.buffer:
            e = q.pop()
            if e.kind == DISPATCH:
                group = [e]
                while (nxt := q.peek()) is not None and nxt.kind == DISPATCH and nxt.time == e.time:
                    group.append(q.pop())
                self._dispatch(group, w, state, version)
                continue
            q.in_flight.discard(e.client)
            q.request_slot(e.time)
            tau = version - e.version
            if e.lost:  # went offline before finishing: never computed, charged its work until it left
                system.drop(e.client, e.time - e.start, True)
                self._log(e, version + 1, "lost", None)
                continue
            r = self._result(e.seq)
            arrived.append((e.client, r["cost"]))
            if plan.settings.max_staleness is not None and tau > plan.settings.max_staleness:
                system.drop(e.client, e.time - e.start, False, charge=False)  # in the ledger: it arrived
                self._log(e, version + 1, "stale", tau)
                continue
            accepted.append((tau, r))
            self._log(e, version + 1, "applied", tau)
        w, state = self._apply(accepted, w, state)
        live = {v for _, _, v, _ in self.pending}  # keep only the versions a client still has to compute from
        self.versions = {v: snap for v, snap in self.versions.items() if v in live}
        if arrived:
            ledger = fed.ledger
            fed.exchange.record(arrivals_cost(version + 1, self.form.phase, ledger.next_index(version + 1), arrived))
        if self.work is not None:
            system.end_step(self.work)
        system.now = q.now
        taus = [t for t, _ in accepted]
        self.last = {"staleness_mean": sum(taus) / len(taus), "staleness_max": max(taus), "in_flight": len(q.in_flight)}
        return w, state

    def _log(self, e: Event, step: int, fate: str, tau: int | None) -> None:
        if self.events is not None:
            self.events.add(Dispatch(step, e.seq, e.client, e.version, e.start, e.time, fate, tau))

    def columns(self) -> dict[str, Any]:
        """The row's asynchronous columns (COLUMNS) after the last step."""
        return dict(self.last)

    # --- dispatch -------------------------------------------------------------------
    def _snapshot(self, version: int, w: torch.Tensor, state: dict[str, Any]) -> dict[str, Any]:
        """Version `version`'s payload, sent once (the one exchange's downlink transforms)."""
        snap = self.versions.get(version)
        if snap is None:
            payload = self.fed.algorithm.async_payload(w, state, version)
            if self.plan.proximal:
                payload = {**payload, "prox_rho": self.plan.settings.async_rho}
            exchange = self.fed.exchange
            payload, encoded = exchange.send(self.form.phase, version, 0, payload)
            z = {"w": w, **{sk: state.get(sk) for sk, _ in self.form.estimates}}
            snap = self.versions[version] = {"payload": payload, "down": exchange.down_sizes(payload, encoded), "z": z}
        return snap

    def _repeat(self, c: int, version: int) -> int:
        """Client c's earlier dispatches at `version` (its draws' key), counted."""
        v, seen = self.repeats
        if v != version:
            seen = {}
            self.repeats = (version, seen)
        k = seen.get(c, 0)
        seen[c] = k + 1
        return k

    def _draw_group(self, group: list[Event]) -> list[tuple[int, int, float]]:
        """(seq, client, start) of the dispatches of `group` that start now; a slot whose
        client checks in later is pushed back as a reserved DISPATCH."""
        fed, q = self.fed, self.queue
        system = fed.system
        avail = system.availability
        started: list[tuple[int, int, float]] = []
        for e in group:
            if e.client >= 0:  # reserved at a drawing that found no one online: it checks in now
                c, start = e.client, e.time
            else:
                c, start = draw_client(self._draw, e.seq, e.time, avail.population, fed.n_clients, q.in_flight,
                                       avail.online, avail.next_online, draw_cap(self.plan.concurrency))
                q.in_flight.add(c)
                system.counters.count("drawn", [c])
                if start > e.time:  # the slot waits for this client's check-in
                    q.push(Event(start, DISPATCH, e.seq, client=c))
                    continue
            system.counters.count("online", [c])
            started.append((e.seq, c, start))
        return started

    def _dispatch(self, group: list[Event], w: torch.Tensor, state: dict[str, Any], version: int) -> None:
        """Fill the slots of `group` (DISPATCH events of one instant) in their order."""
        started = self._draw_group(group)
        if not started:
            return
        system, q = self.fed.system, self.queue
        system.keep([c for _, c, _ in started])  # `selected`, per client
        snap = self._snapshot(version, w, state)
        repeats = [self._repeat(c, version) for _, c, _ in started]
        if self.work is None:  # nothing computed yet: this group's own work, probed, predicts its times
            self._probe([c for _, c, _ in started], repeats, version)
        assert self.work is not None
        bytes_down = float(sum(b for _, b in snap["down"].values()))
        rates, avail = system.devices.rates, system.availability
        for (seq, c, start), k in zip(started, repeats):
            finish = start + member_time(rates(c), self.work.samples, bytes_down, self.work.bytes_up)
            left = None if avail.always else avail.online_until(c, start)
            if left is not None and left < finish:  # offline before it finishes: lost, never computed
                q.push(Event(left, ARRIVAL, seq, client=c, version=version, lost=True, start=start))
                continue
            self.pending.append((seq, c, version, k))
            q.push(Event(finish, ARRIVAL, seq, client=c, version=version, start=start))

    # --- computation ------------------------------------------------------------------
    def _result(self, seq: int) -> dict[str, Any]:
        if seq not in self.results:
            self._compute()
        return self.results.pop(seq)

    def _probe(self, clients: list[int], repeats: list[int], version: int) -> None:
        """The first group's predicted work: what its members would compute, no state moved."""
        snap, by_repeat = self.versions[version], {}
        for c, k in zip(clients, repeats):
            by_repeat.setdefault(k, []).append(c)
        for k, cs in sorted(by_repeat.items()):
            _, costs = self.fed.exchange.compute(self.form.phase, version, dict.fromkeys(cs, 1), snap["payload"], False,
                                                 dispatch=k, probe=True)
            self._predict(costs, snap["down"])

    def _predict(self, costs: MemberCosts, down: dict[str, tuple[int, int]]) -> None:
        """The mean member of a computed group predicts the next dispatches' work."""
        k = len(costs.clients)
        work = sum(member_work(costs, i) for i in range(k)) / k  # type: ignore[arg-type]
        calls = sum(costs.oracle_calls) / k if costs.oracle_calls else 0.0
        self.work = Workload(work, float(sum(b for _, b in down.values())), sum(costs.bytes_up) / k,
                             sum(costs.samples) / k, calls)

    def _compute(self) -> None:
        """Every dispatched client not computed yet, one pool call per (version, repeat)."""
        groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for seq, c, v, k in self.pending:
            groups.setdefault((v, k), []).append((seq, c))
        self.pending = []
        for (v, k) in sorted(groups):
            snap, items = self.versions[v], groups[(v, k)]
            answer, costs = self.fed.exchange.compute(self.form.phase, v, {c: 1 for _, c in items}, snap["payload"],
                                                      False, dispatch=k)
            out = ClientRows.of(answer).as_dict()
            row = {c: i for i, c in enumerate(costs.clients)}
            for seq, c in items:
                self.results[seq] = {**self._update(out[c], snap["z"]),
                                     "cost": member_cost(costs, row[c], out[c], snap["down"])}
            self._predict(costs, snap["down"])

    def _update(self, contribution: dict[str, Any], z: dict[str, Any]) -> dict[str, Any]:
        """A contribution as the rule reads it: each quantity's y (its value / its weight), or
        for FedBuff the delta z^v - y where the server had a value."""
        form = self.form
        n = 1.0 if form.count is None else contribution[form.count]
        n = float(n) if not isinstance(n, torch.Tensor) else float(n.reshape(()).item())
        y, is_delta = {}, []
        for name, key in [("w", form.model)] + list(form.estimates):
            yi = f64(contribution[key]) / n
            if self.rule.deltas and z[name] is not None:
                y[name] = f64(z[name]) - yi
                is_delta.append(name)
            else:
                y[name] = yi
        return {"y": y, "delta": is_delta}

    # --- the server's rule ------------------------------------------------------------
    def _apply(self, accepted: list[tuple[int, dict[str, Any]]], w: torch.Tensor,
               state: dict[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
        current = {"w": w, **{sk: state.get(sk) for sk, _ in self.form.estimates}}
        new = apply(self.rule, accepted, current, w.dtype)
        return new.pop("w"), {**state, **new}

    # --- checkpoints ------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The queue, the versions and updates of the clients in flight, the predicted work,
        the repeat counts and the last row's columns: a resumed run continues exactly (the
        buffer is empty at a step boundary)."""
        w = self.work
        return {"queue": self.queue.state(), "started": self.started, "versions": self.versions,
                "pending": [list(p) for p in self.pending], "results": self.results,
                "work": None if w is None else [w.samples, w.bytes_down, w.bytes_up, w.data_samples, w.oracle_calls],
                "repeats": [self.repeats[0], sorted(self.repeats[1].items())], "last": dict(self.last)}

    def load(self, state: dict[str, Any] | None) -> None:
        if state is None:  # (a checkpoint without an asynchronous server's state: nothing in flight)
            return
        self.queue.load(state["queue"])
        self.started = bool(state["started"])
        self.versions = {int(k): v for k, v in state["versions"].items()}
        self.pending = [(int(p[0]), int(p[1]), int(p[2]), int(p[3]) if len(p) > 3 else 0) for p in state["pending"]]
        self.results = {int(k): v for k, v in state["results"].items()}
        self.work = None if state["work"] is None else Workload(*map(float, state["work"]))
        v, seen = state.get("repeats", [-1, []])
        self.repeats = (int(v), {int(c): int(n) for c, n in seen})
        self.last = dict(state["last"])
