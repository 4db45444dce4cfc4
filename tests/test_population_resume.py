"""A population's checkpoints, system and aggregation (issue 42): a killed population of seeds
resumes as a whole, each seed from its own checkpoint, with the rows of an uninterrupted
population and of each seed alone; a member never takes another's checkpoint; under a
simulated system (synchronous, FedBuff, FedAsync) each trial's sim_time and costs are its own
alone."""

from __future__ import annotations

import shutil

import pytest

import raycompo
from raycompo.configuration.config import RunConfig
from raycompo.engine import runner
from raycompo.engine.population import run_population
from raycompo.errors import ConfigError

SMALL = {"n_clients": 24, "clients_per_round": 8, "tau": 3, "lr": 0.05}
KW = dict(rounds=4, settings=SMALL, vectorize="on", eval_clients=6)
COSTS = ("samples", "oracle_calls", "values_up", "values_down", "bytes_up", "bytes_down", "exchanges")


def assert_same_rows(alone, other, rtol: float = 1e-6, skip: str = "time") -> None:
    """Every numeric column but the wall-clock ones (and those naming `skip`) equal (relative
    `rtol`), costs exactly."""
    a, b = alone.metrics, other.metrics
    assert list(a.columns) == list(b.columns) and list(a["round"]) == list(b["round"])
    for col in a.columns:
        if col in ("round_time", "wall_time", "trial_time") or skip in col or a[col].dtype.kind not in "fiu":
            continue
        x, y = a[col].to_numpy(float), b[col].to_numpy(float)
        if col in COSTS:
            assert (x == y).all(), (col, x, y)
        same = (abs(x - y) <= rtol * (abs(x) + 1e-3)) | ((x != x) & (y != y))
        assert same.all(), (col, x, y)


class Killed(RuntimeError):
    """Stands for a kill of the process after a round (its row written, not checkpointed)."""


def kill_at(round_: int):
    def on_row(row: dict) -> None:
        if row["round"] == round_:
            raise Killed(f"killed at round {round_}")
    return on_row


def test_a_killed_population_of_seeds_resumes_as_a_whole_with_the_rows_of_each_seed_alone(tmp_path):
    with pytest.raises(Killed):
        raycompo.run("synthetic", "fedavg", seeds=[0, 2], out=tmp_path / "p", checkpoint_every=2,
                     on_row=kill_at(3), **KW)
    for s in (0, 2):  # each seed's run stopped after round 3, its checkpoint at round 2
        assert raycompo.runfolder.results.read_config(tmp_path / "p" / f"seed-{s}")["status"] == "failed"
    with pytest.raises(ConfigError, match=r"raycompo.resume\("):  # run() again: told to resume
        raycompo.run("synthetic", "fedavg", seeds=[0, 2], out=tmp_path / "p", **KW)
    seen: list[tuple[int, int]] = []
    resumed = raycompo.resume(tmp_path / "p", on_row=lambda row: seen.append((row["seed"], row["round"])))
    assert sorted(seen) == [(0, 3), (0, 4), (2, 3), (2, 4)]  # each from its own checkpoint (round 2)
    assert [r.status for r in resumed] == ["completed"] * 2
    assert [r.out for r in resumed] == [str(tmp_path / "p" / f"seed-{s}") for s in (0, 2)]
    whole = raycompo.run("synthetic", "fedavg", seeds=[0, 2], out=tmp_path / "q", checkpoint_every=2, **KW)
    for s, r, w in zip((0, 2), resumed, whole):
        assert_same_rows(w, r)
        assert_same_rows(raycompo.run("synthetic", "fedavg", seed=s, **KW), r)
        assert r.costs.equals(w.costs)
    again = raycompo.resume(tmp_path / "p")  # completed: nothing runs, the same results
    assert [len(r.metrics) for r in again] == [5, 5]
    more = raycompo.resume(tmp_path / "p", rounds=5)  # more rounds: every seed goes on
    assert [int(r.metrics["round"].iloc[-1]) for r in more] == [5, 5]


def test_a_population_member_never_takes_another_members_checkpoint(tmp_path):
    with pytest.raises(Killed):
        raycompo.run("synthetic", "fedavg", seeds=[0, 1], out=tmp_path, checkpoint_every=2, on_row=kill_at(3), **KW)
    ckpt = {s: (tmp_path / f"seed-{s}" / "checkpoint.pt").read_bytes() for s in (0, 1)}
    shutil.copy(tmp_path / "seed-0" / "checkpoint.pt", tmp_path / "seed-1" / "checkpoint.pt")
    with pytest.raises(ConfigError, match=r"seed-1.*belongs to another run.*seed 0 there, 1 here"):
        raycompo.resume(tmp_path)
    assert (tmp_path / "seed-0" / "checkpoint.pt").read_bytes() == ckpt[0]  # nothing ran: seed 0 untouched
    assert raycompo.runfolder.results.read_config(tmp_path / "seed-0")["status"] == "failed"
    shutil.rmtree(tmp_path / "seed-1")
    shutil.copytree(tmp_path / "seed-0", tmp_path / "seed-1")  # seed 0's whole run in seed 1's folder
    with pytest.raises(ConfigError, match="holds the run of seed 0, not of seed 1"):
        raycompo.resume(tmp_path)


