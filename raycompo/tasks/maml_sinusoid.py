"""Local-SCGDM section 5.1: federated sinusoid regression (the protocol of Wang et al. 2021).

Training tasks: y = A sin(x + b pi / 5) for A in {1..5} and b in {1..5}, 25 tasks spread
randomly and evenly over 5 clients (a seeded permutation). At every meta-iteration a
client samples 3 of its tasks (the algorithm's batch_size) and, for each, K = 10 support
and K = 10 query points with x ~ U[-5, 5], fresh at every step. Model: a 1-40-40-1 ReLU
network; inner learning rate lambda = 0.001; loss: mean squared error.

The draws follow the run's sampler (RunConfig.sampler): with 'keyed' (the default) the
tasks and points are keyed draws of the step's seed (tasks/meta_draws.py), so a chunk's
clients are drawn at once (`MamlSinusoid.meta_rows`) as each alone would draw them; with
'randperm' (the draws of releases up to 0.1.1) `randperm` and `rand` from the step's
generator.

Metrics (our construction; the paper shows curves without defining them further), all
"loss after adaptation", i.e. the query loss after `eval_steps` steps of size lambda on
K support points, with fixed (seeded) points so that rounds are comparable:
- train_loss: mean over the client's own training tasks (`eval_query` query points each);
- val_loss: 600 new tasks, A ~ U[0.1, 5], b ~ U[0, 5], split evenly over the clients
  (120 each), so the driver's mean over clients is the mean over all 600 tasks.

At the end of a run, `figure1.csv` holds the data of the paper's Figure 1 for the final
model: on a grid of x, the unseen task y = 2.5 sin(x + 1.5 pi / 5), the prediction
before adaptation and after adaptation on K support points (in `figure1_support.csv`).
Concatenating the files of several runs (column `algo`) gives the figure.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from raycompo.seeding import DATA, numpy_rng
from raycompo.settings import require
from raycompo.tasks import meta_draws
from raycompo.tasks.meta import MetaRows, MetaTask, TaskSample
from raycompo.tasks.sampler import DEFAULT_SAMPLER

if TYPE_CHECKING:
    import pandas as pd

X_RANGE = (-5.0, 5.0)
FIGURE1_TASK = (2.5, 1.5)  # (A, b) of the unseen task in the paper's Figure 1
TRAINING_TASKS = 25  # (A, b) in {1..5} x {1..5}


def sinusoid(
    x: torch.Tensor, amplitude: float | torch.Tensor, phase: float | torch.Tensor
) -> torch.Tensor:
    """A sin(x + b pi / 5), the paper's parametrization of the phase."""
    return amplitude * torch.sin(x + phase * math.pi / 5)


@dataclass
class SinusoidSettings:
    n_clients: int = 5
    """Clients K over which the 25 training tasks are spread evenly (paper: 5)."""
    k_shot: int = 10
    """Support points per task, K (paper: 10)."""
    k_query: int = 10
    """Query points per task in training (paper: K = 10)."""
    maml_inner_lr: float = 0.001
    """Inner (adaptation) learning rate lambda (paper: 0.001)."""
    hidden: int = 40
    """Hidden units of each of the two ReLU layers (paper: 40)."""
    val_tasks: int = 600
    """New tasks for validation (paper: 600), split evenly over the clients."""
    eval_query: int = 100
    """Fixed query points per task for the metrics (more than K for low-noise curves)."""
    eval_steps: int = 1
    """Adaptation steps (of size maml_inner_lr) before measuring a task's loss (training uses 1)."""

    def validate(self) -> None:
        require(
            1 <= self.n_clients <= 25,
            f"n_clients must be in [1, 25] (25 training tasks), got {self.n_clients}",
        )
        require(self.k_shot >= 1 and self.k_query >= 1, f"k_shot and k_query must be >= 1, got {self.k_shot} and {self.k_query}")
        require(self.maml_inner_lr > 0, f"maml_inner_lr must be > 0, got {self.maml_inner_lr}")
        require(self.hidden >= 1, f"hidden must be >= 1, got {self.hidden}")
        require(
            self.val_tasks >= self.n_clients,
            f"val_tasks must be >= n_clients={self.n_clients}, got {self.val_tasks}",
        )
        require(
            self.eval_query >= 1 and self.eval_steps >= 0,
            f"eval_query must be >= 1 and eval_steps >= 0, got {self.eval_query} and {self.eval_steps}",
        )


@dataclass
class TaskSet:
    """Tasks with fixed support/query points: params (n, 2) = (A, b), points (n, k, 1)."""

    params: torch.Tensor
    xs: torch.Tensor
    xq: torch.Tensor

    def sets(self) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
        a, b = self.params[:, 0, None, None], self.params[:, 1, None, None]
        return (self.xs, sinusoid(self.xs, a, b)), (self.xq, sinusoid(self.xq, a, b))

    def to(self, device) -> TaskSet:
        return TaskSet(self.params.to(device), self.xs.to(device), self.xq.to(device))


