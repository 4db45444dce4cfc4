"""What a task is: clients' data, a model, a loss, and per-client evaluation.

A task is rebuilt deterministically from (settings, seed, data_dir) in every process
that needs it (each client host keeps only its own clients), so no data set travels
through the driver.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from raycompo.models import FlatModel
from raycompo.problems.oracle import wrap_oracles
from raycompo.settings import row_scalar
from raycompo.tasks.sampler import DEFAULT_SAMPLER, keyed_draw
from raycompo.tasks.slab import SlabPlace

ORACLES = ("loss", "sample_losses", "batched_losses", "batched_sample_losses")
"""A task's per-sample functions: each call on n data points is n oracle calls, a backward
pass through it n more (raycompo/problems/oracle.py)."""
GRADIENT_ORACLES = ("batched_loss_grad", "batched_loss_step_", "batched_sample_grad")
"""A task's methods that return gradients themselves: 2n oracle calls (forward and backward)."""


GLOBAL_RNG = threading.RLock()
"""Held while torch's process-wide generator is seeded or drawn from (a task's module built,
w_0 drawn): the runs of a population (raycompo/engine/population.py) build theirs in threads
of one process, and each must draw its own w_0."""


DRAWS_KEPT = 256
"""Draws a client's data remembers to count a repeated one once (`ClientData.count_draw`)."""


def _drawn_size(size: int | None, n: int) -> int | None:
    """The draw's size as a key: None when it takes all n points."""
    return None if size is None or size >= n else size


