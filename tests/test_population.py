"""A population (raycompo/engine/population.py, issue 42): P trials that differ in scalar
settings or seeds run side by side, their local steps as rows of one batched computation,
each trial's rows those of the trial run alone (1e-5), diverging trials included."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import raycompo
from raycompo.configuration.config import RunConfig
from raycompo.engine import runner
from raycompo.engine.population import batchable, client_groups, run_population
from raycompo.engine.rendezvous import Rendezvous, RendezvousTimeout
from raycompo.errors import ConfigError

SMALL = {"n_clients": 24, "clients_per_round": 8, "tau": 3}


def config(algo: str, seed: int = 0, **settings) -> RunConfig:
    return RunConfig(task="synthetic", algo=algo, rounds=3, seed=seed, backend="inline", vectorize="on",
                     eval_clients=6, settings={**SMALL, **settings})


def together(cfgs: list[RunConfig]):
    results, population = run_population([lambda seat, c=c: runner.run(c, hosts=seat) for c in cfgs])
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results, population


def assert_same_rows(alone, pop, rtol: float = 1e-5) -> None:
    assert alone.status == pop.status
    a, b = alone.metrics, pop.metrics
    assert list(a.columns) == list(b.columns) and len(a) == len(b)
    for col in a.columns:
        if "time" in col or a[col].dtype.kind not in "fiu":
            continue
        x, y = a[col].to_numpy(float), b[col].to_numpy(float)
        same = (abs(x - y) <= rtol * (abs(x) + 1e-3)) | ((x != x) & (y != y))
        assert same.all(), (col, x, y)


def test_fedavg_step_sizes_run_as_one_computation_with_each_trials_rows():
    cfgs = [config("fedavg", lr=lr) for lr in (0.02, 0.05, 0.1)]
    results, population = together(cfgs)
    assert population.together == 3  # every round's local steps: one computation of the three trials
    for cfg, pop in zip(cfgs, results):
        alone = runner.run(cfg)
        assert_same_rows(alone, pop)
        for cost in ("samples", "values_up", "bytes_up", "exchanges"):  # each trial's own costs, exactly
            assert alone.metrics[cost].tolist() == pop.metrics[cost].tolist()


def test_comfedl_gamma_and_step_size_per_row_and_a_diverging_trial_leaves_the_others_alone():
    cfgs = [config("comfedl", lr=0.002, gamma=1.0), config("comfedl", lr=5.0, gamma=0.5),
            config("comfedl", lr=0.005, gamma=2.0)]
    results, population = together(cfgs)
    assert population.together >= 1
    assert [r.status for r in results] == ["completed", "diverged", "completed"]
    for cfg, pop in zip(cfgs, results):
        assert_same_rows(runner.run(cfg), pop)


def test_seeds_as_one_population_through_the_api(tmp_path):
    kw = dict(rounds=3, settings={**SMALL, "lr": 0.05}, vectorize="on", eval_clients=6)
    seen: list[int] = []
    results = raycompo.run("synthetic", "fedavg", seeds=[0, 3], out=tmp_path, on_row=lambda row: seen.append(row["seed"]),
                           **kw)
    assert [r.config["seed"] for r in results] == [0, 3]
    assert [r.out for r in results] == [str(tmp_path / "seed-0"), str(tmp_path / "seed-3")]
    assert sorted(set(seen)) == [0, 3] and len(seen) == 8  # rounds 0-3 of each seed
    for s, pop in zip((0, 3), results):
        assert (tmp_path / f"seed-{s}" / "metrics.csv").is_file()
        assert_same_rows(raycompo.run("synthetic", "fedavg", seed=s, **kw), pop)


def test_an_algorithm_without_a_population_form_runs_its_trials_apart_in_lockstep():
    cfgs = [config("drfl", lr=lr) for lr in (0.02, 0.05)]
    results, population = together(cfgs)
    assert population.together == 0
    for cfg, pop in zip(cfgs, results):
        assert_same_rows(runner.run(cfg), pop, rtol=0.0)


@pytest.mark.parametrize("bad, message", [
    (dict(backend="ray"), "backend='inline'"),
    (dict(progress=True), "progress"),
])
def test_seeds_refuses_what_a_population_cannot_do(bad, message):
    with pytest.raises(ConfigError, match=message):
        raycompo.run("synthetic", "fedavg", rounds=1, seeds=[0, 1], **bad)


@pytest.mark.parametrize("seeds", [[], [1, 1], [-1], ["a"]])
def test_bad_seeds_are_named(seeds):
    with pytest.raises(ConfigError, match="seeds"):
        raycompo.run("synthetic", "fedavg", rounds=1, seeds=seeds)


def test_a_structural_difference_is_not_batched():
    from raycompo.configuration.config import resolve
    from raycompo.engine.pools import InlinePool
    from raycompo.engine.population import Request

    a = InlinePool(resolve(config("fedavg", lr=0.1)))
    b = InlinePool(resolve(config("fedavg", lr=0.2)))
    c = InlinePool(resolve(config("fedavg", tau=4)))
    req = Request("local", 0, {0: 1}, {"w": a.host.task.init_weights()}, True, True, 0, False)
    assert batchable(a.host, req, b.host, req)
    assert not batchable(a.host, req, c.host, req)  # tau: a structure, not a per-row setting
    assert not batchable(a.host, req, b.host, Request(**{**vars(req), "round_": 1}))
    assert client_groups([{0: 1, 2: 1}, {1: 1, 2: 1}], rows=4) == [[0, 1], [2]]


def test_rendezvous_answers_everyone_at_once_and_goes_on_without_who_left():
    seen: list[dict] = []
    rv = Rendezvous(3, lambda reqs: (seen.append(dict(reqs)), {m: r * 10 for m, r in reqs.items()})[1], timeout=10)
    out: dict[int, int] = {}

    def member(m: int, value: int) -> None:
        out[m] = rv.call(m, value)

    threads = [threading.Thread(target=member, args=(m, m + 1)) for m in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.1)
    assert not seen  # member 2 has not come yet
    rv.leave(2)
    for t in threads:
        t.join(5)
    assert out == {0: 10, 1: 20} and seen == [{0: 1, 1: 2}]


def test_rendezvous_answers_in_one_thread_of_its_own():
    """Every answer is computed in the rendezvous' thread, never a member's (one allocator
    arena for the batched work: docs/benchmarks.md, "A population's memory")."""
    where: list[str] = []
    rv = Rendezvous(2, lambda reqs: (where.append(threading.current_thread().name), dict(reqs))[1], timeout=10)

    def member(m: int) -> None:
        for step in range(3):
            assert rv.call(m, step) == step
        rv.leave(m)

    threads = [threading.Thread(target=member, args=(m,), name=f"member-{m}") for m in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert where == ["raycompo-rendezvous"] * 3
    rv.answerer.join(5)
    assert not rv.answerer.is_alive()  # it ends once every member has left


def test_rendezvous_never_waits_forever():
    rv = Rendezvous(2, lambda reqs: dict(reqs), timeout=0.2)
    with pytest.raises(RendezvousTimeout, match=r"members \[1\]"):
        rv.call(0, "x")


def test_the_population_benchmark_prints_both_timings_and_each_trials_difference(capsys):
    from raycompo.bench.population import main

    assert main(["--algos", "fedavg", "--rounds", "2", "--clients", "16", "--m", "8"]) == 0
    out = capsys.readouterr().out.splitlines()
    row = next(line for line in out if line.startswith("fedavg"))
    assert row.split()[1] == "8" and row.count(":") == 8  # 8 trials, each one's difference
    diffs = [float(part.split(":")[1]) for part in row.split()[7:]]  # after the timings and the statuses
    assert max(diffs[:4]) < 1e-5  # the stable step sizes: the trials' rows alone


def test_the_population_benchmark_runs_the_sinusoid_grid_as_one_population(capsys):
    """`bench population --sinusoid`: Local-SCGDM's 16 gamma x alpha trials on maml-sinusoid,
    alone and as one population (their MAML rows batched together, `auto` batching the
    MLP on the CPU): the same statuses and each trial's rows as alone to float rounding."""
    from raycompo.bench.population import main

    assert main(["--sinusoid", "--rounds", "2"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("alone"))
    assert "exchanges run together 2" in line and "same statuses True" in line
    assert float(line.rsplit(" ", 1)[1]) < 1e-5


def test_the_sweep_benchmark_compares_one_trial_at_a_time_with_populations(monkeypatch, capsys):
    """`--sweep`'s baseline is `population=1` (None would be 'auto', populations too), run in
    the order 1, P, P, 1 after a warm-up, and both sweeps' trials are compared row by row."""
    import pandas as pd

    from raycompo.bench.population import build_parser, measure_sweeps, sweep_space

    calls = []

    def fake_tune(space, search, population, out, quiet):
        calls.append(population)
        Path(out).mkdir(parents=True)
        loss = 1.0 if population == 1 else 1.0 + 1e-6
        pd.DataFrame({"trial_id": ["b", "a"], "status": ["completed"] * 2, "final_val_loss": [loss, 2.0]}).to_csv(
            Path(out) / "trials.csv", index=False)

    monkeypatch.setattr(raycompo, "tune", fake_tune)
    args = build_parser().parse_args(["--sweep", "--population", "4", "--rounds", "1"])
    measure_sweeps(args, sweep_space(args))
    assert calls == [1, 1, 4, 4, 1]  # an untimed warm-up sweep (Ray's start), then 1, P, P, 1
    line = capsys.readouterr().out.strip()
    assert "--population 1 " in line and "--population 4 " in line and "difference of a final loss 1.0e-06" in line


@pytest.mark.slow
def test_the_population_benchmark_runs_the_grid_as_two_sweeps(capsys, ray_session):
    from raycompo.bench.population import main

    assert main(["--algos", "fedavg", "--rounds", "1", "--clients", "12", "--m", "4", "--sweep", "--population", "4"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("sweep (grid, 8 trials)"))
    assert "--population 4" in line and "same statuses True" in line


def test_each_trial_draws_its_own_initial_model_while_the_others_build_theirs():
    """w_0 of a randomly initialised model comes from torch's process-wide generator, seeded:
    the trials build theirs in threads at once (`tasks.base.GLOBAL_RNG` makes them take turns)."""
    import torch

    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(400, 16, generator=g), torch.randint(0, 4, (400,), generator=g)
    task = raycompo.task_from_arrays(x, y, n_clients=6, name="mlp-init", model=lambda: torch.nn.Sequential(
        torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))

    def cfg(lr: float) -> RunConfig:
        return RunConfig(task=task, algo="fedavg", rounds=1, backend="inline", vectorize="on",
                         settings={"lr": lr, "tau": 1, "clients_per_round": 3})

    first = runner.run(cfg(0.01)).metrics.iloc[0]["train_loss"]
    for _ in range(3):
        results, _ = together([cfg(lr) for lr in (0.01, 0.02, 0.03, 0.04, 0.05, 0.06)])
        assert [r.metrics.iloc[0]["train_loss"] for r in results] == [first] * 6


def test_a_member_that_timed_out_is_not_answered_later():
    seen: list[dict] = []
    rv = Rendezvous(2, lambda reqs: (seen.append(dict(reqs)), dict(reqs))[1], timeout=0.2)
    with pytest.raises(RendezvousTimeout):
        rv.call(0, "stale")
    out: dict[int, str] = {}
    t = threading.Thread(target=lambda: out.update({1: rv.call(1, "fresh")}))
    t.start()
    time.sleep(0.05)
    rv.leave(0)
    t.join(5)
    assert seen == [{1: "fresh"}] and out == {1: "fresh"} and not rv.results
