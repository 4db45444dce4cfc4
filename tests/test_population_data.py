"""A population's trials hold one copy of the task's data (issue 42): the trials of one seed
read the same tensors (the process-wide partition, one host cache and its slab), each with a
model, algorithm and counters of its own; trials of another seed read their own data."""

from __future__ import annotations

import torch

import raycompo
from raycompo.configuration.config import RunConfig, resolve
from raycompo.engine import client_data, runner
from raycompo.engine.population import Population, run_population
from raycompo.tasks.base import settings_key

SMALL = {"n_clients": 12, "clients_per_round": 4, "tau": 2}


def config(seed: int = 0, lr: float = 0.05) -> RunConfig:
    return RunConfig(
        task="synthetic",
        algo="fedavg",
        rounds=2,
        seed=seed,
        backend="inline",
        vectorize="on",
        eval_clients=4,
        settings={**SMALL, "lr": lr},
    )


def seated(cfgs: list[RunConfig], monkeypatch) -> tuple[list, set[int]]:
    """The hosts of `cfgs` seated in one population, and the ids of the data caches that
    materialized a client themselves."""
    fetched: set[int] = set()
    fetch = client_data.ClientDataCache._fetch

    def spy(self, ids, evict=True):
        fetched.add(id(self))
        return fetch(self, ids, evict)

    monkeypatch.setattr(client_data.ClientDataCache, "_fetch", spy)
    population = Population(len(cfgs))
    hosts = [population.seat(p).inline_pool(resolve(c)).inner.host for p, c in enumerate(cfgs)]
    return hosts, fetched


def test_trials_of_one_seed_read_the_same_tensors_with_models_of_their_own(monkeypatch):
    hosts, fetched = seated([config(lr=lr) for lr in (0.01, 0.02, 0.05)], monkeypatch)
    assert len(fetched) == 1  # one cache built data; the later trials never materialized a client
    datas = [[h.clients.get(cid) for cid in range(4)] for h in hosts]
    for mine in datas[1:]:
        assert [d.x.data_ptr() for d in mine] == [d.x.data_ptr() for d in datas[0]]
        assert [d.x_val.data_ptr() for d in mine] == [d.x_val.data_ptr() for d in datas[0]]
        assert all(a is not b for a, b in zip(mine, datas[0]))  # each trial's counters its own
    assert (
        len({id(h.task.model) for h in hosts}) == 3 and len({id(h.algorithm) for h in hosts}) == 3
    )


def test_trials_of_another_seed_read_data_of_their_own(monkeypatch):
    hosts, fetched = seated([config(seed=0), config(seed=1), config(seed=0)], monkeypatch)
    assert len(fetched) == 2
    x0, x1, x2 = (h.clients.get(0).x for h in hosts)
    assert x0.data_ptr() == x2.data_ptr() != x1.data_ptr()
    assert not torch.equal(x0, x1)


def test_a_partition_is_built_once_and_never_written():
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(240, 8, generator=g), torch.randint(0, 3, (240,), generator=g)
    task = raycompo.task_from_arrays(x, y, n_clients=6, name="shared-partition")
    cfgs = [
        RunConfig(
            task=task,
            algo="fedavg",
            rounds=2,
            backend="inline",
            vectorize="on",
            settings={"lr": lr, "tau": 2, "clients_per_round": 3},
        )
        for lr in (0.05, 0.1)
    ]
    r = resolve(cfgs[0])
    first, second = r.make_task().clients([0, 1]), resolve(cfgs[1]).make_task().clients([0, 1])
    assert all(a is b for a, b in zip(first, second))  # one partition for both trials' task objects
    before = [
        (c.x.clone(), c.y.clone(), c.x_val.clone()) for c in r.make_task().clients(list(range(6)))
    ]
    results, _ = run_population([lambda seat, c=c: runner.run(c, hosts=seat) for c in cfgs])
    assert [r.status for r in results] == ["completed", "completed"]
    after = r.make_task().clients(list(range(6)))
    assert all(
        torch.equal(a, c.x) and torch.equal(b, c.y) and torch.equal(v, c.x_val)
        for (a, b, v), c in zip(before, after)
    )


def test_the_data_key_tells_types_apart():
    from dataclasses import dataclass

    @dataclass
    class S:
        a: object = 1

    assert settings_key(S(1)) != settings_key(S(1.0)) != settings_key(S(True))
    assert settings_key(S(1)) == settings_key(S(1))
