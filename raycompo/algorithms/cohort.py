"""A cohort's clients as one batched computation (vectorized cohorts, issue 18).

A batched client phase, declared with `@batched_phase("name")`, runs a chunk of k clients
of a host at once: `(cb, states, payload) -> (contributions, new_states)`, where `cb` is
a `CohortBatch`, `states` the k clients' persistent states (a list, in `cb.ids` order),
every contribution value a tensor whose first dimension is the client (k, ...) or a list
of k Python numbers (where the per-client phase returns a number), and `new_states` a
list of k states. `states` may be a `ChunkState` (algorithms/chunk_state.py: one (k, ...)
tensor per key, as the host's store reads them) and `new_states` one too: a phase reads a
key with `stack_state` and returns `new_states(states, {key: rows})`. It must compute, client by client, what the per-client
phase of the same name computes:

* models are stacked rows, W (k, dim); the task's `batched_losses(W, batch)` gives the
  k mean losses and one backward pass gives the k gradients (the clients are independent,
  so the gradient of the sum of their losses is the stack of their gradients);
* mini-batches are drawn client by client with the very seeds the per-client path uses
  (`ClientData.batch(c.rng(t, stream), b)`: `randperm(n_i)[:b]` from the generator seeded by
  (seed, client, round, t, stream); the chunk's seeds folded at once, one generator reseeded
  per draw: the same indices), then gathered into one padded (k, B, ...) buffer with a 0/1
  mask for clients with fewer than b samples. With the keyed sampler (RunConfig.sampler
  'keyed', raycompo/keyed.py) the indices are the keyed hashes' b smallest of those very
  seeds, drawn for all the chunk's clients and steps in one call (no per-client torch op).
  `local_sgd` draws all its steps first and
  gathers their rows at once (within `gather_bytes`). Where the chunk's clients' data are
  rows of one stacked slab (`tasks/slab.py`, the host's data cache), the whole chunk's
  rows of every step are one index (slab offset + local index; padding: the slab's zero
  row) and one `index_select` of x and one of y, whatever k; otherwise one of each per client;
* a local step updates the rows of w in place; where the direction is a loss gradient
  (`CohortBatch.loss_gradient`) and the model backpropagates by hand, the update is fused
  into the gradient's product (`baddbmm_` with alpha = -lr: no gradient tensor at all).

Why not bit-exact: a batched matrix product and a masked mean round differently from k
separate ones (float32, about 1e-7 relative per step); results agree with the per-client
path to 1e-5 (tests/test_vectorize.py checks several rounds of every batched algorithm).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch

from raycompo.algorithms.base import ClientContext, State
from raycompo.algorithms.chunk_state import ChunkState
from raycompo.algorithms.size_groups import size_groups
from raycompo.problems.oracle import add_rows, uncounted
from raycompo.seeding import CLIENT, DISPATCH, FOLD_MANY_PYTHON, fold, fold_many
from raycompo.settings import row_scalar
from raycompo.tasks.base import ClientData, count_draws
from raycompo.tasks.draw_journal import DrawJournal
from raycompo.tasks.sampler import DEFAULT_SAMPLER, as_int64, keyed_indices
from raycompo.tasks.slab import PAD, DataSlab, common_slab

PREDRAW_INDICES = 2**20
"""`batches` draws the indices of at most this many (client, step, sample) ahead (8 MiB)."""


def padded_rows(sizes: np.ndarray, offsets: np.ndarray, width: int) -> np.ndarray:
    """(len(sizes), width) slab rows: client r's n_r rows in order from its offset, then the
    slab's zero row `PAD` up to `width` (its whole data, padded)."""
    col: np.ndarray = np.arange(width, dtype=np.int64)
    return np.where(col < sizes[:, None], offsets[:, None] + col, PAD)


@dataclass
class Batch:
    """k clients' mini-batches, padded to the largest: x (k, B, ...), y (k, B), mask (k, B)
    (1 for a client's real rows, 0 for padding) and count (k,) (real rows per client)."""

    x: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor
    count: torch.Tensor
    picks: Sequence[torch.Tensor | None] | None = None
    """Each client's drawn sample indices, in batch order (None: all its samples, in order)."""
    rows: list[int] | None = None
    """Each client's real rows (samples read) in this batch, as Python ints (`count` as a list)."""


class StepPicks(Sequence):
    """`Batch.picks` of one step of a gathered group: client i's indices, a view of the
    group's draws (`CohortBatch.draw_steps`) made when asked (None: all its samples)."""

    def __init__(self, drawn: torch.Tensor | None, rows_of: list[int | None], step: int):
        self.drawn, self.rows_of, self.step = drawn, rows_of, step

    def __len__(self) -> int:
        return len(self.rows_of)

    def __getitem__(self, i):  # type: ignore[override]
        r = self.rows_of[i]
        return None if r is None or self.drawn is None else self.drawn[r, self.step]


def picks_to(picks: list[torch.Tensor | None], device: torch.device) -> list[torch.Tensor | None]:
    """Drawn indices (CPU tensors of equal length; None: a client's whole data) on the
    device of the clients' data, in one copy for the whole chunk: on a GPU, one
    host-to-device transfer a step instead of one per client. On the CPU, as they are."""
    drawn = [p for p in picks if p is not None]
    if not drawn or drawn[0].device == device:
        return picks
    moved = iter(torch.stack(drawn).to(device).unbind(0))
    return [None if p is None else next(moved) for p in picks]