@dataclass
class SinusoidClient:
    """A client's training tasks (ids into the 25, and their (A, b)) and its metric sets."""

    client_id: int
    task_ids: list[int]
    params: torch.Tensor
    k_shot: int
    k_query: int
    train_eval: TaskSet
    val: TaskSet
    samples_read: int = field(default=0, compare=False, repr=False)
    """Tasks handed out by `batch` so far (a meta-learning sample is a task): the ledger's count."""
    sampler: str = field(default=DEFAULT_SAMPLER, compare=False, repr=False)
    """How `batch` draws (`raycompo.tasks.sampler.SAMPLERS`): set by the host that holds the
    client, from the run's RunConfig.sampler."""
    n_tasks: int = field(init=False, compare=False, repr=False)
    """len(task_ids), an attribute (a chunk reads it without a call per client)."""

    def __post_init__(self) -> None:
        self.n_tasks = len(self.task_ids)

    @property
    def num_samples(self) -> int:
        return len(self.task_ids)

    def batch(self, gen: torch.Generator, size: int | None) -> list[TaskSample]:
        """`size` of the client's tasks (without replacement), each with fresh K support
        and K query points x ~ U[-5, 5]: keyed draws of the generator's seed
        (tasks/meta_draws.py), or with the 'randperm' sampler `randperm` and `rand` from it."""
        if self.sampler == "keyed":
            return self._keyed_batch(gen.initial_seed(), size)
        n = len(self.task_ids)
        picks = torch.randperm(n, generator=gen)[: n if size is None else min(size, n)].tolist()
        ab = self._params_on_cpu
        xs = [_uniform((self.k_shot + self.k_query, 1), gen) for _ in picks]  # drawn on the CPU
        ys = [sinusoid(x, *ab[i]) for x, i in zip(xs, picks)]
        if self.params.device.type != "cpu" and picks:  # one copy to the device, not 2 per task
            moved = torch.stack(xs + ys).to(self.params.device).unbind(0)
            xs, ys = list(moved[: len(picks)]), list(moved[len(picks):])
        self.samples_read += len(picks)
        return [
            TaskSample(self.task_ids[i], (x[: self.k_shot], y[: self.k_shot]), (x[self.k_shot :], y[self.k_shot :]))
            for i, x, y in zip(picks, xs, ys)
        ]

    def _keyed_batch(self, seed: int, size: int | None) -> list[TaskSample]:
        """`batch` with the keyed sampler: `MamlSinusoid.meta_rows`' rows of this client."""
        picks, x = meta_draws.draw_one(seed, len(self.task_ids), size, self.k_shot + self.k_query, *X_RANGE)
        x = x.to(self.params.device)
        y = targets(x, self.params[torch.tensor(picks, device=self.params.device)])
        self.samples_read += len(picks)
        return [TaskSample(self.task_ids[i], (xi[: self.k_shot], yi[: self.k_shot]), (xi[self.k_shot :], yi[self.k_shot :]))
                for i, xi, yi in zip(picks, x, y)]

    @functools.cached_property
    def _params_on_cpu(self) -> list[list[float]]:
        """(A, b) of each task as numbers, read once (from a GPU: one sync, not one per task)."""
        return self.params.tolist()

    def to(self, device) -> SinusoidClient:
        return SinusoidClient(
            self.client_id,
            self.task_ids,
            self.params.to(device),
            self.k_shot,
            self.k_query,
            self.train_eval.to(device),
            self.val.to(device),
            sampler=self.sampler,
        )


def targets(x: torch.Tensor, params: torch.Tensor) -> torch.Tensor:
    """y = A sin(x + b pi / 5) of points x (m, K, 1) of tasks `params` (m, 2) = (A, b)."""
    return sinusoid(x, params[:, 0, None, None], params[:, 1, None, None])


