"""The counter-based keyed mini-batch sampler (issue 41, raycompo/keyed.py, tasks/sampler.py; RunConfig.sampler
'keyed'): its hash is the Python reference's bit for bit, its draws are uniform without
replacement and in range, a client's indices do not depend on its chunk, and the per-client
and batched paths agree with it as they do with randperm."""

from __future__ import annotations

import dataclasses
import json
import math
import random

import numpy as np
import pytest
import torch

import raycompo
from raycompo import keyed
from raycompo.algorithms.cohort import CohortBatch
from raycompo.configuration.config import RunConfig, resolve
from raycompo.engine.host import ClientCtx
from raycompo.errors import ConfigError
from raycompo.keyed import (
    GROUPS,
    MASKED,
    _groups,
    as_int64,
    keyed_draw,
    keyed_hash,
    keyed_hash_reference,
    keyed_indices,
)
from raycompo.run import main as run_main
from raycompo.tasks import sampler
from tests.helpers import assert_client_states_close
from tests.test_vectorize import DRO_SYN, TOL, federation, run_rounds

M64 = (1 << 64) - 1
# 40 clients of 2..40 samples, 20 a round: a host's chunk of more than FOLD_MANY_PYTHON clients
# (the chunk's seeds folded by numpy) with clients smaller than the batch of 10
MANY = {"n_clients": 40, "min_samples": 2, "max_samples": 40, "clients_per_round": 20, "tau": 3}


def test_torch_hash_is_the_python_reference_bit_for_bit():
    rng = random.Random(0)
    seeds = [0, 1, 2**63 - 1, 2**63, 2**64 - 1] + [rng.getrandbits(64) for _ in range(60)]
    assert any(s >= 2**63 for s in seeds[5:])  # random seeds above int64's range too
    h = keyed_hash(torch.tensor([as_int64(s) for s in seeds], dtype=torch.int64), 97)
    for r, s in enumerate(seeds):
        for i in range(97):
            assert (int(h[r, i]) & M64) ^ (1 << 63) == keyed_hash_reference(
                s, i
            )  # top bit flipped back
    # a bijection of i for a fixed seed: no ties
    assert all(len(set(row.tolist())) == 97 for row in h)


def test_draws_are_uniform_without_replacement():
    """Over many seeds, each of n points is drawn with frequency b/n (within 5 binomial
    standard deviations), each position of the batch (the first too) is uniform, and a
    row's indices are distinct."""
    n, b, draws = 12, 4, 30000
    seeds = torch.from_numpy(
        np.random.default_rng(1).integers(-(2**63), 2**63 - 1, draws, dtype=np.int64)
    )
    idx = keyed_indices(seeds, [n] * draws, b)
    assert idx.shape == (draws, b)
    assert all(len(set(row)) == b for row in idx.tolist())
    counts = torch.bincount(idx.reshape(-1), minlength=n).double()
    p = b / n
    assert (counts - draws * p).abs().max() < 5 * math.sqrt(draws * p * (1 - p))
    for pos in range(b):  # each position uniform over the n points
        c = torch.bincount(idx[:, pos], minlength=n).double()
        assert (c - draws / n).abs().max() < 5 * math.sqrt(draws / n * (1 - 1 / n))
    # ordered pairs (first, second) uniform over the n (n - 1) distinct ones
    pairs = torch.bincount(idx[:, 0] * n + idx[:, 1], minlength=n * n).double().view(n, n)
    assert float(pairs.diagonal().sum()) == 0
    q = 1 / (n * (n - 1))
    off = pairs[~torch.eye(n, dtype=torch.bool)]
    assert (off - draws * q).abs().max() < 5 * math.sqrt(draws * q * (1 - q))


def test_never_out_of_range_and_whole_rows_in_order():
    rng = np.random.default_rng(2)
    for _ in range(30):
        r, b = int(rng.integers(1, 40)), int(rng.integers(1, 61))
        sizes = rng.integers(1, 51, r)
        seeds = torch.from_numpy(rng.integers(-(2**63), 2**63 - 1, r, dtype=np.int64))
        block = int(rng.integers(1, 200))  # rows in blocks of a few hashes too
        idx = keyed_indices(seeds, sizes, b, block_elements=block)
        assert torch.equal(idx, keyed_indices(seeds, sizes, b))  # blocks change nothing
        for row, n in zip(idx.tolist(), sizes.tolist()):
            if b >= n:
                assert row == list(range(n)) + [-1] * (b - n)
            else:
                assert len(set(row)) == b and all(0 <= i < n for i in row)
    with pytest.raises(ValueError, match="b >= 1"):
        keyed_indices(seeds, sizes, 0)


