"""Keyed meta-batches (tasks/meta_draws.py, issue 41): maml-sinusoid's tasks and points drawn
for a whole chunk (`MamlSinusoid.meta_rows`) are each client's own `batch`, bit for bit,
whatever the chunk; picks are uniform without replacement and in range, points uniform on
[-5, 5]; the 'randperm' sampler keeps the draws of 0.1.1."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from raycompo.keyed import as_int64
from raycompo.run import main
from raycompo.tasks import meta_draws
from raycompo.tasks.maml_sinusoid import X_RANGE, MamlSinusoid, SinusoidSettings, sinusoid


def _seeds(rng: np.random.Generator, k: int) -> list[int]:
    return [int(s) for s in rng.integers(0, 2**63 - 1, k, dtype=np.int64)]


def _alone(client, seed: int, size: int | None):
    return client.batch(torch.Generator().manual_seed(seed), size)


@pytest.mark.parametrize("n_clients", [3, 5, 10, 25])
def test_a_chunks_rows_are_each_clients_own_batch_whatever_the_chunk(n_clients):
    """Row by row: the client, the task (its position and id), support and query points and
    targets equal `batch` of that client alone with the same seed, bit for bit; and a client's
    rows are the same in a chunk of other clients, in another order."""
    task = MamlSinusoid(SinusoidSettings(n_clients=n_clients), seed=1)
    clients = task.clients(list(range(n_clients)))
    rng = np.random.default_rng(n_clients)
    for size in (1, 2, 3, None, 9):
        seeds = _seeds(rng, n_clients)
        rows = task.meta_rows(clients, torch.tensor([as_int64(s) for s in seeds]), size)
        r = 0
        for i, (c, seed) in enumerate(zip(clients, seeds)):
            alone = _alone(c, seed, size)
            assert len(alone) == rows.per_client[i] == (c.n_tasks if size is None else min(size, c.n_tasks))
            for sample in alone:
                assert int(rows.owner[r]) == i and c.task_ids[int(rows.position[r])] == sample.key
                for got, want in zip((*rows.support, *rows.query), (*sample.support, *sample.query)):
                    assert torch.equal(got[r], want)
                r += 1
        assert r == len(rows.owner)
        order = rng.permutation(n_clients)[: max(1, n_clients // 2)]  # another chunk: a subset, shuffled
        sub = task.meta_rows([clients[j] for j in order], torch.tensor([as_int64(seeds[j]) for j in order]), size)
        for slot, j in enumerate(order):
            mine, theirs = rows.owner == int(j), sub.owner == slot
            assert torch.equal(rows.support[0][mine], sub.support[0][theirs])
            assert torch.equal(rows.query[1][mine], sub.query[1][theirs])


def test_picks_are_uniform_without_replacement_and_points_uniform_in_range():
    """Over many seeds: each of a client's 5 tasks is picked with frequency 3/5 (within 5
    binomial standard deviations), a meta-batch's tasks are distinct, and the points are
    uniform on [-5, 5] (the mean and the quarters' shares within 5 standard deviations)."""
    draws, n, b, count = 6000, 5, 3, 20
    seeds = torch.from_numpy(np.random.default_rng(7).integers(-(2**63), 2**63 - 1, draws, dtype=np.int64))
    picks = meta_draws.draw_many(seeds, np.full(draws, n, dtype=np.int64), b, count, *X_RANGE)
    per_row = picks.position.view(draws, b)
    assert all(len(set(row)) == b for row in per_row.tolist()) and int(per_row.min()) >= 0 and int(per_row.max()) < n
    freq = torch.bincount(picks.position, minlength=n).double()
    p = b / n
    assert (freq - draws * p).abs().max() < 5 * math.sqrt(draws * p * (1 - p))
    x = picks.x.double().view(-1)
    lo, hi = X_RANGE
    assert float(x.min()) >= lo and float(x.max()) <= hi  # [lo, hi]: float32 may round up to hi
    assert abs(float(x.mean())) < 5 * (hi - lo) / math.sqrt(12 * len(x))
    quarters = torch.bincount(((x - lo) / (hi - lo) * 4).long().clamp(max=3), minlength=4).double()
    assert (quarters - len(x) / 4).abs().max() < 5 * math.sqrt(len(x) * 0.25 * 0.75)


def test_a_steps_points_are_independent_of_its_picks():
    """The points' stream is keyed apart from the picks' hashes (fold(seed, POINTS)): across
    seeds the point of a slot does not depend on which task the slot picked (the mean point
    per picked task is within noise of 0; with the picks' own stream it is not)."""
    draws = 4000
    seeds = torch.from_numpy(np.random.default_rng(8).integers(-(2**63), 2**63 - 1, draws, dtype=np.int64))
    picks = meta_draws.draw_many(seeds, np.full(draws, 5, dtype=np.int64), 1, 1, *X_RANGE)
    x = picks.x.view(-1).double()
    for task in range(5):
        chosen = x[picks.position == task]
        assert abs(float(chosen.mean())) < 5 * 10 / math.sqrt(12 * len(chosen))


def test_the_randperm_sampler_keeps_the_draws_of_0_1_1():
    """With 'randperm' a client draws `randperm(n)[:b]` and one `rand` per task from the step's
    generator, as releases up to 0.1.1 did (written out here), and a chunk's rows are not
    drawn at once (`meta_rows` None: the algorithms draw client by client)."""
    task = MamlSinusoid(SinusoidSettings(), seed=2)
    client = task.clients([1])[0]
    client.sampler = "randperm"
    try:
        got = _alone(client, 99, 3)
        gen = torch.Generator().manual_seed(99)
        picks = torch.randperm(5, generator=gen)[:3].tolist()
        for sample, i in zip(got, picks):
            x = -5.0 + 10.0 * torch.rand((20, 1), generator=gen)
            a, b = client.params[i].tolist()
            assert sample.key == client.task_ids[i]
            assert torch.equal(sample.support[0], x[:10]) and torch.equal(sample.query[0], x[10:])
            assert torch.equal(sample.query[1], sinusoid(x[10:], a, b))
        assert task.meta_rows([client], torch.tensor([99]), 3) is None
    finally:
        client.sampler = "keyed"


def test_keyed_and_randperm_runs_differ_and_each_is_deterministic(tmp_path):
    """The run's sampler reaches the sinusoid clients (the host sets it): the two samplers'
    rows differ after a round, and the same sampler twice gives the same rows; the vectorized
    run (`auto` batches the sinusoid's MLP on the CPU too) equals the per-client one (1e-5)."""
    def run(name, *extra):
        out = tmp_path / name
        assert main(["--task", "maml-sinusoid", "--algo", "local-moml", "--rounds", "2", "--eval-every", "1",
                     "--backend", "inline", "--out", str(out), *extra]) == 0
        return pd.read_csv(out / "metrics.csv")["val_loss"].to_numpy()

    keyed, again, randperm = run("k"), run("k2"), run("r", "--sampler", "randperm")
    per_client = run("v", "--vectorize", "off")
    assert np.array_equal(keyed, again) and keyed[0] == randperm[0] and keyed[-1] != randperm[-1]
    np.testing.assert_allclose(per_client, keyed, rtol=1e-5)


@pytest.mark.parametrize("sampler", ["keyed", "randperm"])
@pytest.mark.parametrize("algo,extra", [("local-scgdm", ()), ("local-moml", ("--set", "clients_per_round=3"))])
def test_vectorized_equals_per_client_with_either_sampler(tmp_path, sampler, algo, extra):
    """Batched (a chunk's keyed rows, or with 'randperm' each client's draws stacked) and client
    by client: the same losses (1e-5) and exactly the same ledger (samples read, oracle
    calls, values sent) after 3 rounds."""
    def run(vectorize):
        out = tmp_path / vectorize
        assert main(["--task", "maml-sinusoid", "--algo", algo, "--rounds", "3", "--eval-every", "1", "--backend",
                     "inline", "--sampler", sampler, "--vectorize", vectorize, "--out", str(out), *extra]) == 0
        return pd.read_csv(out / "metrics.csv").dropna(subset=["val_loss"])

    off, on = run("off"), run("on")
    for col in ("samples", "oracle_calls", "values_up", "values_down"):
        assert off[col].tolist() == on[col].tolist(), col
    assert off["samples"].iloc[-1] > 0
    np.testing.assert_allclose(on[["train_loss", "val_loss"]], off[["train_loss", "val_loss"]], rtol=1e-5)