def _uniform(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    lo, hi = X_RANGE
    return lo + (hi - lo) * torch.rand(shape, generator=gen)


def _points(rng: np.random.Generator, n: int, k: int) -> torch.Tensor:
    return torch.as_tensor(rng.uniform(*X_RANGE, size=(n, k, 1)), dtype=torch.float32)


class MamlSinusoid(MetaTask):
    name = "maml-sinusoid"
    Settings = SinusoidSettings
    capabilities = frozenset({"composition", "task_ids"})
    vmap_meta_batches = True  # K support / query points per task, a 1-40-40-1 MLP
    algo_defaults = {
        # Local-SCGDM section 5.1: meta lr 0.01 for every method, p = 5, 3 tasks per
        # client per meta-iteration; the inner-state coefficient differs by method.
        # Local-SCGDM keeps one inner state per task on its client, as the paper does here
        # ("for a fair comparison with MOML"); per_task_state=false gives the shared u of
        # Algorithm 1 as printed.
        "lr": 0.01,
        "p": 5,
        "batch_size": 3,
        "local-scgd": {"gamma": 0.9},
        "local-moml": {"gamma": 0.7},
        "local-scgdm": {"eta": 1.0, "alpha": 0.8, "gamma": 0.7, "per_task_state": True},
    }

    @property
    def n_clients(self) -> int:
        return self.settings.n_clients

    @property
    def max_tasks_per_client(self) -> int:
        """The most training tasks one client owns: the 25 spread evenly (`partition`)."""
        return -(-TRAINING_TASKS // self.settings.n_clients)

    def build_module(self) -> nn.Module:
        h = self.settings.hidden
        return nn.Sequential(
            nn.Linear(1, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 1)
        )

    def meta_rows(self, clients: list[SinusoidClient], seeds: torch.Tensor, size: int | None) -> MetaRows | None:
        """The meta-batches of a chunk's clients at one step, as rows, or None where they
        draw with the 'randperm' sampler (then client by client): each client's `batch` with
        the generator of seed `seeds[i]`, with a fixed number of tensor operations. Counts
        the tasks each client read, as `batch` does."""
        if not clients or {c.sampler for c in clients} != {"keyed"}:
            return None
        s = self.settings
        sizes = np.array([c.n_tasks for c in clients], dtype=np.int64)
        drawn = meta_draws.draw_many(seeds, sizes, size, s.k_shot + s.k_query, *X_RANGE)
        params = torch.cat([c.params for c in clients])  # every client's (A, b), client after client
        first = torch.from_numpy(np.cumsum(sizes) - sizes)  # each client's first row in it
        x = drawn.x.to(params.device)
        y = targets(x, params.index_select(0, (first[drawn.owner] + drawn.position).to(params.device)))
        for c, m in zip(clients, drawn.per_client.tolist()):  # the ledger's count: an add per client, no call
            c.samples_read += m
        return MetaRows(drawn.owner, drawn.position, (x[:, : s.k_shot], y[:, : s.k_shot]),
                        (x[:, s.k_shot :], y[:, s.k_shot :]), drawn.per_client)

    def loss(self, w: torch.Tensor, batch) -> torch.Tensor:
        x, y = batch
        return torch.mean((self.model(w, x) - y) ** 2)

    def partition(self) -> list[SinusoidClient]:
        """25 training tasks spread randomly and evenly over the clients; 600 validation tasks
        split evenly, so the mean over clients is the mean over all of them."""
        s = self.settings
        rng = numpy_rng(self.seed, DATA)
        grid = torch.tensor(
            [(a, b) for a in range(1, 6) for b in range(1, 6)], dtype=torch.float32
        )  # task id = row
        owners = np.array_split(rng.permutation(len(grid)), s.n_clients)  # random and even
        val_params = torch.as_tensor(
            np.stack([rng.uniform(0.1, 5.0, s.val_tasks), rng.uniform(0.0, 5.0, s.val_tasks)], 1),
            dtype=torch.float32,
        )
        val_split = np.array_split(np.arange(s.val_tasks), s.n_clients)
        out = []
        for cid, ids in enumerate(owners):
            ids = sorted(int(i) for i in ids)
            train_eval = TaskSet(
                grid[ids], _points(rng, len(ids), s.k_shot), _points(rng, len(ids), s.eval_query)
            )
            v = torch.as_tensor(val_split[cid])
            val = TaskSet(
                val_params[v], _points(rng, len(v), s.k_shot), _points(rng, len(v), s.eval_query)
            )
            out.append(SinusoidClient(cid, ids, grid[ids], s.k_shot, s.k_query, train_eval, val))
        return out

    @torch.no_grad()
    def evaluate(self, w: torch.Tensor, client: SinusoidClient) -> dict[str, float]:
        with torch.enable_grad():
            train = self.adapted_losses(w, *client.train_eval.sets()).mean()
            val = self.adapted_losses(w, *client.val.sets()).mean()
        return {"train_loss": train.item(), "val_loss": val.item()}

    def artifacts(self, w: torch.Tensor, algorithm) -> dict[str, pd.DataFrame]:
        """Figure 1: the unseen task, the model before and after adaptation on a grid."""
        import pandas as pd  # here, not at the top: host actors never need it

        s = self.settings
        a, b = FIGURE1_TASK
        rng = numpy_rng(self.seed, DATA, 2)
        xs = _points(rng, 1, s.k_shot)[0]
        support = (xs, sinusoid(xs, a, b))
        w = w.detach().cpu()
        adapted = w
        for _ in range(s.eval_steps):
            adapted = adapted - s.maml_inner_lr * torch.func.grad(self.loss)(adapted, support)
        grid = torch.linspace(*X_RANGE, 201).reshape(-1, 1)
        with torch.no_grad():
            frame = pd.DataFrame(
                {
                    "x": grid[:, 0].numpy(),
                    "y_true": sinusoid(grid, a, b)[:, 0].numpy(),
                    "y_before": self.model(w, grid)[:, 0].numpy(),
                    "y_adapted": self.model(adapted, grid)[:, 0].numpy(),
                }
            )
        frame["algo"] = getattr(algorithm, "name", "")
        points = pd.DataFrame({"x": support[0][:, 0].numpy(), "y": support[1][:, 0].numpy()})
        return {"figure1.csv": frame, "figure1_support.csv": points}