def test_per_row_draw_is_the_rows_draw_whatever_the_other_rows():
    """A row's indices depend on its seed and n only (not on the rows beside it, their
    number, or the block it falls in)."""
    rng = np.random.default_rng(3)
    seeds = torch.from_numpy(rng.integers(-(2**63), 2**63 - 1, 50, dtype=np.int64))
    sizes = rng.integers(20, 60, 50)
    whole = keyed_indices(seeds, sizes, 16)
    for r in (0, 17, 49):
        assert torch.equal(keyed_draw(int(seeds[r]) & M64, int(sizes[r]), 16), whole[r])
        assert torch.equal(keyed_indices(seeds[r:], sizes[r:], 16, block_elements=100)[0], whole[r])


def dense_keyed_indices(seeds: torch.Tensor, sizes, b: int) -> torch.Tensor:
    """`keyed_indices` as it was first written (issue 41): every row hashes the chunk's n_max
    points, masked past its own, and takes the topk of b; rows of n_r <= b all their
    points. The definition the blocked draw must give bit for bit."""
    n = torch.as_tensor(np.asarray(sizes, dtype=np.int64))
    width = max(int(n.max()), b)
    cols = torch.arange(width, dtype=torch.int64)
    h = keyed_hash(seeds, width).masked_fill_(cols >= n.unsqueeze(1), MASKED)
    out = torch.topk(h, b, dim=1, largest=False, sorted=True).indices
    whole = torch.where(cols[:b] < n.unsqueeze(1), cols[:b], -1)
    return torch.where((n <= b).unsqueeze(1), whole, out)


def random_chunk(rng: np.random.Generator, kind: int) -> tuple[torch.Tensor, np.ndarray, int]:
    """Seeds (any 64 bits), sizes and b of a chunk: the cohort bench's clients (lognormal,
    50-1,000) x steps, mixed tiny and large sizes (n_r = 1, b >= n_r), equal sizes, or
    sizes around b."""
    r, b = int(rng.integers(1, 80)), int(rng.integers(1, 70))
    if kind == 0:  # clients x steps: each client's size repeated per step
        sizes = np.repeat(
            np.minimum(50 + rng.lognormal(4, 2, r).astype(np.int64), 1000), int(rng.integers(1, 8))
        )
    elif kind == 1:
        sizes = rng.integers(1, 3, r) + (rng.random(r) < 0.4) * rng.integers(0, 2000, r)
    elif kind == 2:
        sizes = np.full(r, int(rng.integers(1, 300)))
    else:
        sizes = np.maximum(1, b + rng.integers(-3, 4, r))
    seeds = rng.integers(-(2**63), 2**63 - 1, len(sizes), dtype=np.int64, endpoint=True)
    return torch.from_numpy(seeds), sizes, b


@pytest.mark.parametrize("small_rows", [0, 10**9], ids=["torch", "numpy"])
def test_grouped_draws_equal_the_dense_definition_bit_for_bit(monkeypatch, small_rows):
    """On 400 random chunks (mixed sizes, n_r = 1, b >= n_r, equal sizes, many steps), the
    grouped draw (rows of n_r > b only, by size in GROUPS groups, in blocks) returns the
    dense definition's indices exactly, whatever the block size and however the sizes are
    given, drawn in torch (SMALL_ROWS 0) or in numpy (every chunk small)."""
    monkeypatch.setattr(keyed, "SMALL_ROWS", small_rows)
    rng = np.random.default_rng(41)
    kinds = set()
    for trial in range(400):
        seeds, sizes, b = random_chunk(rng, trial % 4)
        want = dense_keyed_indices(seeds, sizes, b)
        kinds |= {"small" if n <= b else "drawn" for n in sizes} | (
            {"one"} if 1 in sizes else set()
        )
        block = int(rng.choice([1, 37, 1000, 2**17]))
        assert torch.equal(keyed_indices(seeds, sizes, b, block_elements=block), want), (
            trial,
            b,
            sizes,
        )
        assert torch.equal(keyed_indices(seeds, torch.from_numpy(sizes), b), want)
        assert torch.equal(keyed_indices(seeds, sizes.tolist(), b), want)
    assert kinds == {"small", "drawn", "one"}
    # a round of the cohort bench: 100 clients x 20 steps, b = 32
    sizes = np.repeat(np.minimum(50 + rng.lognormal(4, 2, 100).astype(np.int64), 1000), 20)
    seeds = torch.from_numpy(rng.integers(-(2**63), 2**63 - 1, len(sizes), dtype=np.int64))
    assert torch.equal(keyed_indices(seeds, sizes, 32), dense_keyed_indices(seeds, sizes, 32))