@dataclass
class ClientData:
    """One client's local data: D_i for training, and a validation set from its own
    distribution. `outer` holds D~_i when the outer function has data of its own."""

    client_id: int
    x: torch.Tensor
    y: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    outer: tuple[torch.Tensor, torch.Tensor] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    samples_read: int = field(default=0, compare=False, repr=False)
    """Data points drawn so far (`batch`, `outer_batch`, `take`, `full`, `CohortBatch.batch`):
    the engine's ledger counts a client phase's samples as its change. A draw repeated from
    the same seed (the same points: FastDRO's gradient on the batch its losses were taken
    on, ComFedL's f_i(w_s) on the first local step's batch) is counted once."""
    _drawn: dict = field(default_factory=dict, init=False, compare=False, repr=False)
    """(seed, size, outer) of the last DRAWS_KEPT draws, oldest first."""
    slab: SlabPlace | None = field(default=None, compare=False, repr=False)
    """Where x and y are views of rows of a stacked `DataSlab` (set by the engine's data
    cache; `CohortBatch` then gathers a chunk's batches from the slab at once); None for
    data of their own."""
    _journal: Any = field(default=None, init=False, compare=False, repr=False)
    """The `DrawJournal` (tasks/draw_journal.py) counting this client's draws within a batched
    chunk, if one holds it: its entries are handed over before anything else counts here."""
    sampler: str = field(default=DEFAULT_SAMPLER, compare=False, repr=False)
    """How `batch`, `outer_batch` and `indices` draw (`raycompo.tasks.sampler.SAMPLERS`): set by the host
    that holds the client, from the run's RunConfig.sampler."""

    @property
    def num_samples(self) -> int:
        return len(self.y)

    def new_round(self) -> None:
        """Forget the draws remembered (the engine calls it when a round first uses the
        client: a draw is counted once within a round, and two runs in one process both count)."""
        if self._journal is not None:
            self._journal.drop(self)
        self._drawn.clear()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (to a worker, a spill) with every draw it remembers and no journal."""
        if self._journal is not None:
            self._journal.materialize()
        return self.__dict__

    def count_draw(self, seed: int, size: int | None, n: int, outer: bool = False) -> None:
        """Count n points drawn with a generator of `seed` (size None: all of them), unless
        the same draw was counted among the last DRAWS_KEPT."""
        if self._journal is not None:
            self._journal.materialize()
        key = (seed, size, outer)
        if key in self._drawn:
            return
        self._drawn[key] = None
        if len(self._drawn) > DRAWS_KEPT:
            del self._drawn[next(iter(self._drawn))]
        self.samples_read += n

    def batch(self, gen: torch.Generator, size: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        """A mini-batch of min(size, n_i) distinct training samples; None = full batch."""
        x, y = _sample(self.x, self.y, gen, size, self.sampler)
        self.count_draw(gen.initial_seed(), _drawn_size(size, len(self.y)), len(y))
        return x, y

    def outer_batch(self, gen: torch.Generator, size: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        """A mini-batch of D~_i (the outer function's data; D_i when it has none)."""
        x, y = self.outer if self.outer is not None else (self.x, self.y)
        n = len(y)
        x, y = _sample(x, y, gen, size, self.sampler)
        self.count_draw(gen.initial_seed(), _drawn_size(size, n), len(y), outer=self.outer is not None)
        return x, y

    def indices(self, gen: torch.Generator, size: int) -> torch.Tensor:
        """The CPU indices of a mini-batch of size < n_i training samples drawn with `gen`, as
        `batch` draws them (not counted: `take` reads and counts them), for an algorithm that
        needs the indices (PDSGD's dual weights)."""
        return draw_indices(len(self.y), size, gen, self.sampler)

    def take(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The training samples at indices `idx` (x, y): a read by index (e.g. PDSGD, whose
        dual weights need the indices), counted."""
        self.samples_read += len(idx)
        idx = idx.to(self.x.device)
        return self.x[idx], self.y[idx]

    def full(self) -> tuple[torch.Tensor, torch.Tensor]:
        """All n_i training samples (x, y), in order: a full-batch read, counted."""
        self.samples_read += len(self.y)
        return self.x, self.y

    def to(self, device: torch.device | str) -> ClientData:
        def mv(t):
            return t.to(device) if isinstance(t, torch.Tensor) else t

        outer = (mv(self.outer[0]), mv(self.outer[1])) if self.outer is not None else None
        return ClientData(self.client_id, mv(self.x), mv(self.y), mv(self.x_val), mv(self.y_val), outer, self.extra,
                          sampler=self.sampler)


def count_draws(datas: list[ClientData], seeds: list[int], size: int | None, rows: list[int],
                totals: list[int]) -> None:
    """`datas[i].count_draw(seeds[i], size_i, rows[i])` for a chunk of clients drawing one
    step's batch (size_i: None where size is None or >= totals[i], their n_i), counted exactly
    as `count_draw` counts, with no function call per client: a batched round's Python work
    does not grow with its clients (issue 41). The few clients past DRAWS_KEPT remembered
    draws forget their oldest afterwards, as `count_draw` does."""
    for d, seed, n, total in zip(datas, seeds, rows, totals):
        drawn = d._drawn
        key = (seed, None if size is None or size >= total else size, False)
        if key not in drawn:
            drawn[key] = None
            d.samples_read += n
    if max(map(len, [d._drawn for d in datas]), default=0) > DRAWS_KEPT:  # rare: a long round
        for d in datas:
            while len(d._drawn) > DRAWS_KEPT:
                del d._drawn[next(iter(d._drawn))]


def index_clients(x: torch.Tensor, y: torch.Tensor, x_val: torch.Tensor, y_val: torch.Tensor,
                  parts: list, val_parts: list) -> list[ClientData]:
    """Client k trains on x[parts[k]] and is validated on x_val[val_parts[k]]."""
    out = []
    for cid, (idx, vidx) in enumerate(zip(parts, val_parts)):
        i, v = torch.as_tensor(idx), torch.as_tensor(vidx)
        out.append(ClientData(cid, x[i], y[i], x_val[v], y_val[v]))
    return out


def settings_key(settings: Any) -> tuple:
    """A task's settings as a key of the data built from them: (name, type, value) of every
    field, sorted. The type is part of it: values that compare equal across types (1, 1.0,
    True) are not taken for one another."""
    return tuple(sorted((k, type(v).__qualname__, v) for k, v in vars(settings).items()))


@lru_cache(maxsize=4)
def _cached_partition(cls: type, key: tuple, seed: int, data_dir: str | None) -> list[ClientData]:
    """The partition of (class, `settings_key`, seed, data folder), built once per process and
    shared by every task object of those (a population's trials of one seed: one copy). Its
    ClientData objects are never handed out themselves: the hosts' caches read copies
    (`ClientData.to`) with counters of their own, over the same tensors, which nothing writes."""
    return cls(cls.Settings(**{k: v for k, _, v in key}), seed, data_dir).partition()


def draw_indices(n: int, size: int, gen: torch.Generator, sampler: str = "randperm") -> torch.Tensor:
    """`size` < n distinct indices of range(n) drawn with `gen` (a CPU int64 tensor):
    `randperm(n)[:size]`, or with sampler 'keyed' the b smallest keyed hashes of
    (gen's seed, i) (raycompo/keyed.py), which `CohortBatch` draws for a chunk at once."""
    if sampler == "keyed":
        return keyed_draw(gen.initial_seed(), n, size)
    return torch.randperm(n, generator=gen)[:size]


def _sample(x: torch.Tensor, y: torch.Tensor, gen: torch.Generator, size: int | None, sampler: str = "randperm"):
    n = len(y)
    if size is None or size >= n:
        return x, y
    idx = draw_indices(n, size, gen, sampler).to(x.device)
    return x[idx], y[idx]


IMPLIED: dict[str, frozenset[str]] = {"classification": frozenset({"loss"})}
"""Capabilities that another one implies (`Task.provided`): a task declared
'classification' has the mean loss and evaluation that 'loss' names."""


class Task:
    """Base class of a federated task. Subclasses set `name`, `Settings`, and build data."""

    name: ClassVar[str]
    Settings: ClassVar[type]
    algo_defaults: ClassVar[dict[str, Any]] = {}
    """The paper's defaults for algorithm settings on this task (lr, tau, batch size...);
    an entry named after an algorithm holds that algorithm's own defaults, which win."""
    default_metric: ClassVar[tuple[str, str]] = ("val_acc_worst", "max")
    """The metric a sweep optimizes by default, and its mode."""
    capabilities: ClassVar[frozenset[str]] = frozenset()
    """What algorithms may rely on (each algorithm's `requires` is checked against it, with
    what each capability implies: `provided`): 'loss' (a mean `loss(w, batch)` on the
    batches its ClientData clients hand out, differentiable in w, and `evaluate(w, client)`
    with at least train_loss and val_loss: what local SGD and FedAvg use, e.g. a
    least-squares regression), 'classification' (a cross-entropy `loss` on (x, y) batches,
    accuracies in `evaluate`; implies 'loss'), 'sample_losses' (`sample_losses(w, batch)`),
    'composition' (`composition(...)`, a local compositional problem per task), 'task_ids'
    (a finite set of training tasks with keys), 'global_composition'
    (`global_composition(settings)`)."""
    worst: ClassVar[dict[str, str]] = {"train_loss": "max", "val_loss": "max", "train_acc": "min", "val_acc": "min"}
    """Per-client metrics that also get a worst-client column `<key>_worst`, and whether the
    worst client is the one with the highest ('max') or lowest ('min') value. Metrics not
    listed are averaged only."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wrap_oracles(cls, ORACLES, GRADIENT_ORACLES)  # a task's own oracles are counted too

    @classmethod
    def provided(cls) -> frozenset[str]:
        """`capabilities` with what they imply (`IMPLIED`: a classification task has a
        loss): what an algorithm's `requires` is checked against."""
        caps = frozenset(cls.capabilities)
        return caps.union(*(IMPLIED.get(c, frozenset()) for c in caps))

    def __init__(self, settings: Any, seed: int, data_dir: str | None = None):
        self.settings = settings
        self.seed = seed
        self.data_dir = data_dir
        with GLOBAL_RNG:  # a module's construction draws from torch's process-wide generator
            self.model = FlatModel(self.build_module())

    # --- what subclasses provide -------------------------------------------------
    @property
    def n_clients(self) -> int:
        raise NotImplementedError

    def build_module(self) -> torch.nn.Module:
        raise NotImplementedError

    def partition(self) -> list[ClientData]:
        """All clients' data, built from (settings, seed, data_dir)."""
        raise NotImplementedError

    def clients(self, ids: list[int]) -> list[ClientData]:
        """The clients `ids`, from a partition built once per process and cached."""
        all_clients = _cached_partition(type(self), settings_key(self.settings), self.seed, self.data_dir)
        return [all_clients[i] for i in ids]

    def loss(self, w: torch.Tensor, batch: Any) -> torch.Tensor:
        """Mean loss of model w on a batch."""
        raise NotImplementedError

    def evaluate(self, w: torch.Tensor, client: ClientData) -> dict[str, float]:
        """Per-client metrics of model w: at least train_loss, val_loss."""
        raise NotImplementedError

    def batched_losses(self, w: torch.Tensor, batch: Any) -> torch.Tensor:
        """k clients' mean losses at once: w (k, dim), `batch` a padded
        `algorithms.cohort.Batch` of k clients -> (k,), entry i equal (up to rounding) to
        `loss(w[i], client i's batch)`. What vectorized cohorts run (raycompo/configuration/vectorize.py)."""
        raise NotImplementedError

    def batched_loss_grad(self, w: torch.Tensor, batch: Any, scale: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(gradients (k, dim), losses (k,)) of the k clients' mean losses at their rows of
        w, each gradient multiplied by `scale(losses)` (k,) when given. By default one
        autograd backward pass through `batched_losses` (the clients are independent, so
        the gradient of the sum is the stack of the gradients), with `scale` as its
        `grad_outputs`, as the per-client path's backward pass."""
        with torch.enable_grad():
            w_ = w.detach().requires_grad_(True)
            f = self.batched_losses(w_, batch)
            v = torch.ones_like(f) if scale is None else scale(f.detach())
            (g,) = torch.autograd.grad(f, w_, grad_outputs=v)
        return g, f.detach()

    def batched_loss_step_(self, w: torch.Tensor, batch: Any, lr: float | torch.Tensor, scale: Any = None) -> None:
        """One local step of k clients in place: w (k, dim) <- w - lr * g, g the gradients
        of `batched_loss_grad(w, batch, scale)`. By default exactly that; a task whose
        model backpropagates by hand fuses the update into the gradient's product."""
        g, _ = self.batched_loss_grad(w, batch, scale)
        if isinstance(lr, torch.Tensor):  # a population's per-row step sizes (k,)
            w.sub_(g * row_scalar(lr, g))
        else:
            w.sub_(g, alpha=lr)

    def batched_sample_losses(self, w: torch.Tensor, batch: Any) -> torch.Tensor:
        """k clients' per-sample losses at once: w (k, dim), a padded `Batch` -> (k, B),
        row i equal (up to rounding) to `sample_losses(w[i], client i's batch)` on its real
        rows (padded rows hold any finite value; callers weigh them by `batch.mask`). What
        the batched global-composition algorithms (FedDRO) run."""
        raise NotImplementedError

    def batched_sample_grad(self, w: torch.Tensor, batch: Any,
                            weigh: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """(gradients (k, dim), per-sample losses (k, B)): row i is sum_b a_ib grad l_ib(w_i),
        the per-sample losses' gradients weighed by `a = weigh(losses)` (k, B), e.g. a
        composition's phi'(l_ib) mask_ib / n_i. By default one autograd backward pass
        through `batched_sample_losses` with `a` as its `grad_outputs`."""
        with torch.enable_grad():
            w_ = w.detach().requires_grad_(True)
            losses = self.batched_sample_losses(w_, batch)
            (g,) = torch.autograd.grad(losses, w_, grad_outputs=weigh(losses.detach()))
        return g, losses.detach()

    @classmethod
    def cannot_batch(cls) -> str | None:
        """Why this task's losses cannot be computed for k clients at once (None: they can,
        given a model that batches, `FlatModel.batchable`). Checked by raycompo/configuration/vectorize.py."""
        if cls.batched_losses is Task.batched_losses:
            return f"task {cls.name} defines no batched_losses"
        return None

    def batched_evaluate(self, w: torch.Tensor, clients: list[Any]) -> dict[str, list[float]]:
        """`evaluate(w, client)` for several clients at once: {metric: one value per client,
        in `clients` order}, equal up to rounding (the batched evaluate phase)."""
        raise NotImplementedError

    @classmethod
    def cannot_batch_evaluate(cls) -> str | None:
        """Why this task cannot evaluate a chunk of clients at once (None: it can)."""
        if cls.batched_evaluate is Task.batched_evaluate:
            return f"task {cls.name} defines no batched_evaluate"
        return None

    @classmethod
    def cannot_batch_samples(cls) -> str | None:
        """Why this task's per-sample losses cannot be computed for k clients at once
        (`batched_sample_losses`; None: they can). Checked for FedDRO's family."""
        if cls.batched_sample_losses is Task.batched_sample_losses:
            return f"task {cls.name} defines no batched_sample_losses"
        return None

    def pooled_metrics(self, per_client: dict[int, dict[str, float]]) -> dict[str, float]:
        """Metrics of the evaluated clients' data taken together, which are not means of
        per-client values (e.g. the fairness tasks' true-positive-rate gaps, ratios of
        summed counts). `per_client` holds each client's `evaluate` result; keys starting
        with '_' there are inputs of this hook only, never row columns. None by default."""
        return {}

    def partition_record(self) -> dict[str, Any]:
        """What re-creates this task's client partition, for config.json (partitioner, its
        parameters, seed, per-client sizes, data hashes). Empty by default: the built-in
        tasks are re-created from their name, settings and seed."""
        return {}

    def artifacts(self, w: torch.Tensor, algorithm: Any) -> dict[str, Any]:
        """Files a run writes at its end besides metrics.csv: {file name: pandas DataFrame}
        (e.g. the data of a paper's figure for the final model). None by default."""
        return {}

    # --- shared ---------------------------------------------------------------------
    def init_weights(self) -> torch.Tensor:
        """Initial global model w_0 (deterministic in the seed)."""
        from raycompo.seeding import INIT, derive_seed

        with GLOBAL_RNG:  # no other thread reseeds or draws between the seed and the draws
            torch.manual_seed(derive_seed(self.seed, INIT))
            return FlatModel(self.build_module()).flatten()

    def to(self, device: torch.device | str) -> Task:
        self.model.to(device)
        return self


wrap_oracles(Task, ORACLES, GRADIENT_ORACLES)


EVAL_OWN_BYTES = 256 * 1024
"""A client whose inputs take this many bytes or more is evaluated on its own tensors in a
batched evaluation: copying them into the concatenation (~25 us at 10 GB/s) would cost
more than the overhead of a forward call of its own."""


class ClassificationTask(Task):
    """Cross-entropy loss; metrics are loss and accuracy on each client's data."""

    capabilities = frozenset({"classification", "sample_losses"})

    def sample_losses(self, w: torch.Tensor, batch: Any) -> torch.Tensor:
        """Per-sample losses l(w; zeta_i), shape (|b|,) (the global-composition objectives)."""
        x, y = batch
        return F.cross_entropy(self.model(w, x), y, reduction="none")

    def loss(self, w: torch.Tensor, batch: Any) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self.model(w, x), y)

    def batched_sample_losses(self, w: torch.Tensor, batch: Any) -> torch.Tensor:
        """Each client's per-sample cross-entropy (k, B); padded rows are finite (0 inputs,
        or 0 logits on the vmap path, which runs each client on its real rows only)."""
        logits = self.model.batched(w, batch.x, batch.count).transpose(1, 2)  # (k, C, B): contiguous for our models
        return -torch.log_softmax(logits, 1).gather(1, batch.y.unsqueeze(1)).squeeze(1)

    def batched_losses(self, w: torch.Tensor, batch: Any) -> torch.Tensor:
        """Each client's mean cross-entropy over its batch's valid rows (`mask`): padded
        rows (a client with fewer samples than the batch) weigh exactly 0."""
        return (self.batched_sample_losses(w, batch) * batch.mask).sum(1) / batch.count

    def batched_loss_grad(self, w: torch.Tensor, batch: Any, scale: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Each client's mean loss and its gradient, times `scale(losses)`: the per-sample
        gradients weighed by v_i mask_b / n_i (`batched_sample_grad`)."""
        if not self.model.has_pullback or w.requires_grad:
            return super().batched_loss_grad(w, batch, scale)
        means: list[torch.Tensor] = []

        def weigh(losses: torch.Tensor) -> torch.Tensor:
            f = (losses * batch.mask).sum(1) / batch.count
            means.append(f)
            v = torch.ones_like(f) if scale is None else scale(f)
            return (v / batch.count).unsqueeze(1) * batch.mask

        g, _ = self.batched_sample_grad(w, batch, weigh)
        return g, means[0]

    def batched_sample_grad(self, w: torch.Tensor, batch: Any, weigh: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """With a model that backpropagates by hand (`FlatModel.has_pullback`: logistic
        regression, MLP), the cross-entropy's gradient with respect to the logits is
        written out, a_ib (softmax(z_ib) - onehot(y_ib)), and pulled back through the
        model without autograd; otherwise autograd (Task.batched_sample_grad)."""
        if not self.model.has_pullback or w.requires_grad:
            return super().batched_sample_grad(w, batch, weigh)
        with torch.no_grad():
            logits, pullback = self.model.batched_pullback(w, batch.x)  # (k, C, B)
            g, losses = _logit_grad(logits, batch.y, weigh)
            return pullback(g), losses

    def batched_loss_step_(self, w: torch.Tensor, batch: Any, lr: float | torch.Tensor, scale: Any = None) -> None:
        """With a model that backpropagates by hand: the logits' gradient written out as in
        `batched_sample_grad`, weighed by v_i mask_ib / n_i (v = scale(f), or 1 without a
        scale: then no loss is computed, only the softmax), and the update w -= lr * g
        fused into the model's pullback (`Pullback.add_`: one `baddbmm_` per layer)."""
        if not self.model.has_pullback or w.requires_grad:
            return super().batched_loss_step_(w, batch, lr, scale)
        with torch.no_grad():
            logits, pullback = self.model.batched_pullback(w, batch.x)  # (k, C, B)
            if scale is None:  # FedAvg: the mean loss is never read
                g = torch.softmax(logits, 1)
                g.scatter_add_(1, batch.y.unsqueeze(1), _minus_ones(g, batch.y))
                g.mul_((batch.mask / batch.count.unsqueeze(1)).unsqueeze(1))
            else:
                def weigh(losses: torch.Tensor) -> torch.Tensor:
                    f = (losses * batch.mask).sum(1) / batch.count
                    return (scale(f) / batch.count).unsqueeze(1) * batch.mask

                g, _ = _logit_grad(logits, batch.y, weigh)
            if isinstance(lr, torch.Tensor):  # a population's per-row step sizes (k,): g's rows scaled
                g.mul_(row_scalar(lr, g))
                lr = 1.0
            pullback.add_(g, -lr)
        return None

    @classmethod
    def cannot_batch(cls) -> str | None:
        if cls.loss is not ClassificationTask.loss and cls.batched_losses is ClassificationTask.batched_losses:
            return f"task {cls.name} has a loss of its own and no batched_losses"
        return super().cannot_batch()

    @classmethod
    def cannot_batch_samples(cls) -> str | None:
        if (cls.sample_losses is not ClassificationTask.sample_losses
                and cls.batched_sample_losses is ClassificationTask.batched_sample_losses):
            return f"task {cls.name} has per-sample losses of its own and no batched_sample_losses"
        return super().cannot_batch_samples()

    @classmethod
    def cannot_batch_evaluate(cls) -> str | None:
        if cls.evaluate is not ClassificationTask.evaluate and cls.batched_evaluate is ClassificationTask.batched_evaluate:
            return f"task {cls.name} evaluates in its own way and has no batched_evaluate"
        return super().cannot_batch_evaluate()

    @torch.no_grad()
    def batched_evaluate(self, w: torch.Tensor, clients: list[ClientData]) -> dict[str, list[float]]:
        """`evaluate` of one model w for several clients: one forward pass per split over
        the small clients' data concatenated (large ones, of EVAL_OWN_BYTES or more, on
        their own tensors: no copy), each client's sums of losses and hits in float64 over
        its own rows. Needs a model whose outputs are per sample (no batch statistics)."""
        k = len(clients)
        out: dict[str, list[float]] = {}
        parts = {"train": [(c.x, c.y) for c in clients], "val": [(c.x_val, c.y_val) for c in clients]}
        for split, xys in parts.items():
            counts = torch.tensor([len(y) for _, y in xys])
            own = [x.numel() * x.element_size() >= EVAL_OWN_BYTES for x, _ in xys]
            small = [i for i in range(k) if not own[i]]
            groups = [[i] for i in range(k) if own[i]] + ([small] if small else [])
            loss_sum = torch.zeros(k, dtype=torch.float64, device=w.device)
            hit_sum = torch.zeros(k, dtype=torch.float64, device=w.device)
            for ids in groups:
                x = xys[ids[0]][0] if len(ids) == 1 else torch.cat([xys[i][0] for i in ids])
                y = xys[ids[0]][1] if len(ids) == 1 else torch.cat([xys[i][1] for i in ids])
                owner = torch.repeat_interleave(torch.tensor(ids), counts[ids]).to(w.device)
                logits = self.model(w, x)
                # cross-entropy as logsumexp - picked logit: 4x faster than log_softmax for 10 classes
                losses = torch.logsumexp(logits, 1) - logits.gather(1, y.unsqueeze(1)).squeeze(1)
                loss_sum.index_add_(0, owner, losses.to(torch.float64))
                hit_sum.index_add_(0, owner, (logits.argmax(1) == y).to(torch.float64))
            n = counts.to(torch.float64)
            out[f"{split}_loss"] = (loss_sum.cpu() / n).tolist()
            out[f"{split}_acc"] = (hit_sum.cpu() / n).tolist()
        return {key: out[key] for key in ("train_loss", "val_loss", "val_acc", "train_acc")}  # evaluate's order

    @torch.no_grad()
    def evaluate(self, w: torch.Tensor, client: ClientData) -> dict[str, float]:
        """train_loss, train_acc on the client's training data; val_loss, val_acc on its
        validation data (the driver adds the means and the worst client's)."""
        train_logits = self.model(w, client.x)
        logits = self.model(w, client.x_val)
        return {
            "train_loss": F.cross_entropy(train_logits, client.y).item(),
            "val_loss": F.cross_entropy(logits, client.y_val).item(),
            "val_acc": (logits.argmax(1) == client.y_val).double().mean().item(),
            "train_acc": (train_logits.argmax(1) == client.y).double().mean().item(),
        }


def _minus_ones(g: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """-1 at every (client, label row, sample) of a (k, C, B) logits gradient's scatter."""
    return torch.full((1, 1, 1), -1.0, dtype=g.dtype, device=g.device).expand(y.shape[0], 1, y.shape[1])


def _logit_grad(logits: torch.Tensor, y: torch.Tensor, weigh: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(a_ib (softmax(z_ib) - onehot(y_ib)) (k, C, B), per-sample losses (k, B)) for logits
    (k, C, B) and a = weigh(losses) (k, B): the gradient of sum_ib a_ib l_ib with respect to
    the logits, l the cross-entropy."""
    logp = torch.log_softmax(logits, 1)
    picked = logp.gather(1, y.unsqueeze(1))  # (k, 1, B)
    losses = -picked.squeeze(1)
    a = weigh(losses)  # (k, B)
    g = logp.exp_()  # softmax, in place of log-softmax
    g.scatter_add_(1, y.unsqueeze(1), _minus_ones(g, y))
    g.mul_(a.unsqueeze(1))
    return g, losses
