"""The local compositional-gradient family of the Local-SCGDM paper (Gao, Li & Huang):
Local-SCGDM, Local-SCGD, Local-MOML and Local-BSGD share one local step and differ in
its coefficients and in what the server averages every p steps.

Problem (Local-SCGDM eq. 1, for MAML eq. 8): min_x 1/K sum_k f^(k)(g^(k)(x)), where on a
meta-batch of tasks j the inner map is g_j(x; xi) = x - lambda grad L_j(x; support_j) and
the outer function f_j(y; zeta) = L_j(y; query_j). One local step at iteration t:

    y_j = g_j(x_t; xi_t)                                 inner values (one per task)
    u   <- (1 - c_u) u + c_u * y                         inner state    (Alg. 1 line 7)
    z_t = 1/B sum_j J_{g_j}(x_t)^T grad f_j(u; zeta_t)    at the NEW u   (line 8)
    m   <- (1 - c_m) m + c_m * z_t                       momentum       (line 9)
    x   <- x - s * m                                     step           (line 11)

with, at the very first iteration t = 0, u_1 = y and m_1 = z_0 (lines 3-5). The
coefficients `c_u` and `c_m` weigh the NEW sample, the old state keeps 1 - c, as in
the algorithm box (line 7: u_{t+1} = (1 - gamma eta) u_t + gamma eta g(x_t)).

Inner state `u` is either one estimate shared by all of a client's tasks (u in R^d,
the mean of the sampled tasks' inner values enters the average; Algorithm 1 as
written) or one estimate u_i per task i (`per_task`, MOML and section 5.1's fair
comparison), created by line 3's rule the first time task i is sampled, and kept in
the owning client's persistent state for the whole run (rows of one tensor per client:
algorithms/task_states.py). Per-task states are never
averaged: every task lives on exactly one client.

The engine's round is one communication period: p local steps, then the server
averages what the variant communicates (lines 12-16) and sends it back with the
next round's payload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from raycompo.algorithms import task_states
from raycompo.algorithms.base import Algorithm, Buffered, client_phase
from raycompo.algorithms.chunk_state import ChunkState
from raycompo.algorithms.cohort import batched_phase
from raycompo.algorithms.task_states import U_SEEN, U_TASK
from raycompo.compression.keys import WEIGHT, update
from raycompo.errors import ConfigError
from raycompo.problems import maml_batched
from raycompo.problems.maml import meta_batch_vjp
from raycompo.settings import require, row_scalar


@dataclass
class LocalCompositionalSettings:
    """Settings shared by Local-SCGDM, Local-SCGD, Local-MOML and Local-BSGD."""

    lr: float = 0.01
    """Meta learning rate (Local-SCGDM: the coefficient beta of the step beta*eta)."""
    p: int = 5
    """Communication period p: local steps between two averagings (one round)."""
    batch_size: int | None = 3
    """Tasks per client per meta-iteration (the meta-batch; None: all the client's tasks)."""
    clients_per_round: int | None = None
    """Clients sampled per round (None: all K devices, as in Algorithm 1)."""
    first_order: bool = False
    """Drop the Hessian-vector product of the MAML inner map (first-order MAML); default: exact second order."""

    def validate(self, n_clients: int) -> None:
        require(self.lr > 0, f"lr must be > 0, got {self.lr}")
        require(self.p >= 1, f"p (communication period) must be >= 1, got {self.p}")
        require(
            self.batch_size is None or self.batch_size >= 1,
            f"batch_size must be >= 1, got {self.batch_size}",
        )
        m = self.clients_per_round
        require(
            m is None or 1 <= m <= n_clients,
            f"clients_per_round must be in [1, n={n_clients}], got {m}",
        )

    def cohort_size(self, n_clients: int) -> int:
        return n_clients if self.clients_per_round is None else self.clients_per_round


def require_coefficient(name: str, value: float, closed: bool = False) -> None:
    """A moving-average weight in (0, 1), or (0, 1] when `closed`."""
    ok = 0 < value <= 1 if closed else 0 < value < 1
    bound = "(0, 1]" if closed else "(0, 1)"
    require(ok, f"{name} = {value:g} must be in {bound}")


@dataclass(frozen=True)
class Recurrence:
    """The coefficients of one local step and what the server averages."""

    step: float
    """s: x <- x - s * m."""
    inner: float | None
    """c_u, weight of the new inner value in u; None: no inner state (plug-in, BSGD)."""
    momentum: float | None
    """c_m, weight of z in m; None: no momentum (m = z)."""
    per_task: bool = False
    """One inner state u_i per task, kept on the owning client."""

    @property
    def averages(self) -> tuple[str, ...]:
        """What the server averages every p steps besides x (lines 13-15)."""
        out = []
        if self.momentum is not None:
            out.append("m")
        if self.inner is not None and not self.per_task:
            out.append("u")
        return tuple(out)


def moving_average(old: torch.Tensor | None, new: torch.Tensor, weight: Any) -> torch.Tensor:
    """(1 - weight) * old + weight * new; the first value (old None) is `new` itself. `weight`
    a number, or in a population's chunk one per row of (k, ...) values (`settings.row_scalar`)."""
    if old is None:
        return new
    weight = row_scalar(weight, new)
    return (1 - weight) * old + weight * new


class LocalCompositional(Algorithm):
    """Base of the four variants: a subclass sets `name`, `Settings` and `recurrence`."""
    contributions = {"local": {"x": update("w"), "m": update("m"), "u": update("u"), "count": WEIGHT}}
    """What a client sends up, per phase (raycompo/compression/keys.py)."""

    Settings: ClassVar[type] = LocalCompositionalSettings

    requires = frozenset({"composition"})

    def __init__(self, settings: Any, task: Any):
        super().__init__(settings, task)
        self.problem = task.composition(first_order=settings.first_order)

    @classmethod
    def check_task(cls, task_cls, settings) -> None:
        if "composition" not in task_cls.capabilities:
            raise ConfigError(
                f"{cls.name} needs a compositional (meta-learning) task such as maml-sinusoid or maml-omniglot; {task_cls.name} is not one"
            )
        probe = object.__new__(cls)  # recurrence() reads only the settings
        probe.s = settings
        if probe.recurrence().per_task and "task_ids" not in task_cls.capabilities:
            raise ConfigError(
                f"{cls.name} with one inner state per task needs a task with a finite set of training tasks "
                f"(e.g. maml-sinusoid); {task_cls.name} draws new tasks at every step"
            )

    @classmethod
    def cannot_batch_task(cls, task_cls, settings) -> str | None:
        if not getattr(task_cls, "vmap_meta_batches", False):
            return f"{cls.name} on task {task_cls.name}: its meta-batches do not declare vmap_meta_batches (vectorized: maml-sinusoid)"
        return None

    @classmethod
    def cannot_batch_model(cls, model) -> str | None:
        return "has buffers (batch statistics), which the vmap of MAML rows does not batch" if model.buffers else None

    def recurrence(self) -> Recurrence:
        raise NotImplementedError

    # --- asynchronous form (issue 31; a research extension) ------------------------------
    @classmethod
    def asynchronous(cls, settings):
        """Buffered: a client runs the p local steps from the version it downloaded (x, and
        the server's m-bar and u-bar of that version); its x, m and u are merged like the
        model (FedBuff: z <- z - eta_g (1/K) sum s(tau) (z^{t'} - z_i)). The global
        iteration t0 is the version times p. A per-task u_i stays on its client."""
        probe = object.__new__(cls)  # recurrence() reads only the settings
        probe.s = settings
        return Buffered(phase="local", model="x", count="count", estimates=tuple((k, k) for k in probe.recurrence().averages))

    def async_payload(self, w, state, version):
        return {"w": w, "t0": version * self.s.p, **{k: state.get(k) for k in self.recurrence().averages}}

    # --- server: lines 12-16 --------------------------------------------------------
    def server_round(self, ctx, w, state):
        p = self.s.p
        cohort = ctx.sample(self.s.cohort_size(ctx.n_clients))
        payload = {
            "w": w,
            "t0": ctx.round * p,
            **{k: state.get(k) for k in self.recurrence().averages},
        }
        sums = ctx.map("local", cohort, payload)
        n = sums["count"]
        averaged = {k: sums[k] / n for k in self.recurrence().averages}  # m-bar, u-bar
        return sums["x"] / n, averaged  # x-bar

    # --- client: p local steps, lines 2-11 --------------------------------------------
    def init_client_state(self, c):
        return {U_TASK: {}}  # none yet; per_task: rows (algorithms/task_states.py) once sampled

    @client_phase("local")
    def client_local(self, c, state, payload):
        r = self.recurrence()
        x, m, u = payload["w"], payload.get("m"), payload.get("u")
        if r.per_task:  # u_i of the client's j-th task in row j (copies: a new state)
            u_rows, seen = task_states.rows_of(state, c.data.task_ids, task_states.slots(self.task, c.data.task_ids), x)
            row = task_states.position(c.data.task_ids)
        for t in range(self.s.p):
            first = payload["t0"] + t == 0  # global iteration t = 0: lines 3-5
            tasks = c.data.batch(c.rng(t), self.s.batch_size)
            ys, pull = meta_batch_vjp(self.problem, x, [(s.support, s.query) for s in tasks])
            if r.inner is None:  # plug-in: grad f at g(x) itself (BSGD)
                hats = ys
            elif r.per_task:  # u_i <- (1 - c_u) u_i + c_u g_i(x); u_i = g_i(x) when new
                for s, y in zip(tasks, ys):
                    j = row[s.key]
                    u_rows[j] = moving_average(u_rows[j] if seen[j] else None, y, r.inner)
                    seen[j] = True
                hats = [u_rows[row[s.key]].clone() for s in tasks]  # each its own storage, as a new u_i was:
                # a row's offset in u_rows changes the products' rounding (their alignment)
            else:  # lines 3 / 7 with the meta-batch mean of the inner values
                u = moving_average(None if first else u, torch.stack(ys).mean(0), r.inner)
                hats = [u] * len(tasks)
            z = pull(hats)  # lines 4 / 8
            if r.momentum is None:  # no momentum: the step follows z itself
                m = z
            else:  # lines 5 / 9
                m = moving_average(None if first else m, z, r.momentum)
            x = x - r.step * m  # line 11
        out = {"x": x, "count": 1.0}
        if "m" in r.averages:
            out["m"] = m
        if "u" in r.averages:
            out["u"] = u
        kept = {U_TASK: u_rows, U_SEEN: seen} if r.per_task else {}
        kept.update((k, v) for k, v in (("m", m), ("u", u)) if v is not None)  # m, u: for inspection
        return out, {**state, **kept}

    # --- the same p local steps for a chunk of clients at once (algorithms/cohort.py) ------
    # A row is (a client's iterate, one task of its meta-batch); the inner maps and their
    # pull-backs of all rows run as one vmap (problems/maml_batched.py), and the sampled
    # tasks' per-task states are read and written as rows of the chunk's (k, T, d) states
    # with one indexed operation each (algorithms/task_states.py). In a population's chunk (each variant
    # declares `population_phases`) the coefficients s, c_u, c_m are (k,) tensors, one per
    # client row (`row_algorithm`), and the payload's x, m-bar, u-bar each row's trial's.
    @batched_phase("local")
    def batched_local(self, cb, states, payload):
        r, k = self.recurrence(), cb.k

        def rows_of(v):  # a payload state (d,) as k rows, or None
            return None if v is None else cb.broadcast(v)

        x, m, u = cb.broadcast(payload["w"]), rows_of(payload.get("m")), rows_of(payload.get("u"))
        if r.per_task:  # (k, T, d) and (k, T): the chunk's per-task states, as (k T) rows
            u_rows, seen = self._task_rows(cb, states, x)
            width = u_rows.shape[1]
            u_flat, seen_flat = u_rows.view(k * width, -1), seen.view(-1)
        for t in range(self.s.p):
            first = payload["t0"] + t == 0
            owner, position, support, query = self._meta_rows(cb, t, x.device)
            xr = x[owner]
            ys = maml_batched.inner_values(self.problem, xr, support)
            if r.inner is None:
                hats = ys
            elif r.per_task:  # the sampled tasks' rows, read and written at once (distinct within a step)
                at = owner * width + position
                weight = r.inner[owner] if isinstance(r.inner, torch.Tensor) else r.inner
                hats = torch.where(seen_flat[at].unsqueeze(1), moving_average(u_flat[at], ys, weight), ys)
                u_flat[at] = hats
                seen_flat[at] = True
            else:
                u = moving_average(None if first else u, maml_batched.row_means(ys, owner, k), r.inner)
                hats = u[owner]
            z = maml_batched.row_means(maml_batched.pull(self.problem, xr, support, query, hats), owner, k)
            m = z if r.momentum is None else moving_average(None if first else m, z, r.momentum)
            x = x - row_scalar(r.step, m) * m
        out: dict[str, Any] = {"x": x, "count": [1.0] * k}
        if "m" in r.averages:
            out["m"] = m
        if "u" in r.averages:
            out["u"] = u
        kept = {U_TASK: u_rows, U_SEEN: seen} if r.per_task else {}
        kept.update((key, v) for key, v in (("m", m), ("u", u)) if v is not None)
        return out, cb.new_states(states, kept)

    def _meta_rows(self, cb, t: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, Any, Any]:
        """(owner, position, support, query) of step t's R sampled tasks, as rows
        (`MetaRows`), their oracle calls counted: drawn for the chunk at once where the task
        can (`MetaTask.meta_rows`: keyed draws), else client by client (`batch`) and stacked."""
        drawn = cb.task.meta_rows(cb.data, cb.step_seeds(t), self.s.batch_size) if cb.sampler == "keyed" else None
        if drawn is None:
            draws = [c.data.batch(c.rng(t), self.s.batch_size) for c in cb.clients]
            tasks = [(i, s) for i, d in enumerate(draws) for s in d]
            at = [task_states.position(c.data.task_ids) for c in cb.clients] if self.recurrence().per_task else None
            owner = torch.tensor([i for i, _ in tasks], dtype=torch.int64, device=device)
            position = torch.tensor([at[i][s.key] if at else 0 for i, s in tasks], dtype=torch.int64, device=device)
            support = maml_batched.stack_sets([s.support for _, s in tasks])
            query = maml_batched.stack_sets([s.query for _, s in tasks])
            per_client = [len(d) for d in draws]
        else:
            owner, position, support, query = drawn.owner.to(device), drawn.position.to(device), drawn.support, drawn.query
            per_client = drawn.per_client
        maml_batched.count_calls(self.problem, support, query, per_client)
        return owner, position, support, query

    def _task_rows(self, cb, states, x) -> tuple[torch.Tensor, torch.Tensor]:
        """(u_task (k, T, d), u_seen (k, T)) of a chunk: a `ChunkState`'s stacked rows as
        they are (copied: the phase writes them), else client by client
        (`task_states.rows_of`: a state of an earlier release, or none yet)."""
        ids = [c.data.task_ids for c in cb.clients]
        if isinstance(states, ChunkState) and isinstance(states.tensors.get(U_TASK), torch.Tensor) and states.present is None:
            u_rows, seen = states.tensors[U_TASK].clone(), states.tensors[U_SEEN].clone()
        else:
            width = max(task_states.slots(self.task, tids) for tids in ids)
            parts = [task_states.rows_of(st, tids, width, x[0]) for st, tids in zip(states, ids)]
            u_rows, seen = torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])
        return u_rows.to(x.device, x.dtype), seen.to(x.device)