def test_indices_are_the_python_references_smallest_hashes():
    """The definition itself, from the pure-Python hash: the b smallest h(seed, i), by
    increasing hash."""
    rng = random.Random(7)
    for _ in range(40):
        seed, n = rng.getrandbits(64), rng.randint(2, 120)
        b = rng.randint(1, n - 1)
        want = sorted(range(n), key=lambda i: keyed_hash_reference(seed, i))[:b]
        assert keyed_draw(seed, n, b).tolist() == want
        assert keyed_indices(torch.tensor([as_int64(seed)]), [n], b)[0].tolist() == want


def test_one_row_in_numpy_is_the_batched_row():
    """`keyed_draw` (numpy's uint64, the per-client path) equals `keyed_indices`' row (torch's
    int64) for any seed, n and b, b = 1 and b = n - 1 too, and b >= n as `keyed_indices`."""
    rng = random.Random(8)
    seeds = [0, 1, 2**63 - 1, 2**63, 2**64 - 1] + [rng.getrandbits(64) for _ in range(200)]
    for seed in seeds:
        n = rng.choice([1, 2, 3, 33, 60, 999, 1000, rng.randint(1, 3000)])
        for b in {1, max(1, n - 1), n, n + 5, rng.randint(1, n + 1)}:
            got = keyed_draw(seed, n, b)
            assert got.dtype == torch.int64
            assert torch.equal(got, keyed_indices(torch.tensor([as_int64(seed)]), [n], b)[0]), (
                seed,
                n,
                b,
            )


def test_groups_cover_the_rows_in_order_within_their_limits():
    """GROUPS groups of rows within a factor 2 of their width (but the last), in blocks
    within the limit (or one row); as many blocks whatever the sizes (an empty group: one
    empty block), so a round's torch operations do not depend on its clients' sizes."""
    rng = np.random.default_rng(9)
    for _ in range(300):
        b = int(rng.integers(1, 40))
        n = np.sort(b + rng.integers(1, 3000, int(rng.integers(1, 300))))
        limit = int(rng.choice([1, 50, 5000, 2**24]))
        spans = _groups(n, b, limit)
        assert spans[0][0] == 0 and spans[-1][1] == len(n)
        assert [lo for lo, _, _ in spans[1:]] == [hi for _, hi, _ in spans[:-1]]
        for lo, hi, width in spans:
            assert (hi == lo and width == b) or width == n[hi - 1]
            assert hi - lo <= 1 or (hi - lo) * width <= limit
            assert (
                hi == lo or n[lo] <= n[-1] / 2 ** (GROUPS - 1) or 2 * n[lo] > width
            )  # the last group, or within 2x
        if limit == 2**24:
            assert len(spans) == GROUPS


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_draws_equal_cpu_draws():
    rng = np.random.default_rng(4)
    seeds = torch.from_numpy(rng.integers(-(2**63), 2**63 - 1, 3000, dtype=np.int64))
    sizes = torch.from_numpy(rng.integers(1, 200, 3000))
    assert torch.equal(
        keyed_indices(seeds.cuda(), sizes.cuda(), 32).cpu(), keyed_indices(seeds, sizes, 32)
    )


def keyed_contexts(ids: list[int], round_: int = 3) -> list[ClientCtx]:
    """Contexts of the synthetic task's clients `ids` on copies of their data drawing with the
    keyed sampler (the partition is cached per process: its objects stay as they are)."""
    task = resolve(
        RunConfig(task="synthetic", algo="fedavg", settings=MANY, backend="inline")
    ).make_task()
    return [
        ClientCtx(cid, dataclasses.replace(d, sampler="keyed"), round=round_, seed=0)
        for cid, d in zip(ids, task.clients(ids))
    ]