def test_a_finished_population_whose_seed_folders_were_swapped_is_refused(tmp_path):
    """A finished seed's result is returned only from its own folder (not seed 1's run as seed 0's)."""
    raycompo.run("synthetic", "fedavg", seeds=[0, 1], out=tmp_path, **KW)
    (tmp_path / "seed-0").rename(tmp_path / "swap")
    (tmp_path / "seed-1").rename(tmp_path / "seed-0")
    (tmp_path / "swap").rename(tmp_path / "seed-1")
    with pytest.raises(ConfigError, match="holds the run of seed 1, not of seed 0"):
        raycompo.resume(tmp_path)


def test_overwrite_replaces_the_whole_population_and_resume_refuses_mixed_configurations(tmp_path):
    """overwrite=True with fewer seeds left the old seed-2 beside the new ones, and resume then
    ran it with them as one population (a seed of another lr)."""
    small = dict(KW, rounds=2)
    raycompo.run("synthetic", "fedavg", seeds=[0, 1, 2], out=tmp_path, **small)
    raycompo.run("synthetic", "fedavg", seeds=[0, 1], out=tmp_path, overwrite=True,
                 **dict(small, settings={**SMALL, "lr": 0.1}))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seed-0", "seed-1"]
    assert [r.config["settings"]["lr"] for r in raycompo.resume(tmp_path)] == [0.1, 0.1]

    shutil.copytree(tmp_path / "seed-1", tmp_path / "seed-5")  # a seed of another configuration, put there by hand
    moved = tmp_path / "seed-5" / "config.json"
    moved.write_text(moved.read_text().replace('"seed": 1', '"seed": 5').replace('"lr": 0.1', '"lr": 0.2'))
    with pytest.raises(ConfigError, match=r"seed-5 is not a seed of the configuration of .*seed-0 \(they differ"):
        raycompo.resume(tmp_path, rounds=3)


def test_seeds_refuse_a_single_runs_folder_and_a_seed_beside_them(tmp_path):
    raycompo.run("synthetic", "fedavg", out=tmp_path / "one", **dict(KW, rounds=1))
    before = sorted(p.name for p in (tmp_path / "one").iterdir())
    with pytest.raises(ConfigError, match="holds a single run .*choose another out"):
        raycompo.run("synthetic", "fedavg", seeds=[0, 1], out=tmp_path / "one", **dict(KW, rounds=1))
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == before
    with pytest.raises(ConfigError, match=r"seed=3 and seeds= both given"):
        raycompo.run("synthetic", "fedavg", seed=3, seeds=[0, 1], **dict(KW, rounds=1))


def test_seeds_may_be_a_numpy_array_and_come_back_as_ints():
    import numpy as np

    results = raycompo.run("synthetic", "fedavg", seeds=np.arange(2), **dict(KW, rounds=1))
    assert [r.config["seed"] for r in results] == [0, 1] and all(type(r.config["seed"]) is int for r in results)


def config(aggregation: str, seed: int = 0, **settings) -> RunConfig:
    return RunConfig(task="synthetic", algo="fedavg", rounds=4, seed=seed, backend="inline", vectorize="on",
                     eval_clients=6, settings={**SMALL, **settings}, system="mobile", aggregation=aggregation)


@pytest.mark.parametrize("aggregation", ["sync", "buffered", "async"])
def test_under_a_system_each_trial_has_its_sim_time_and_costs_alone(aggregation):
    """Synchronous rounds and FedBuff / FedAsync server steps: two step sizes and another seed
    as one population, each trial's rows (sim_time, dropped, wasted_s, costs) its own alone.
    FedAsync's accuracies are left out: there one client's step moves the model at a time and
    its logits stay near ties, whose argmax float rounding decides (the run alone with
    vectorize 'off' differs from 'on' there too, by a few samples; the losses
    agree to 1e-8)."""
    cfgs = [config(aggregation, lr=0.02), config(aggregation, lr=0.05), config(aggregation, seed=1)]
    results, population = run_population([lambda seat, c=c: runner.run(c, hosts=seat) for c in cfgs], timeout=120)
    assert population.together >= 1  # some exchanges ran as one computation of several trials
    for cfg, pop in zip(cfgs, results):
        assert not isinstance(pop, BaseException), pop
        alone = runner.run(cfg)
        assert alone.metrics["sim_time"].iloc[-1] > 0
        assert_same_rows(alone, pop, skip="_acc" if aggregation == "async" else "time")
        assert alone.costs.equals(pop.costs)


KILLED = """
import os, signal, sys
import raycompo

def on_row(row):
    if row["seed"] == 0 and row["round"] == 3:
        os.kill(os.getpid(), signal.SIGKILL)  # no clean-up of any kind

raycompo.run("synthetic", "fedavg", seeds=[0, 1], out=sys.argv[1], checkpoint_every=2, on_row=on_row, rounds=4,
             settings={"n_clients": 24, "clients_per_round": 8, "tau": 3, "lr": 0.05}, vectorize="on", eval_clients=6)
"""


@pytest.mark.slow
def test_a_population_killed_by_sigkill_resumes_every_seed(tmp_path):
    """A real kill (SIGKILL of the process mid-round: the folders' locks left behind, a seed's
    rows past its checkpoint): `resume` goes on with every seed from its checkpoint."""
    import signal
    import subprocess
    import sys

    out = tmp_path / "p"
    proc = subprocess.run([sys.executable, "-c", KILLED, str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    resumed = raycompo.resume(out)
    assert [r.status for r in resumed] == ["completed"] * 2
    for s, r in zip((0, 1), resumed):
        assert list(r.metrics["round"]) == [0, 1, 2, 3, 4]
        assert_same_rows(raycompo.run("synthetic", "fedavg", seed=s, **KW), r)
