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

The clients' computations are lazy: a client's update is computed when first needed (its
arrival), together with every other dispatched client not yet computed, one pool call per
model version: clients dispatched with the same version run as one batched computation.
A client's computation depends only on (client, version) and its own state, so laziness
changes no number. The ledger counts a client's download, samples and upload in the row of
the step at which its update arrived (accepted or dropped); clients still in flight at the
end are not counted.
"""

from __future__ import annotations

from typing import Any

import torch

from raycompo.costs.exchange import ExchangeCost
from raycompo.engine.ledger import count_by_key, count_values
from raycompo.system import draws
from raycompo.system.clock import Workload, member_time, member_work
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


def _f64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.float64)


class AsyncServer:
    """The event state of an asynchronous run, owned by the `Federation` (the driver)."""

    def __init__(self, fed: Any, plan: Any, form: Any):
        self.fed = fed
        self.plan = plan
        self.form = form
        self.queue = Queue()
        self.started = False
        self.versions: dict[int, dict[str, Any]] = {}
        """version -> {'payload', 'z'} while a dispatched client of that version is not computed."""
        self.pending: list[tuple[int, int, int]] = []
        """(seq, client, version) of dispatched clients not computed yet, in dispatch order."""
        self.results: dict[int, dict[str, Any]] = {}
        """seq -> the computed update of a client in flight: 'y' ({quantity: y} or, FedBuff,
        the delta z^v - y where the server had a value), 'delta' (which quantities are
        deltas), 'cost' (samples, values/bytes up and down, by key)."""
        self.work: Workload | None = None
        """The predicted work of a member: the mean of the last computed group."""
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
        members: list[tuple[int, dict[str, Any], bool]] = []  # (client, cost, uploaded)
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
            r = self._result(e.seq)
            if e.lost:  # went offline before finishing: downloaded and worked, sent nothing
                members.append((e.client, r["cost"], False))
                system.drop(e.client, e.time - e.start, True)
                continue
            members.append((e.client, r["cost"], True))
            tau = version - e.version
            if plan.settings.max_staleness is not None and tau > plan.settings.max_staleness:
                system.drop(e.client, e.time - e.start, False)
                continue
            accepted.append((tau, r))
        w, state = self._apply(accepted, w, state)
        live = {v for _, _, v in self.pending}  # keep only the versions a client still has to compute from
        self.versions = {v: snap for v, snap in self.versions.items() if v in live}
        self._record(members, version + 1)
        system.now = q.now
        taus = [t for t, _ in accepted]
        self.last = {"staleness_mean": sum(taus) / len(taus), "staleness_max": max(taus), "in_flight": len(q.in_flight)}
        return w, state

    def columns(self) -> dict[str, Any]:
        """The row's asynchronous columns (COLUMNS) after the last step."""
        return dict(self.last)

    # --- dispatch -------------------------------------------------------------------
    def _snapshot(self, version: int, w: torch.Tensor, state: dict[str, Any]) -> dict[str, Any]:
        snap = self.versions.get(version)
        if snap is None:
            payload = self.fed.algorithm.async_payload(w, state, version)
            if self.plan.proximal:
                payload = {**payload, "prox_rho": self.plan.settings.async_rho}
            z = {"w": w, **{sk: state.get(sk) for sk, _ in self.form.estimates}}
            snap = self.versions[version] = {"payload": payload, "z": z}
        return snap

    def _dispatch(self, group: list[Event], w: torch.Tensor, state: dict[str, Any], version: int) -> None:
        """Fill the slots of `group` (DISPATCH events of one instant) in their order."""
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
        if not started:
            return
        system.keep([c for _, c, _ in started])  # `selected`, per client
        snap = self._snapshot(version, w, state)
        if self.work is None:  # nothing computed yet: this group's own work predicts its times
            self.pending += [(seq, c, version) for seq, c, _ in started]
            self._compute()
        assert self.work is not None
        bytes_down = float(count_values(snap["payload"])[1])
        rates = system.devices.rates
        for seq, c, start in started:
            finish = start + member_time(rates(c), self.work.samples, bytes_down, self.work.bytes_up)
            left = None if avail.always else avail.online_until(c, start)
            if left is not None and left < finish:  # offline before it finishes: lost; its slot frees when it leaves
                # (not computed; only a client of the very first group was, to predict the work)
                self.results[seq] = {"cost": {"samples": 0, "values_up": 0, "bytes_up": 0,
                                              "down": count_by_key(snap["payload"]), "up": {}}}
                q.push(Event(left, ARRIVAL, seq, client=c, version=version, lost=True, start=start))
                continue
            if seq not in self.results:
                self.pending.append((seq, c, version))
            q.push(Event(finish, ARRIVAL, seq, client=c, version=version, start=start))

    # --- lazy computation -------------------------------------------------------------
    def _result(self, seq: int) -> dict[str, Any]:
        if seq not in self.results:
            self._compute()
        return self.results.pop(seq)

    def _compute(self) -> None:
        """Every dispatched client not computed yet, one pool call per model version."""
        fed, form = self.fed, self.form
        by_version: dict[int, list[tuple[int, int]]] = {}
        for seq, c, v in self.pending:
            by_version.setdefault(v, []).append((seq, c))
        self.pending = []
        quantities = [("w", form.model)] + list(form.estimates)
        deltas = self.plan.kind == "buffered"
        for v in sorted(by_version):
            payload, z = self.versions[v]["payload"], self.versions[v]["z"]
            down = count_by_key(payload)
            items = by_version[v]
            assert fed.pool is not None
            out, costs = fed.pool.map(form.phase, v, {c: 1 for _, c in items}, payload, False, count=True)
            row = {c: i for i, c in enumerate(costs.clients)}
            samples = []
            ups = []
            for seq, c in items:
                contribution = out[c]
                n = 1.0 if form.count is None else contribution[form.count]
                n = float(n) if not isinstance(n, torch.Tensor) else float(n.reshape(()).item())
                y, is_delta = {}, []
                for name, key in quantities:
                    yi = _f64(contribution[key]) / n
                    if deltas and z[name] is not None:
                        y[name] = _f64(z[name]) - yi
                        is_delta.append(name)
                    else:
                        y[name] = yi
                i = row[c]
                up = count_by_key(contribution)  # the decoded contribution: a compressed key's bytes are its message's
                up.update({key: (up[key][0], size) for key, size in costs.encoded.get(c, {}).items()})
                calls = costs.oracle_calls[i] if costs.oracle_calls else 0
                cost = {"samples": costs.samples[i], "oracle_calls": calls, "values_up": costs.values_up[i], "bytes_up": costs.bytes_up[i],
                        "down": down, "up": up}
                self.results[seq] = {"y": y, "delta": is_delta, "cost": cost}
                samples.append(member_work(costs, i))
                ups.append(costs.bytes_up[i])
            self.work = Workload(sum(samples) / len(samples), 0.0, sum(ups) / len(ups))

    # --- the server's rule ------------------------------------------------------------
    def _apply(self, accepted: list[tuple[int, dict[str, Any]]], w: torch.Tensor,
               state: dict[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
        s = self.plan.settings
        current = {"w": w, **{sk: state.get(sk) for sk, _ in self.form.estimates}}
        new: dict[str, Any] = {}
        for name, z in current.items():
            if z is None:  # the server has no value yet (e.g. m-bar before the first step): their mean
                new[name] = sum(r["y"][name] for _, r in accepted) / len(accepted)
                continue
            z64 = _f64(z)
            if self.plan.kind == "buffered":  # FedBuff: z - eta_g (1/K) sum s(tau) Delta
                acc = torch.zeros_like(z64)
                for tau, r in accepted:
                    delta = r["y"][name] if name in r["delta"] else z64 - r["y"][name]
                    acc += s.weight(tau) * delta
                new[name] = z64 - s.server_lr / len(accepted) * acc
            else:  # FedAsync: (1 - alpha_t) z + alpha_t y, alpha_t = alpha s(tau)
                tau, r = accepted[0]
                a = s.async_alpha * s.weight(tau)
                new[name] = (1 - a) * z64 + a * r["y"][name]
        dtype = w.dtype
        w_next = new.pop("w").to(dtype)
        return w_next, {**state, **{k: v.to(dtype) for k, v in new.items()}}

    def _record(self, members: list[tuple[int, dict[str, Any], bool]], round_: int) -> None:
        """One ledger entry for the step: every member that arrived or was lost in it."""
        if not members:
            return
        by_client: dict[int, dict[str, Any]] = {}
        by_key: dict[str, dict[str, int]] = {}
        for c, cost, uploaded in members:
            acc = by_client.setdefault(c, {"mult": 0, "samples": 0, "calls": 0, "vd": 0, "bd": 0, "vu": 0, "bu": 0})
            acc["mult"] += 1
            acc["samples"] += cost["samples"]
            acc["calls"] += cost.get("oracle_calls", 0)
            for key, (v, b) in cost["down"].items():
                acc["vd"] += v
                acc["bd"] += b
                k = by_key.setdefault(f"down:{key}", {"values": 0, "bytes": 0})
                k["values"] += v
                k["bytes"] += b
            if uploaded:
                acc["vu"] += cost["values_up"]
                acc["bu"] += cost["bytes_up"]
                for key, (v, b) in cost["up"].items():
                    k = by_key.setdefault(f"up:{key}", {"values": 0, "bytes": 0})
                    k["values"] += v
                    k["bytes"] += b
        clients = sorted(by_client)
        col = lambda key: [by_client[c][key] for c in clients]  # noqa: E731
        ledger = self.fed.ledger
        ledger.record(ExchangeCost(round=round_, phase=self.form.phase, index=ledger.next_index(round_), clients=clients,
                                   multiplicity=col("mult"), samples=col("samples"), values_down=col("vd"),
                                   values_up=col("vu"), bytes_down=col("bd"), bytes_up=col("bu"), by_key=by_key,
                                   oracle_calls=col("calls")))

    # --- checkpoints ------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The queue, the versions and updates of the clients in flight, the predicted work
        and the last row's columns: a resumed run continues exactly (the buffer is empty at
        a step boundary)."""
        return {"queue": self.queue.state(), "started": self.started, "versions": self.versions,
                "pending": [list(p) for p in self.pending], "results": self.results,
                "work": None if self.work is None else [self.work.samples, self.work.bytes_down, self.work.bytes_up],
                "last": dict(self.last)}

    def load(self, state: dict[str, Any]) -> None:
        self.queue.load(state["queue"])
        self.started = bool(state["started"])
        self.versions = {int(k): v for k, v in state["versions"].items()}
        self.pending = [(int(a), int(b), int(c)) for a, b, c in state["pending"]]
        self.results = {int(k): v for k, v in state["results"].items()}
        self.work = None if state["work"] is None else Workload(*map(float, state["work"]))
        self.last = dict(state["last"])