def test_batched_draws_are_the_per_client_draws_whatever_the_chunk():
    r = resolve(RunConfig(task="synthetic", algo="fedavg", settings=MANY, backend="inline"))
    task = r.make_task()
    chunks = [
        list(range(0, 40, 2)),
        list(range(0, 20)),
        [4, 6, 9],
    ]  # numpy-folded chunks and a small one
    got: dict[int, list[torch.Tensor | None]] = {}
    for ids in chunks:
        ctxs = keyed_contexts(ids)
        cb = CohortBatch(ctxs, task, torch.device("cpu"))
        assert cb.sampler == "keyed"
        drawn, rows_of = cb.draw_steps(range(2, 5), 10, stream=1)
        assert drawn is not None and drawn.dtype == torch.int64 and drawn.shape[1:] == (3, 10)
        for i, c in enumerate(ctxs):
            for j, t in enumerate(range(2, 5)):
                gen = c.rng(t, 1)
                if rows_of[i] is None:
                    assert c.data.num_samples <= 10
                    continue
                per_client = c.data.indices(gen, 10)
                assert torch.equal(drawn[rows_of[i], j], per_client)
                x, y = c.data.batch(c.rng(t, 1), 10)  # the batch the per-client path reads
                assert torch.equal(x, c.data.x[per_client]) and torch.equal(y, c.data.y[per_client])
            row = None if rows_of[i] is None else drawn[rows_of[i]]
            if c.client_id in got:  # in another chunk: the same indices
                assert (row is None and got[c.client_id] is None) or torch.equal(
                    row, got[c.client_id]
                )
            got[c.client_id] = row
        # and the randperm sampler's draws are other ones
        plain = CohortBatch(
            [
                ClientCtx(
                    c.client_id, dataclasses.replace(c.data, sampler="randperm"), round=3, seed=0
                )
                for c in ctxs
            ],
            task,
            torch.device("cpu"),
        )
        other, _ = plain.draw_steps(range(2, 5), 10, stream=1)
        assert not torch.equal(other, drawn)
    assert sum(v is not None for v in got.values()) > 5


@pytest.mark.parametrize(
    "algo,settings",
    [
        ("fedavg", MANY),
        (
            "comfedl",
            {**MANY, "normalizer": "lse", "gamma": 0.5},
        ),  # f_i(w_s) on the first step's batch
        ("ditto", MANY),
        (
            "pdsgd",
            {**DRO_SYN, "n_clients": 40, "lr": 0.05, "dual_lr": 0.05},
        ),  # its own indices (ClientData.indices)
    ],
)
def test_keyed_per_client_equals_batched(algo, settings):
    ref = run_rounds(federation("synthetic", algo, settings, "off", sampler="keyed"), 3)
    vec = run_rounds(federation("synthetic", algo, settings, "on", sampler="keyed"), 3)
    assert ref.pool.host.batched == set() and vec.pool.host.batched
    torch.testing.assert_close(vec.w, ref.w, rtol=TOL, atol=TOL)
    assert_client_states_close(ref.pool.client_states(), vec.pool.client_states(), TOL)
    randperm = run_rounds(federation("synthetic", algo, settings, "off", sampler="randperm"), 3)
    assert (randperm.w - ref.w).abs().max() > 1e-4  # the option draws other batches


def test_keyed_samples_read_equal_per_client_and_batched():
    """The ledger (costs.csv's samples, the rows' samples column) counts the same points read
    with either path; ComFedL reads its first step's batch twice (counted once)."""
    kw = dict(
        rounds=2,
        settings={**MANY, "normalizer": "lse", "gamma": 0.5},
        sampler="keyed",
        backend="inline",
    )
    off = raycompo.run("synthetic", "comfedl", vectorize="off", **kw)
    on = raycompo.run("synthetic", "comfedl", vectorize="on", **kw)
    assert on.config["vectorized"]["phases"]
    assert (
        list(off.metrics["samples"]) == list(on.metrics["samples"])
        and off.metrics["samples"].iloc[-1] > 0
    )
    assert off.costs.equals(on.costs)


def test_sampler_setting_is_checked_recorded_and_given_on_the_command_line(tmp_path):
    with pytest.raises(ConfigError, match="unknown sampler 'hash'; choose one of: randperm, keyed"):
        resolve(RunConfig(sampler="hash", backend="inline"))
    with pytest.raises(ConfigError, match="sampler"):
        raycompo.run("synthetic", "fedavg", rounds=1, sampler="hash")
    out = tmp_path / "run"
    args = [
        "--backend",
        "inline",
        "--task",
        "synthetic",
        "--algo",
        "fedavg",
        "--rounds",
        "1",
        "--quiet",
        "--set",
        "n_clients=12",
        "clients_per_round=4",
        "--out",
    ]
    assert run_main([*args, str(out), "--sampler", "randperm"]) == 0
    assert json.loads((out / "config.json").read_text())["sampler"] == "randperm"
    assert run_main([*args, str(tmp_path / "plain")]) == 0
    assert (
        json.loads((tmp_path / "plain" / "config.json").read_text())["sampler"] == "keyed"
    )  # the default
    import pandas as pd

    randperm, plain = pd.read_csv(out / "metrics.csv"), pd.read_csv(tmp_path / "plain" / "metrics.csv")
    assert randperm["train_loss"].iloc[-1] != plain["train_loss"].iloc[-1]  # other batches
    # a resumed run draws as it did: another sampler is refused (it defines the rows)
    assert (
        run_main(["--resume", str(out), "--rounds", "2", "--quiet", "--sampler", "keyed"]) == 2
    )
    assert run_main(["--resume", str(out), "--rounds", "2", "--quiet"]) == 0  # its recorded randperm
    assert json.loads((out / "config.json").read_text())["sampler"] == "randperm"


