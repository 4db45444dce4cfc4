"""The algorithm interface: a server round written against a context, and declared
client phases.

An algorithm reads like the paper's pseudo-code:

* `server_round(ctx, w, state)` is the server's part of one round (one communication
  round s of ComFedL, one model-averaging period of FedDRO). It samples cohorts with
  `ctx.sample(...)` and runs client phases with `ctx.map(phase, cohort, payload)`, which
  returns the cohort's SUM of the phase's contributions (pre-reduced on each host). It
  returns the new model and the new server state; it never mutates its inputs.
* A client phase is a method decorated with `@client_phase("name")`:
  `(c, state, payload) -> (contribution, new_state)`. `c` is the client's context (its
  data, its random streams `c.rng(step)` seeded by (seed, client, round, step), and
  `c.scratch`, a cache that lives for ONE round and is never saved); `state` is the
  client's persistent state (momentum, inner estimates, personal model...), a dict of
  tensors, numbers and nested dicts that the engine owns: it stores, checkpoints, spills
  and restores exactly what a phase returns.
* `requires` names the task capabilities the algorithm needs (see `Task.capabilities`);
  `resolve()` rejects a pair that does not fit before anything runs.

Algorithms never import Ray: the engine implements `ctx` inline or over Ray actors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

import torch

from raycompo.algorithms.client_rows import ClientRows
from raycompo.compression.keys import Sent
from raycompo.errors import ConfigError
from raycompo.settings import require
from raycompo.tasks.base import ClientData, Task

Payload = dict[str, Any]
Contribution = dict[str, Any]
State = dict[str, Any]
"""A client's persistent state: tensors, numbers, None and nested dicts of those."""
PhaseResult = tuple[Contribution, State]


class ClientContext(Protocol):
    """What a client phase sees besides its state and the payload."""

    client_id: int
    data: ClientData
    round: int
    device: torch.device
    scratch: dict[str, Any]
    """A cache between phases of the current round only (e.g. FedDRO's Jacobian); cleared
    at the next round, never checkpointed."""

    def rng(self, step: int, stream: int = 0) -> torch.Generator: ...


class RoundContext(Protocol):
    """What the server's round sees."""

    round: int
    n_clients: int

    def rng(self, stream: int = 0) -> torch.Generator: ...

    def sample(self, m: int, stream: int = 0) -> list[int]: ...

    def map(self, phase: str, cohort: list[int], payload: Payload) -> dict[str, Any]: ...

    def map_each(self, phase: str, cohort: list[int], payload: Payload) -> dict[int, dict[str, Any]]: ...

    def map_rows(self, phase: str, cohort: list[int], payload: Payload) -> ClientRows:
        """`map_each`'s contributions as rows (algorithms/client_rows.py): `stacked` / `flat`
        read every member's value with no work per member."""
        ...


PhaseFn = TypeVar("PhaseFn", bound=Callable[[Any, Any, State, Payload], PhaseResult])


def client_phase(name: str) -> Callable[[PhaseFn], PhaseFn]:
    """Declare a method as the client phase `name` that `ctx.map(name, ...)` runs."""

    def mark(fn: PhaseFn) -> PhaseFn:
        fn.__client_phase__ = name  # type: ignore[attr-defined]
        return fn

    return mark


@dataclass
class LocalSettings:
    """Settings shared by the local-update (local-SGD style) algorithms."""

    lr: float = 0.01
    """Learning rate eta of the local steps."""
    tau: int = 5
    """Synchronization gap tau: local steps between two averagings."""
    batch_size: int | None = 32
    """Mini-batch size b drawn from D_i at every local step (None: full local data)."""
    clients_per_round: int | None = None
    """Cohort size m sampled by the server each round (None: all n clients)."""

    def validate(self, n_clients: int) -> None:
        require(self.lr > 0, f"lr must be > 0, got {self.lr}")
        require(self.tau >= 1, f"tau must be >= 1, got {self.tau}")
        require(self.batch_size is None or self.batch_size >= 1, f"batch_size must be >= 1, got {self.batch_size}")
        m = self.clients_per_round
        require(
            m is None or 1 <= m <= n_clients,
            f"clients_per_round (m) must be in [1, n={n_clients}], got {m}",
        )

    def cohort_size(self, n_clients: int) -> int:
        return n_clients if self.clients_per_round is None else self.clients_per_round