class TrialValues:
    """A payload value that differs between the trials of a population (engine/population.py):
    `stacked` (P, ...), trial p's value in row p. `CohortBatch.broadcast` gives each row of a
    chunk its trial's; a batched phase that a population runs reads such values through
    `broadcast` only (`Algorithm.population_phases`)."""

    def __init__(self, stacked: torch.Tensor):
        self.stacked = stacked


CHUNK_KEPT = "chunk kept"
"""The scratch key's tag of a value a chunk keeps for its next phase (`CohortBatch.keep_rows`)."""


GATHER_BYTES = 64 * 2**20
"""Default bound on the rows `CohortBatch.local_sgd` gathers at once (several steps' batches);
one step's batch is always gathered whole."""


BatchedFn = TypeVar("BatchedFn", bound=Callable[..., Any])


def batched_phase(name: str) -> Callable[[BatchedFn], BatchedFn]:
    """Declare a method as the batched form of client phase `name` (see the module doc).
    A batched phase is not inherited: a subclass that changes what a phase computes must
    not run its parent's batched form, so it declares its own (or runs per client)."""

    def mark(fn: BatchedFn) -> BatchedFn:
        fn.__batched_phase__ = name  # type: ignore[attr-defined]
        return fn

    return mark


class CohortBatch:
    """What a batched phase sees: k clients' contexts (their data and seeded streams), the
    task, and reusable buffers for their mini-batches. `gather_bytes`: at most this many
    bytes of several local steps' batches are gathered at once (`local_sgd`; default
    GATHER_BYTES)."""

    def __init__(self, clients: list[ClientContext], task: Any, device: torch.device, gather_bytes: int | None = None,
                 sizes: list[int] | None = None):
        self.clients = clients
        self.task = task
        self.device = device
        self.ids = [c.client_id for c in clients]
        self.k = len(clients)
        self.sizes = [c.data.num_samples for c in clients] if sizes is None else sizes
        """n_i of each client, as Python ints (read once; `sizes` where the caller knows them)."""
        self.gather_bytes = GATHER_BYTES if gather_bytes is None else gather_bytes
        self.trials: torch.Tensor | None = None
        """In a population's chunk (engine/population.py), each row's trial (k,) long, on the
        device: `broadcast` gives a row its trial's value of a `TrialValues`; else None."""
        self._xy: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self._gen = torch.Generator()  # reseeded per draw: manual_seed resets its whole state
        self._prefixes: np.ndarray | list[int] | None = None
        self._buffers: dict[tuple, tuple[Batch, list[torch.Tensor], list[torch.Tensor]]] = {}
        self._rows: dict[tuple, list[int]] = {}
        self._gathered: dict[int, tuple[int | None, dict[int, Batch]]] = {}
        # a stream's indices drawn ahead for steps whose batches are gathered one at a time
        # (`batches`): (size, steps, drawn (drawing, len(steps), size), rows_of)
        self._predrawn: dict[int, tuple[int, range, torch.Tensor | None, list[int | None]]] = {}
        self._draws: dict[int, tuple[list[int], list[int | None]]] = {}
        self._datas: list[ClientData] | None = None
        self._journal: DrawJournal | None = None
        self._slab_of: tuple[tuple[DataSlab, np.ndarray] | None] | None = None
        self._whole: dict[tuple[int, int | None], np.ndarray] = {}
        self.sampler: str = getattr(clients[0].data, "sampler", DEFAULT_SAMPLER) if clients else DEFAULT_SAMPLER
        """How the chunk's mini-batches are drawn (`ClientData.sampler`: one per host)."""

    @property
    def _sources(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each client's training (x, y) (clients of (x, y) samples only: not meta-learning's)."""
        if self._xy is None:
            self._xy = [(c.data.x, c.data.y) for c in self.clients]
        return self._xy

    @property
    def slab(self) -> tuple[DataSlab, np.ndarray] | None:
        """The stacked slab that holds every client's training data, and each client's
        offset in it (k,) (`tasks.slab.common_slab`); None where they are not all in one
        (then each client's rows are gathered on their own). Looked up once."""
        if self._slab_of is None:
            found = common_slab(self.data)
            self._slab_of = (None if found is None else (found[0], np.array(found[1], dtype=np.int64)),)
        return self._slab_of[0]

    @property
    def data(self) -> list[ClientData]:
        return [c.data for c in self.clients]

    def num_samples(self) -> torch.Tensor:
        """(k,) float64: each client's number of training samples n_i."""
        return torch.tensor([float(n) for n in self.sizes], dtype=torch.float64, device=self.device)

    # --- draws ---------------------------------------------------------------------------
    def seeds(self, step: int, stream: int = 0) -> list[int] | None:
        """Each client's seed of (step, stream): what `c.rng(step, stream)` is seeded with,
        for the whole chunk at once (`seeding.fold_many`); None when the contexts do not
        expose their key (`key_prefix`), and each client's own `rng` is used instead."""
        if self._prefixes is None:
            self._prefixes = self._key_prefixes()
        if len(self._prefixes) != self.k:
            return None
        if self.k <= FOLD_MANY_PYTHON:  # a few: one by one in Python (numpy's per-call cost is more)
            return [fold(p, step, stream) >> 1 for p in self._prefixes]
        return (fold_many(self._prefixes, step, stream) >> np.uint64(1)).tolist()

    def step_seeds(self, step: int, stream: int = 0) -> torch.Tensor:
        """(k,) int64: each client's seed of (step, stream), `c.rng(step, stream).initial_seed()`,
        its 64 bits (`_seed_rows` of the whole chunk: a task's own keyed draws, e.g.
        `MetaTask.meta_rows`)."""
        return self._seed_rows(list(range(self.k)), range(step, step + 1), stream).view(self.k)

    def _key_prefixes(self) -> np.ndarray | list[int]:
        """Each client's folded (seed, CLIENT, client, round[, DISPATCH, k]) (`ClientCtx.key_prefix`):
        for the whole chunk in one `fold_many` where the contexts share a seed, a round and a
        dispatch (a host's always do); empty where the contexts have no key (then `c.rng` is used)."""
        c0 = self.clients[0]
        seed, round_, k = getattr(c0, "seed", None), getattr(c0, "round", None), getattr(c0, "dispatch", 0)
        if (self.k > FOLD_MANY_PYTHON and hasattr(c0, "key_prefix") and isinstance(seed, int) and isinstance(round_, int)
                and self._shared_key() == {(seed, round_, k)}):
            base = np.full(self.k, fold(0, seed, CLIENT), dtype=np.uint64)
            folded = fold_many(base, np.array(self.ids, dtype=np.int64), round_)
            return folded if k == 0 else fold_many(folded, DISPATCH, k)
        try:
            prefixes = [c.key_prefix for c in self.clients]  # type: ignore[attr-defined]
        except AttributeError:
            return []
        return prefixes if self.k <= FOLD_MANY_PYTHON else np.array(prefixes, dtype=np.uint64)

    def _shared_key(self) -> set[tuple[Any, Any, Any]] | None:
        """The contexts' distinct (seed, round, dispatch), read in one comprehension (no call
        per client); None where a context lacks one of them."""
        try:
            return {(c.seed, c.round, c.dispatch) for c in self.clients}  # type: ignore[attr-defined]
        except AttributeError:
            return None

    def draw(self, step: int, size: int | None, stream: int = 0) -> list[torch.Tensor | None]:
        """Each client's sample indices of step `step`: `randperm(n_i)[:size]` from its
        generator of (step, stream) (with the keyed sampler, the keyed hashes' `size`
        smallest of that generator's seed), exactly as `ClientData.batch` draws them; None where
        size is None or >= n_i (all its samples, in order, no draw). The drawing clients'
        indices are rows of one tensor (`draw_steps`)."""
        if size is None:
            return [None] * self.k
        drawn, rows_of = self.draw_steps(range(step, step + 1), size, stream)
        rows = drawn.view(drawn.shape[0], size).unbind(0) if drawn is not None else ()
        return [None if r is None else rows[r] for r in rows_of]

    def draw_steps(self, steps: range, size: int, stream: int = 0) -> tuple[torch.Tensor | None, list[int | None]]:
        """The drawing clients' (size < n_i) indices of every step of `steps`, as one CPU
        tensor (drawing clients, len(steps), size), and each client's row of it (None: it
        reads all its samples). Each permutation is drawn client by client from its own
        generator of (step, stream), as `ClientData.batch` draws it (the sampler); their
        first `size` entries are taken for the whole chunk at once (one `cat`, one
        `index_select`), not sliced and concatenated client by client. With the keyed
        sampler, every drawing client's every step in one `keyed_indices` call of the same
        seeds (the same indices as `ClientData.batch`'s, whatever the chunk), on the CPU."""
        drawing, rows_of = self._drawing(size)
        if not drawing:
            return None, rows_of
        if self.sampler == "keyed":
            seeds = self._seed_rows(drawing, steps, stream)  # (drawing, steps)
            if self.trials is not None:  # a population's rows: trials of one seed draw alike, drawn once
                return self._shared_keyed(seeds, [self.sizes[i] for i in drawing], size), rows_of
            n: np.ndarray = np.repeat(np.array([self.sizes[i] for i in drawing], dtype=np.int64), len(steps))
            drawn = keyed_indices(seeds.reshape(-1), torch.from_numpy(n), size)
            return drawn.view(len(drawing), len(steps), size), rows_of
        perms = self._permutations(drawing, steps, stream)
        lengths = np.repeat(np.array([self.sizes[i] for i in drawing], dtype=np.int64), len(steps))
        starts = np.cumsum(lengths) - lengths
        firsts = torch.from_numpy((starts[:, None] + np.arange(size, dtype=np.int64)).reshape(-1))
        drawn = torch.cat(perms).index_select(0, firsts)
        return drawn.view(len(drawing), len(steps), size), rows_of

    @staticmethod
    def _shared_keyed(seeds: torch.Tensor, sizes: list[int], size: int) -> torch.Tensor:
        """The keyed draws of `seeds` (rows, steps) of clients of `sizes` (rows), each distinct
        row of seeds (a client's, shared by a population's trials of one seed) drawn once."""
        unique, inverse = torch.unique(seeds, dim=0, return_inverse=True)
        n = torch.zeros(len(unique), dtype=torch.int64).scatter_(0, inverse, torch.tensor(sizes, dtype=torch.int64))
        drawn = keyed_indices(unique.reshape(-1), n.repeat_interleave(seeds.shape[1]), size)
        return drawn.view(len(unique), seeds.shape[1], size).index_select(0, inverse)

    def _drawing(self, size: int) -> tuple[list[int], list[int | None]]:
        """The clients that draw a batch of `size` (size < n_i), by position in the chunk, and
        each client's row among them (None: it reads all its samples); once per size."""
        found = self._draws.get(size)
        if found is None:
            drawing = [i for i, n in enumerate(self.sizes) if size < n]
            rows_of: list[int | None] = [None] * self.k
            for r, i in enumerate(drawing):
                rows_of[i] = r
            found = self._draws[size] = (drawing, rows_of)
        return found

    def _permutations(self, drawing: list[int], steps: range, stream: int) -> list[torch.Tensor]:
        """`randperm(n_i)` of each client in `drawing` (positions in the chunk) at each step of
        `steps`, client after client, from the generator of (step, stream)."""
        per_step = [self.seeds(t, stream) for t in steps]
        if per_step[0] is None:
            return [torch.randperm(self.sizes[i], generator=self.clients[i].rng(t, stream))
                    for i in drawing for t in steps]
        if self.trials is not None:  # a population's rows: trials of one seed draw the same, drawn once
            return self._shared_permutations(drawing, per_step)
        g, randperm, reseed = self._gen, torch.randperm, self._gen.manual_seed  # the loop's names, looked up once
        perms: list[torch.Tensor] = []
        append = perms.append
        for i in drawing:
            n = self.sizes[i]
            for seeds in per_step:
                reseed(seeds[i])  # type: ignore[index]
                append(randperm(n, generator=g))
        return perms

    def _shared_permutations(self, drawing: list[int], per_step: list) -> list[torch.Tensor]:
        """`_permutations` where rows may repeat a generator's seed (a population's trials of
        one seed: the same client, round and step): each (seed, n_i) drawn once."""
        g, randperm, reseed = self._gen, torch.randperm, self._gen.manual_seed
        drawn: dict[tuple[int, int], torch.Tensor] = {}
        perms: list[torch.Tensor] = []
        for i in drawing:
            n = self.sizes[i]
            for seeds in per_step:
                key = (seeds[i], n)
                if key not in drawn:
                    reseed(seeds[i])
                    drawn[key] = randperm(n, generator=g)
                perms.append(drawn[key])
        return perms

    def _seed_rows(self, drawing: list[int], steps: range, stream: int) -> torch.Tensor:
        """(len(drawing), len(steps)) int64: the seed of each drawing client's generator of
        (step, stream), its 64 bits as an int64 (`seeds`, folded for the chunk at once)."""
        if self._prefixes is None:
            self._prefixes = self._key_prefixes()
        at = np.array(drawing, dtype=np.int64)
        if isinstance(self._prefixes, np.ndarray) and len(self._prefixes) == self.k:
            prefixes = self._prefixes[at]
            cols = [fold_many(prefixes, t, stream) >> np.uint64(1) for t in steps]  # one per step, not per client
            return torch.from_numpy(np.stack(cols, 1).view(np.int64))
        per_step = [self.seeds(t, stream) for t in steps]
        rows = [[as_int64(s[i]) if s is not None else as_int64(self.clients[i].rng(t, stream).initial_seed())
                 for t, s in zip(steps, per_step)] for i in drawing]  # a few clients, or contexts without a key
        return torch.tensor(rows, dtype=torch.int64).view(len(drawing), len(steps))

    def _real_rows(self, size: int | None) -> list[int]:
        return list(self.sizes) if size is None else [n if n < size else size for n in self.sizes]

    def batch(self, step: int, size: int | None, stream: int = 0, count: bool = True) -> Batch:
        """Each client's mini-batch of local step `step`: the samples
        `ClientData.batch(c.rng(step, stream), size)` draws (all of them, in order, when
        size is None or >= n_i), padded. The returned tensors are this stream's buffers:
        valid until the next draw on the same stream. Each client's rows are counted as
        `ClientData.batch` counts them (a draw repeated from the same seed within the round,
        once); not with `count` False (an evaluation's read, as `ClientData.x` read directly)."""
        size_key, gathered = self._gathered.get(stream, (None, {}))
        if step in gathered and size_key == size:  # drawn and gathered ahead (`gather`)
            view = gathered[step]
            if count:
                self._count(step, size, stream, view.rows or [])
            return view
        rows = self._real_rows(size)
        width = max(rows)
        if self.slab is not None:
            drawn: torch.Tensor | None = None
            rows_of: list[int | None] = [None] * self.k
            if size is not None:
                drawn, rows_of = self._step_draw(step, size, stream)
            buf = self._buffer(stream, width, 1)[0]
            self._slab_gather(buf, drawn, rows_of, size, 1, width)
            self._gathered.pop(stream, None)
            buf.picks, buf.rows = StepPicks(drawn, rows_of, 0), rows
            if count:
                self._count(step, size, stream, rows)
            self._mark(buf, (stream, width, 1), rows, padded=True)
            return buf
        picks = self.draw(step, size, stream)
        buf, xs, ys = self._buffer(stream, width, 1)
        on_device = picks_to(picks, self._sources[0][0].device)
        for (x, y), p, n, bx, by in zip(self._sources, on_device, rows, xs, ys):
            if n < width:
                bx, by = bx[:n], by[:n]
            if p is None:
                bx.copy_(x)
                by.copy_(y)
            else:
                torch.index_select(x, 0, p, out=bx)
                torch.index_select(y, 0, p, out=by)
        self._gathered.pop(stream, None)
        buf.picks, buf.rows = picks, rows
        if count:
            self._count(step, size, stream, rows)
        self._mark(buf, (stream, width, 1), rows)
        return buf

    def _step_draw(self, step: int, size: int, stream: int) -> tuple[torch.Tensor | None, list[int | None]]:
        """`draw_steps(range(step, step + 1), size, stream)`, from the indices `batches` drew
        ahead for this step where it did (the same indices: each row's draw depends only on
        its client, step and stream)."""
        ahead = self._predrawn.get(stream)
        if ahead is not None and ahead[0] == size and step in ahead[1]:
            _, steps, drawn, rows_of = ahead
            j = step - steps.start
            return (None if drawn is None else drawn[:, j:j + 1]), rows_of
        return self.draw_steps(range(step, step + 1), size, stream)

    def _count(self, step: int, size: int | None, stream: int, rows: list[int]) -> None:
        """Each client's samples read in a batch handed out (`ClientData.samples_read`, for
        the engine's ledger), keyed by the seed of (step, stream) as `ClientData.batch` keys
        them: once per draw, gathered ahead or not."""
        seeds = self.seeds(step, stream)
        if seeds is None:
            seeds = [c.rng(step, stream).initial_seed() for c in self.clients]
        datas = self._datas
        if datas is None:  # the chunk's data objects, read once (a comprehension: no call per client)
            datas = self._datas = [c.data for c in self.clients]
            self._journal = DrawJournal.claim(datas, self.sizes)  # None: counted client by client
        journal = self._journal
        if journal is not None:  # counted for the whole chunk (tasks/draw_journal.py), else client by client
            if len(rows) == self.k and journal.count(step, stream, size, seeds, rows):
                return
            journal.materialize()
        if {type(d) for d in datas} == {ClientData}:  # each counted as `count_draw` does, without a call each
            count_draws(datas, seeds, size, rows, self.sizes)
            return
        for d, seed, n, total in zip(datas, seeds, rows, self.sizes):
            count_draw = getattr(d, "count_draw", None)
            if count_draw is None:
                d.samples_read += n
            else:
                count_draw(int(seed), None if size is None or size >= total else size, n)

    def close(self) -> None:
        """Hand the chunk's clients the draws counted for the whole chunk (`DrawJournal`): the
        engine calls it when the batched phase returns, before the ledger reads them."""
        if self._journal is not None:
            self._journal.close()

    def gather(self, steps: range, size: int | None, stream: int = 0) -> None:
        """Draw the batches of `steps` ahead and gather their rows at once: the whole
        chunk's with one `index_select` of x and one of y from the clients' common slab
        (`slab`), else each client's with one of each: `batch(t, size, stream)` for t in
        `steps` then returns views of them, the same rows as drawing step by step. Each
        step's batch is a (k, B, ...) slice of one (k, len(steps), B, ...) buffer."""
        steps = range(steps.start, steps.stop)
        rows = self._real_rows(size)
        width = max(rows)
        if size is None or len(steps) <= 1:
            self._gathered.pop(stream, None)
            return  # nothing drawn (the whole data) or nothing to gain: step by step
        drawn, rows_of = self.draw_steps(steps, size, stream)
        buf, xs, ys = self._buffer(stream, width, len(steps))
        if self.slab is not None:
            self._slab_gather(buf, drawn, rows_of, size, len(steps), width)
            self._views(stream, steps, size, buf, drawn, rows_of, rows, padded=True)
            return
        # Each drawing client's rows of every step, one after the other (a client smaller
        # than the batch reads all its rows, in order, at every step: no draw).
        index: tuple[torch.Tensor, ...] = ()
        if drawn is not None:
            device = self._sources[0][0].device
            flat = drawn.view(drawn.shape[0], -1)
            index = (flat if flat.device == device else flat.to(device)).unbind(0)  # one copy for the chunk
        for (x, y), n, r, bx, by in zip(self._sources, rows, rows_of, xs, ys):
            if r is None:
                bx = bx.view(len(steps), width, *bx.shape[1:])[:, :n]
                by = by.view(len(steps), width)[:, :n]
                bx.copy_(x.unsqueeze(0).expand_as(bx))
                by.copy_(y.unsqueeze(0).expand_as(by))
            else:
                torch.index_select(x, 0, index[r], out=bx)
                torch.index_select(y, 0, index[r], out=by)
        self._views(stream, steps, size, buf, drawn, rows_of, rows)

    def _views(self, stream: int, steps: range, size: int | None, buf: Batch, drawn: torch.Tensor | None,
               rows_of: list[int | None], rows: list[int], padded: bool = False) -> None:
        """Each step's batch of a gathered group, as views of its (k, steps, B, ...) buffer."""
        width = buf.mask.shape[1]
        views: dict[int, Batch] = {}
        for j, t in enumerate(steps):
            views[t] = Batch(buf.x[:, j], buf.y[:, j], buf.mask, buf.count, StepPicks(drawn, rows_of, j), rows)
        self._mark(buf, (stream, width, len(steps)), rows, padded)
        self._gathered[stream] = (size, views)

    def _slab_gather(self, buf: Batch, drawn: torch.Tensor | None, rows_of: list[int | None], size: int | None,
                     steps: int, width: int) -> None:
        """Buffer `buf` (k, [steps,] width, ...) <- the chunk's rows of `steps` steps from the
        clients' slab, with one index (built in numpy) and one `index_select` of x and of y:
        a drawing client's row j of step t is its offset + drawn[its row, t, j]; any other
        reads its n_i rows in order then the slab's zero row (padding, zeros and label 0)."""
        slab, offsets = self.slab  # type: ignore[misc]
        index: np.ndarray = np.empty((self.k, steps, width), dtype=np.int64)
        index[:] = self._whole_rows(width, size)[:, None, :]
        if drawn is not None:
            drawing = self._drawing(size)[0]  # type: ignore[arg-type]
            index[drawing] = drawn.numpy() + offsets[drawing][:, None, None]
        flat = torch.from_numpy(index.reshape(-1))
        if flat.device != slab.x.device:
            flat = flat.to(slab.x.device)  # one copy for the chunk
        torch.index_select(slab.x, 0, flat, out=buf.x.view(-1, *buf.x.shape[(3 if steps > 1 else 2):]))
        torch.index_select(slab.y, 0, flat, out=buf.y.view(-1))

    def _whole_rows(self, width: int, size: int | None) -> np.ndarray:
        """(k, width): each client's slab rows when it reads its n_i rows in order, then the
        zero row `PAD` up to `width` (a drawing client's row is overwritten by its draw)."""
        key = (width, size)
        found = self._whole.get(key)
        if found is None:
            found = self._whole[key] = padded_rows(np.array(self.sizes, dtype=np.int64), self.slab[1], width)  # type: ignore[index]
        return found

    def _mark(self, buf: Batch, key: tuple, rows: list[int], padded: bool = False) -> None:
        """Each client's real rows in the mask and count of buffer `key` (rewritten when
        they change); `padded`: the gather writes the padding rows' zeros itself."""
        width, steps = key[1], key[2]
        if self._rows.get(key) != rows:
            self._rows[key] = rows
            buf.count.copy_(torch.tensor(rows, dtype=buf.count.dtype))
            buf.mask.copy_(torch.arange(width, device=self.device).unsqueeze(0) < buf.count.unsqueeze(1))
            if padded:
                return
            x, y = self._buffers[key][0].x, self._buffers[key][0].y
            for i, n in enumerate(rows):  # padding: zero inputs, label 0 (finite losses, weighed 0)
                if n < width:
                    (x[i, n:] if steps == 1 else x[i, :, n:]).zero_()
                    (y[i, n:] if steps == 1 else y[i, :, n:]).zero_()

    def _buffer(self, stream: int, width: int, steps: int) -> tuple[Batch, list[torch.Tensor], list[torch.Tensor]]:
        """The reused batch of (stream, width, steps): x (k, B, ...), or (k, steps, B, ...)
        for several steps, and each client's rows of it as (steps * B, ...) views."""
        key = (stream, width, steps)
        found = self._buffers.get(key)
        if found is None:
            x0, y0 = self._sources[0]
            lead = (self.k, width) if steps == 1 else (self.k, steps, width)
            # Not zeroed: every real row is written by each gather, padding by `_mark`.
            x = torch.empty((*lead, *x0.shape[1:]), dtype=x0.dtype, device=self.device)
            y = torch.empty(lead, dtype=y0.dtype, device=self.device)
            mask = torch.ones((self.k, width), dtype=x0.dtype if x0.is_floating_point() else torch.float32, device=self.device)
            count = torch.full((self.k,), float(width), dtype=mask.dtype, device=self.device)
            buf = Batch(x, y, mask, count)
            flat_x = x.view(self.k, steps * width, *x0.shape[1:])
            found = self._buffers[key] = (buf, list(flat_x.unbind(0)), list(y.view(self.k, steps * width).unbind(0)))
        return found

    # --- losses, gradients, local steps ---------------------------------------------------
    def losses(self, w: torch.Tensor, batch: Batch) -> torch.Tensor:
        """(k,): each client's mean loss of its row of w on its batch."""
        return self.task.batched_losses(w, batch)

    def loss_grad(self, w: torch.Tensor, batch: Batch, scale: Callable[[torch.Tensor], torch.Tensor] | None = None):
        """(gradients (k, dim), losses (k,)): each client's gradient of its mean loss at its
        row of w, multiplied by `scale(losses)` (k,) when given (a composition's outer
        derivative at the inner value, e.g. ComFedL's exp(f/gamma)/gamma), as the
        per-client backward pass with `grad_outputs` does."""
        return self.task.batched_loss_grad(w, batch, scale)

    def loss_gradient(self, scale: Callable[[torch.Tensor], torch.Tensor] | None = None) -> LossGradient:
        """The direction of `local_sgd` that is each client's (scaled) mean-loss gradient,
        `loss_grad(w, batch, scale)[0]`: its step is fused into the gradient's product where
        the task allows (`Task.batched_loss_step_`)."""
        return LossGradient(self, scale)

    def local_sgd(self, w: torch.Tensor, steps: int, lr: float | torch.Tensor, batch_size: int | None,
                  direction: Callable[[torch.Tensor, Batch, int], torch.Tensor], snapshot_at: int | None = None,
                  stream: int = 0):
        """`algorithms.base.local_sgd` for k clients: w (k, dim) <- w - lr * direction(w, batch, t);
        `lr` a number, or each row's (k,) in a population's chunk (`settings.row_scalar`).
        The iterate is a copy of w updated in place (w itself is left as it is); the batches
        of several steps are gathered at once (`gather`, within `gather_bytes`)."""
        w = w.clone(memory_format=torch.contiguous_format)
        snap = w.clone() if snapshot_at == 0 else None
        step_ = getattr(direction, "step_", None)
        for t, batch in self.batches(steps, batch_size, stream):
            if step_ is not None:
                step_(w, batch, lr)
            elif isinstance(lr, torch.Tensor):  # a population's per-row step sizes (k,)
                w.sub_(direction(w, batch, t) * row_scalar(lr, w))
            else:
                w.sub_(direction(w, batch, t), alpha=lr)
            if snapshot_at is not None and t + 1 == snapshot_at:
                snap = w.clone()
        return (w, snap) if snapshot_at is not None else w

    def batches(self, steps: int, size: int | None, stream: int = 0) -> Iterator[tuple[int, Batch]]:
        """(t, `batch(t, size, stream)`) for t in range(steps), the batches of several steps
        gathered ahead (`gather`, within `gather_bytes`); each valid until the next. At the
        end, the stream's gathered buffers are let go (another stream's may follow)."""
        group = max(1, min(steps, self.gather_bytes // max(self._step_bytes(size), 1)))
        # Gathered one step at a time (a step's batch alone fills the cache), the steps'
        # indices are still drawn ahead, in one call for up to `ahead` steps: a draw's cost
        # is mostly per call on a small chunk.
        ahead = max(1, min(steps, PREDRAW_INDICES // max(self.k * (size or 1), 1))) if group == 1 and size else 1
        for t in range(steps):
            if t % group == 0 and group > 1:
                self.gather(range(t, min(steps, t + group)), size, stream)
            if ahead > 1 and t % ahead == 0 and size is not None:
                window = range(t, min(steps, t + ahead))
                self._predrawn[stream] = (size, window, *self.draw_steps(window, size, stream))
            yield t, self.batch(t, size, stream)
        self._gathered.pop(stream, None)
        self._predrawn.pop(stream, None)
        for key in [key for key in self._buffers if key[0] == stream and key[2] > 1]:
            del self._buffers[key]
            self._rows.pop(key, None)

    def _step_bytes(self, size: int | None) -> int:
        """Bytes of one step's gathered batch (x and y)."""
        x0, y0 = self._sources[0]
        width = max(self._real_rows(size))
        row = x0[0].numel() * x0.element_size() + y0.element_size() if len(x0) else 1
        return self.k * width * row

    def whole(self, stream: int, count: bool = True) -> Batch | None:
        """Each client's whole training data (all its n_i rows, in order, padded), as
        `ClientData.full` reads it and counted so (n_i samples; not with `count` False: an
        evaluation's read), gathered for the chunk at once where its padded rows fit
        `gather_bytes`; None where they do not (read them client by client then). `stream`: a
        stream of the algorithm's own, no mini-batch's (a second read of the same stream in a
        round is counted once). The bound is at least `GATHER_BYTES`: `gather_bytes` may be
        cut to a cache's size for the local steps' batches."""
        if self._step_bytes(None) > max(self.gather_bytes, GATHER_BYTES):
            return None
        return self.batch(0, None, stream, count)

    def whole_losses(self, w: torch.Tensor, stream: int) -> torch.Tensor | None:
        """(k,): each client's mean loss of its row of w on its whole training data, as
        `losses(w, whole(stream))`, its reads and oracle calls counted so (n_i each). Where the
        chunk padded to its largest client does not fit, the clients are read in groups of
        similar sizes that each fit (`size_groups`): a few operations per group, none per
        client. None where the clients are in no common slab (read them one by one then)."""
        whole = self.whole(stream)
        if whole is not None:
            return self.losses(w, whole)
        if self.slab is None:
            return None
        slab, offsets = self.slab
        x, y = slab.x, slab.y
        sizes = np.array(self.sizes, dtype=np.int64)
        row_bytes = x[0].numel() * x.element_size() + y.element_size()
        out = w.new_empty(self.k)
        self._count(0, None, stream, list(self.sizes))
        with uncounted():  # counted below, n_i on each row, as one read of the whole data
            for rows in size_groups(sizes, row_bytes, max(self.gather_bytes, GATHER_BYTES)):
                n = sizes[rows]
                width = int(n.max())
                index = torch.from_numpy(padded_rows(n, offsets[rows], width).reshape(-1)).to(x.device)
                count = torch.from_numpy(n).to(device=self.device, dtype=x.dtype if x.is_floating_point() else torch.float32)
                mask = (torch.arange(width, device=self.device).unsqueeze(0) < count.unsqueeze(1)).to(count.dtype)
                batch = Batch(x.index_select(0, index).view(len(rows), width, *x.shape[1:]),
                              y.index_select(0, index).view(len(rows), width), mask, count, rows=n.tolist())
                at = torch.from_numpy(rows).to(w.device)
                out[at] = self.task.batched_losses(w.index_select(0, at), batch)
        add_rows(self.sizes)
        return out

    def sample_index(self, batch: Batch) -> torch.Tensor:
        """(k, B) int64 on the CPU: row i, column j is the index in client i's own data of its
        row j of `batch` (what `batch.picks[i][j]` holds); for a client that reads all its
        samples, j itself (a padding row's j >= n_i is no sample's). The drawing clients'
        rows written at once where the batch's picks are a view of the chunk's draws."""
        width = batch.mask.shape[1]
        index = torch.arange(width, dtype=torch.int64).repeat(self.k, 1)
        picks = batch.picks
        if isinstance(picks, StepPicks):
            if picks.drawn is not None:
                drawing = self._drawing(picks.drawn.shape[2])[0]
                index[torch.tensor(drawing, dtype=torch.int64)] = picks.drawn[:, picks.step].to(torch.int64)
            return index
        for i, p in enumerate(picks or ()):  # a chunk drawn client by client (no common slab)
            if p is not None:
                index[i, :len(p)] = p.to("cpu", torch.int64)
        return index

    def keep_rows(self, name: str, value: torch.Tensor | None) -> None:
        """Keep a (k, ...) value of the chunk (or None) for a later phase of this round on the
        same clients (`take_rows`), as the per-client path keeps a client's row in its
        `c.scratch[name]`: once for the chunk, in its first client's scratch with the chunk's
        ids (no write per client)."""
        self.clients[0].scratch[(CHUNK_KEPT, name)] = (self.ids, value)

    def take_rows(self, name: str) -> torch.Tensor | None:
        """The value `keep_rows(name, ...)` kept for these very clients, in this order (and
        forgotten); a host cuts a round's phases into the same chunks (`engine/batched.py`:
        the chunk size does not depend on the phase), so another cut is an error, not a guess."""
        kept = self.clients[0].scratch.pop((CHUNK_KEPT, name), None)
        if kept is None or kept[0] != self.ids:
            raise RuntimeError(f"no {name!r} kept for this chunk of clients {self.ids[:5]}...: an earlier phase of the "
                               "round ran them in other chunks")
        return kept[1]

    def broadcast(self, w: torch.Tensor | TrialValues) -> torch.Tensor:
        """One model (dim,) as k rows (a view, no copy); in a population's chunk, a
        `TrialValues` as each row's trial's model (one `index_select`)."""
        if isinstance(w, TrialValues):
            assert self.trials is not None, "a TrialValues payload outside a population's chunk"
            return w.stacked.index_select(0, self.trials)
        return w.unsqueeze(0).expand(self.k, -1)

    def row_value(self, value: Any) -> Any:
        """A payload number as it is; in a population's chunk, a `TrialValues` of the trials'
        numbers (`Algorithm.row_payload`) as each row's trial's, a (k,) float64 tensor (scale
        rows with `settings.row_scalar`)."""
        return self.broadcast(value) if isinstance(value, TrialValues) else value

    @staticmethod
    def rows(t: torch.Tensor) -> list[torch.Tensor]:
        """A stacked (k, ...) tensor as k tensors of their own (a client's state must not
        keep the whole chunk's storage alive)."""
        return [r.clone() for r in t]

    def stack_state(self, states: Sequence[State], key: Any, default: torch.Tensor | None = None) -> torch.Tensor:
        """(k, ...): each client's `state[key]`, or `default` where it has none yet (None:
        every client has it); a `ChunkState`'s rows as they are, without a copy per client."""
        if isinstance(states, ChunkState):
            return states.stacked(key, default)
        if default is None:
            return torch.stack([s[key] for s in states])
        return torch.stack([s.get(key, default) for s in states])

    def state_rows(self, states: Sequence[State], key: Any, fallback: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """((k, ...) each client's `state[key]`, or its row of `fallback` (k, ...) where it
        has none; (k,) bool on the CPU: which clients have it)."""
        if isinstance(states, ChunkState):
            return states.rows_or(key, fallback)
        has = [key in s for s in states]
        return torch.stack([s[key] if h else f for s, h, f in zip(states, has, fallback)]), torch.tensor(has, dtype=torch.bool)

    def new_states(self, states: Sequence[State], values: dict[Any, torch.Tensor]) -> ChunkState | list[State]:
        """The k clients' new states: each one's state with its row of `values[key]` under
        each key (`{**state, key: row}`): a `ChunkState` for a `ChunkState` (the rows stay
        stacked), a list of dicts of rows of their own (`rows`) for a list."""
        if isinstance(states, ChunkState):
            return states.replace(values)
        if not any(states):  # all empty: {**{}, **values} is the rows themselves
            return ChunkState(self.k, values)
        rows = {key: self.rows(v) for key, v in values.items()}
        return [{**st, **{key: r[i] for key, r in rows.items()}} for i, st in enumerate(states)]


class LossGradient:
    """A `local_sgd` direction: each client's mean-loss gradient at its row of w, times
    `scale(losses)` when given (`CohortBatch.loss_grad`). Callable as any direction; its
    `step_` updates w in place, fused into the gradient's product where the task can."""

    def __init__(self, cb: CohortBatch, scale: Callable[[torch.Tensor], torch.Tensor] | None = None):
        self.cb = cb
        self.scale = scale

    def __call__(self, w: torch.Tensor, batch: Batch, t: int) -> torch.Tensor:
        return self.cb.loss_grad(w, batch, self.scale)[0]

    def step_(self, w: torch.Tensor, batch: Batch, lr: float) -> None:
        """w <- w - lr * scale(f) grad f, in place (`Task.batched_loss_step_`)."""
        self.cb.task.batched_loss_step_(w, batch, lr, self.scale)