def test_a_checkpoint_of_a_keyed_run_belongs_to_keyed_runs_only():
    from raycompo.engine.checkpoint import check_belongs, fingerprint

    cfg = RunConfig(task="synthetic", algo="fedavg", settings={"n_clients": 12}, backend="inline")
    plain, keyed = (
        fingerprint(resolve(dataclasses.replace(cfg, sampler="randperm"))),
        fingerprint(resolve(cfg)),
    )
    assert "sampler" not in plain  # randperm's fingerprint is as before (older checkpoints fit)
    assert keyed["sampler"] == "keyed"  # the default names itself
    check_belongs({"fingerprint": json.dumps(keyed)}, keyed, "ckpt.pt")
    with pytest.raises(ConfigError, match="sampler keyed there, randperm here"):
        check_belongs({"fingerprint": json.dumps(keyed)}, plain, "ckpt.pt")
    with pytest.raises(ConfigError, match="sampler randperm there, keyed here"):
        check_belongs({"fingerprint": json.dumps(plain)}, keyed, "ckpt.pt")


@pytest.mark.slow
def test_keyed_ray_hosts_equal_inline(ray_session):
    """With the keyed sampler, Ray hosts of 3 clients each (their own chunks, their own data
    slabs) give the inline backend's rows (1e-6), vectorized Ditto (stacked personal models)."""
    from raycompo.engine import run
    from tests.helpers import assert_rows_close

    settings = {
        "n_clients": 12,
        "min_samples": 2,
        "max_samples": 40,
        "clients_per_round": 7,
        "tau": 3,
    }
    cfg = RunConfig(
        task="synthetic",
        algo="ditto",
        rounds=3,
        settings=settings,
        backend="inline",
        vectorize="on",
        sampler="keyed",
    )
    inline = run(cfg)
    remote = run(dataclasses.replace(cfg, backend="ray", clients_per_actor=3, cpus_per_actor=0.5))
    assert_rows_close(inline.rows, remote.rows, tol=1e-6)


# --- 'keyed' is the default; what earlier releases wrote keeps 'randperm' ------------------------


def test_keyed_is_the_default_of_every_entry_point():
    import inspect

    from raycompo.api import run as api_run
    from raycompo.run import build_parser

    assert RunConfig().sampler == "keyed" == sampler.DEFAULT_SAMPLER
    assert inspect.signature(api_run).parameters["sampler"].default == "keyed"
    assert build_parser().parse_args([]).sampler == "keyed"


def test_a_run_folder_from_before_the_setting_resumes_with_randperm(tmp_path):
    """config.json written before `sampler` existed names none: its run drew with randperm,
    and goes on with it (RunConfig.from_record), to the rows of a randperm run straight through."""
    kw = dict(rounds=4, settings={**MANY, "n_clients": 12, "clients_per_round": 6}, backend="inline", sampler="randperm")
    straight = raycompo.run("synthetic", "fedavg", **kw)
    out = tmp_path / "old"
    raycompo.run("synthetic", "fedavg", **{**kw, "rounds": 2}, out=out, checkpoint_every=1)
    cfg = json.loads((out / "config.json").read_text())
    del cfg["sampler"]  # as a release before the setting wrote it
    (out / "config.json").write_text(json.dumps(cfg))
    resumed = raycompo.resume(out, rounds=4)
    assert resumed.status == "completed"
    assert resumed.metrics["train_loss"].tolist() == straight.metrics["train_loss"].tolist()


def test_a_sweep_from_before_the_default_changed_resumes_with_randperm():
    from raycompo.tune.sweep import recorded_sampler

    old = {"space": {"run": {}, "settings": {"tau": 2}}}
    assert recorded_sampler(old)["space"]["run"] == {"sampler": "randperm"}
    own = {"space": {"run": {}, "settings": {"sampler": "keyed"}}}
    assert recorded_sampler(own)["space"]["run"] == {}  # the space's own choice stays
    new = {"sampler": "keyed", "space": {"run": {}, "settings": {}}}
    assert recorded_sampler(new)["space"]["run"] == {}  # recorded since: the default as it was