@dataclass(frozen=True)
class Buffered:
    """How the engine runs an algorithm written for synchronous rounds asynchronously
    (`--aggregation buffered|async`, raycompo/engine/asynchronous.py; docs/system.md).

    A dispatched client runs `phase` once with the payload `Algorithm.async_payload` built
    from the model version it downloads. Its contribution holds, for each server quantity z
    (the model `w` and the server-state keys of `estimates`), the client's new value y times
    `count` (its weight in the synchronous average, e.g. FedAvg's n_i); the engine reads
    y = contribution[key] / contribution[count]. FedBuff merges Delta = z^{t'} - y
    (z^{t'}: the server's value at the client's download) as z <- z - eta_g (1/K) sum
    s(tau) Delta; FedAsync as z <- (1 - alpha s(tau)) z + alpha s(tau) y. For every
    algorithm but FedAvg this is a research extension, not the paper's algorithm."""

    phase: str = "local"
    """The client phase a dispatched client runs."""
    model: str = "w"
    """The contribution key of the client's model (times `count`)."""
    count: str | None = None
    """The contribution key of the client's weight in the synchronous average (None: 1)."""
    estimates: tuple[tuple[str, str], ...] = ()
    """(server-state key, contribution key) pairs of shared inner estimates merged like the
    model (e.g. Local-SCGDM's m-bar and u-bar)."""
    proximal: bool = False
    """The phase reads payload['prox_rho'] > 0 as FedAsync's term (rho / 2) ||x - w^{t'}||^2
    of the local objective (only such algorithms accept `async_rho` > 0)."""


class Algorithm:
    """Base class. Subclasses set `name` and `Settings`, write `server_round` and declare
    their client phases with `@client_phase`."""

    name: ClassVar[str]
    Settings: ClassVar[type] = LocalSettings
    requires: ClassVar[frozenset[str]] = frozenset({"classification"})
    """Task capabilities this algorithm needs (`Task.capabilities`, with what they imply:
    `Task.provided`): name what the algorithm uses (e.g. 'loss', a mean loss and its
    gradient), not a kind of task it was first written for."""
    population_phases: ClassVar[frozenset[str]] = frozenset()
    """Batched phases that run a population's trials (engine/population.py) as rows of one
    chunk: they read every payload tensor through `CohortBatch.broadcast` and each of
    `row_settings` as a number or a (k,) tensor of the rows' values (`settings.row_scalar`),
    and keep nothing for a later phase (`CohortBatch.keep_rows`: a population's chunk repeats
    client ids) unless every trial runs the same phases in lockstep, so that the next phase is
    cut into the same chunks of the same trials (FedDRO's I + 1 exchanges a round). Declared
    by the class itself (not inherited, as batched phases are not)."""
    row_settings: ClassVar[frozenset[str]] = frozenset()
    """Settings that may differ between a population's trials (float settings that only scale
    arithmetic: step sizes, gamma); any other difference runs the trials apart."""
    row_payload: ClassVar[frozenset[str]] = frozenset()
    """Payload keys of `population_phases` whose Python floats may differ between a
    population's trials (a step size the server computes each round, a normalizer): they
    arrive as `TrialValues`, read with `CohortBatch.row_value` (a (k,) tensor of the rows'
    values); any other differing number runs the trials apart."""
    contributions: ClassVar[dict[str, dict[str, Sent]]] = {}
    """Client phase -> {contribution key: how it travels} (raycompo/compression/keys.py:
    `VALUE`, `update(of, weight)`, `WEIGHT`): what a client sends up, for `--compress`,
    client-level DP and `--list`. Empty: not declared (every key then travels as a value,
    and `--compress` cannot check a key's name before the run)."""
    own_cohorts: ClassVar[str | None] = None
    """Why the algorithm draws (some of) its cohorts itself instead of through `ctx.sample`
    (e.g. DRFL's draw with replacement by its mixing weights), or None. A simulated system
    that chooses cohorts (clients offline part of the time, over-selection, a deadline:
    anything but the engine's own draw) refuses such an algorithm before the first round,
    with this reason: its cohorts would bypass availability and selection unseen. So does
    client-level DP (`--dp-clip`): its accountant assumes m distinct clients drawn
    uniformly without replacement by `ctx.sample`, which a draw with replacement (a client
    contributing once per draw) or by weights is not."""
    phases: ClassVar[dict[str, str]] = {}
    """Client phase name -> method name, collected from `@client_phase` declarations."""
    batched_phases: ClassVar[dict[str, str]] = {}
    """Client phase name -> method name of its batched form (`algorithms.cohort.batched_phase`),
    declared in this very class (never inherited; see raycompo/configuration/vectorize.py). One exception:
    a class that keeps the base `client_evaluate` gets its batched form, `batched_evaluate`
    (see __init_subclass__)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        found: dict[str, str] = {}
        for klass in reversed(cls.__mro__):  # mixins (e.g. AdaptedEvaluation) declare phases too
            for attr, value in vars(klass).items():
                phase = getattr(value, "__client_phase__", None)
                if phase is not None:
                    found[phase] = attr
        cls.phases = found
        cls.batched_phases = {value.__batched_phase__: attr for attr, value in vars(cls).items()
                              if getattr(value, "__batched_phase__", None) is not None}
        if found.get("evaluate") == "client_evaluate" and cls.client_evaluate is Algorithm.client_evaluate:
            cls.batched_phases.setdefault("evaluate", "batched_evaluate")  # the base evaluation, unchanged
        orphans = sorted(set(cls.batched_phases) - set(found))
        if orphans:  # it would never run: the engine runs a batched phase in place of its client phase
            raise TypeError(f"{cls.__qualname__}: batched phase(s) {', '.join(map(repr, orphans))} without a client "
                            f"phase of that name; a batched phase is the batched form of a client phase "
                            f"(@raycompo.client_phase({orphans[0]!r})), which runs where it cannot batch")

    def __init__(self, settings: Any, task: Task):
        self.s = settings
        self.task = task

    @classmethod
    def check_task(cls, task_cls: type[Task], settings: Any) -> None:
        """Reject a task this algorithm cannot run on (ConfigError), before anything runs.
        The default checks `requires` against the task's declared capabilities (`resolve`
        adds the registered tasks that have them to the message)."""
        missing = sorted(cls.requires - task_cls.provided())
        if missing:
            raise ConfigError(
                f"algorithm {cls.name} needs a task with {', '.join(missing)}; task {task_cls.name} has "
                f"{', '.join(sorted(task_cls.capabilities)) or 'none of that'}"
            )

    def phase(self, name: str) -> Callable[[Any, State, Payload], PhaseResult]:
        """The bound client phase `name`; a ConfigError naming the declared ones otherwise."""
        attr = self.phases.get(name)
        if attr is None:
            raise ConfigError(
                f"algorithm {self.name} has no client phase {name!r}; its phases: {', '.join(sorted(self.phases))}"
            )
        return getattr(self, attr)

    @classmethod
    def cannot_batch(cls, settings: Any) -> str | None:
        """Why these settings keep this algorithm's batched phases from applying (None: they
        apply); an algorithm with batched phases overrides it where some settings do not
        batch. Checked by raycompo/configuration/vectorize.py."""
        return None

    @classmethod
    def cannot_batch_task(cls, task_cls: type[Task], settings: Any) -> str | None:
        """Why this task keeps this algorithm's batched phases from applying (None: they
        apply). The default asks the task for its batched mean losses
        (`Task.cannot_batch`); FedDRO's family asks for per-sample ones instead."""
        return task_cls.cannot_batch()

    @classmethod
    def cannot_batch_model(cls, model: Any) -> str | None:
        """Why the task's model (a `FlatModel`) keeps the batched phases from applying,
        completing "the model of task T (Module) ..."; None: they apply. The default asks
        for k models at once (`FlatModel.batchable`: its own `batched_forward`, or
        functional_call under vmap for a module without buffers)."""
        return model.why_not_batchable()

    # --- asynchronous form (issue 31) ------------------------------------------------
    @classmethod
    def asynchronous(cls, settings: Any) -> Buffered | str:
        """How this algorithm runs with `--aggregation buffered|async`: a `Buffered`
        declaration, or why it cannot (a sentence, shown to the user; the default: it
        declares none). Checked by `resolve` before anything runs."""
        return (f"algorithm {cls.name} declares no asynchronous form (a `Buffered` from "
                "Algorithm.asynchronous): only synchronous rounds")

    def async_payload(self, w: torch.Tensor, state: dict[str, Any], version: int) -> Payload:
        """What a client dispatched at model version `version` (server steps applied so
        far) downloads; the default: the model."""
        return {"w": w}

    # --- server side ---------------------------------------------------------------
    def init_server_state(self, w0: torch.Tensor, n_clients: int) -> dict[str, Any]:
        """Server state besides the global model (e.g. DRFL's mixing weights)."""
        return {}

    def server_round(self, ctx: RoundContext, w: torch.Tensor, state: dict[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
        raise NotImplementedError

    def global_metrics(self, ctx: RoundContext, w: torch.Tensor, row: dict[str, Any]) -> dict[str, float]:
        """Metrics of the global model that are not a mean of per-client metrics (e.g.
        FedDRO's Phi = h + f(1/K sum_k g_k)); none by default."""
        return {}

    # --- client side ---------------------------------------------------------------
    def init_client_state(self, c: ClientContext) -> State:
        """Persistent per-client state, created the first time the client is used."""
        return {}

    @client_phase("evaluate")
    def client_evaluate(self, c: ClientContext, state: State, payload: Payload) -> PhaseResult:
        """Per-client metrics of the global model (personalized methods override)."""
        return self.task.evaluate(payload["w"], c.data), state

    def batched_evaluate(self, cb: Any, states: list[State], payload: Payload) -> tuple[dict[str, list[float]], list[State]]:
        """`client_evaluate` for a chunk of clients (`Task.batched_evaluate`: one forward
        pass of the global model over their data). The batched form of the evaluate phase
        of every algorithm that keeps `client_evaluate` as it is (see __init_subclass__);
        one that changes it declares its own or evaluates per client."""
        return self.task.batched_evaluate(payload["w"], cb.data), states

    @classmethod
    def cannot_batch_evaluate(cls, settings: Any) -> str | None:
        """Why these settings keep the batched evaluation from applying (None: it applies)."""
        return None

    # --- helpers -------------------------------------------------------------------
    def loss_grad(self, w: torch.Tensor, batch: Any) -> torch.Tensor:
        """Gradient of the task's mean loss at w on a batch."""
        return grad_of(self.task.loss, w, batch)


def grad_of(fn: Callable[..., Any], w: torch.Tensor, *args: Any, has_aux: bool = False) -> Any:
    """The gradient of the scalar `fn(w, *args)` with respect to w (and, with `has_aux`,
    `fn` returns (value, aux) and this returns (gradient, aux), a tensor aux detached), by
    eager autograd.

    First-order gradients use this rather than `torch.func.grad`: same backward kernels and
    bitwise-equal results, but about 8x less overhead per call on small models (no functorch
    level wrapping), and no import of `torch._dynamo` (1.2 s, ~160 MB per process) that
    `torch.func.grad`'s first call does. `fn` may itself use torch.func inside (e.g. a MAML
    inner step): the backward pass then carries the second-order terms.
    """
    if not torch.is_grad_enabled():  # e.g. called under no_grad; the context costs ~5 us a step
        with torch.enable_grad():
            return grad_of(fn, w, *args, has_aux=has_aux)
    w_ = w.detach().requires_grad_(True)
    out = fn(w_, *args)
    value, aux = out if has_aux else (out, None)
    (g,) = torch.autograd.grad(value, w_)
    if not has_aux:
        return g
    return g, (aux.detach() if isinstance(aux, torch.Tensor) else aux)


def local_sgd(c: ClientContext, w: torch.Tensor, steps: int, lr: float, batch_size: int | None, direction, snapshot_at: int | None = None):
    """`steps` local steps w <- w - lr * direction(w, batch, t), batch ~ D_i seeded by step t.

    Returns the final iterate, and the iterate after `snapshot_at` steps if asked.
    """
    snap = w if snapshot_at == 0 else None
    for t in range(steps):
        batch = c.data.batch(c.rng(t), batch_size)
        w = w - lr * direction(w, batch, t)
        if snapshot_at is not None and t + 1 == snapshot_at:
            snap = w
    return (w, snap) if snapshot_at is not None else w
