"""The synthetic task: per-client data from (seed, client id), heterogeneity, population
scale, and short runs with the existing algorithms."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch

from raycompo.configuration.config import RunConfig, resolve
from raycompo.errors import ConfigError

SMALL = {"n_clients": 20, "max_samples": 200, "val_per_client": 20}


def make_task(seed: int = 0, **settings):
    return resolve(RunConfig(task="synthetic", algo="fedavg", seed=seed, backend="inline", settings={**SMALL, **settings})).make_task()


def same(a, b) -> bool:
    return all(torch.equal(getattr(a, f), getattr(b, f)) for f in ("x", "y", "x_val", "y_val")) and a.client_id == b.client_id


def test_deterministic_in_seed_and_client():
    a, b = make_task(seed=3), make_task(seed=3)
    for ca, cb in zip(a.clients([0, 5, 19]), b.clients([0, 5, 19])):
        assert same(ca, cb)
    other = make_task(seed=4).clients([5])[0]
    assert not same(a.clients([5])[0], other)
    assert not torch.equal(a.clients([4])[0].x[:5], a.clients([5])[0].x[:5])


def test_independent_of_request_set_and_population():
    task = make_task()
    alone = task.clients([7])[0]
    assert same(task.clients([3, 7, 11])[1], alone)
    assert same(task.clients([19, 7])[1], alone)
    assert same(task.partition()[7], alone)
    big = make_task(n_clients=10**6)
    assert same(big.clients([7])[0], alone)
    with pytest.raises(ValueError):
        task.clients([20])


def test_shapes_sizes_and_dtypes():
    task = make_task(max_samples=300, val_per_client=15)
    sizes = []
    for c in task.clients(list(range(20))):
        assert c.x.shape[1] == 60 and c.x.dtype == torch.float32 and c.y.dtype == torch.long
        assert c.x_val.shape == (15, 60) and c.y_val.shape == (15,)
        assert 50 <= c.num_samples <= 300
        assert int(c.y.min()) >= 0 and int(c.y.max()) < 10
        sizes.append(c.num_samples)
    assert len(set(sizes)) > 5  # power-law sizes, not equal


def _label_dist(c) -> np.ndarray:
    return torch.bincount(torch.cat([c.y, c.y_val]), minlength=10).double().numpy() / (len(c.y) + len(c.y_val))


def _mean_tv(task) -> float:
    d = [_label_dist(c) for c in task.clients(list(range(20)))]
    return float(np.mean([0.5 * np.abs(d[i] - d[j]).sum() for i in range(20) for j in range(i)]))


def test_heterogeneous_labels():
    # Synthetic(1, 1): clients' label distributions are far apart (total variation);
    # the IID variant: close.
    het, iid = _mean_tv(make_task()), _mean_tv(make_task(iid=True))
    assert het > 0.5, het
    assert iid < 0.25, iid
    # and the same client under both has different data
    assert not same(make_task().clients([1])[0], make_task(iid=True).clients([1])[0])


def test_million_clients_construct_fast():
    t = time.perf_counter()
    task = resolve(RunConfig(task="synthetic", algo="comfedl", backend="inline", settings={"n_clients": 10**6})).make_task()
    elapsed = time.perf_counter() - t
    assert task.n_clients == 10**6
    assert elapsed < 1.0, elapsed
    t = time.perf_counter()
    c = task.clients([999_999])[0]
    assert c.client_id == 999_999 and time.perf_counter() - t < 0.5


def test_settings_are_checked():
    with pytest.raises(ConfigError, match="max_samples"):
        make_task(min_samples=100, max_samples=50)
    with pytest.raises(ConfigError, match="alpha"):
        make_task(model_spread=-1.0)


@pytest.mark.parametrize("algo", ["fedavg", "comfedl", "ditto"])
def test_short_inline_runs(algo):
    from raycompo.engine import run

    cfg = RunConfig(task="synthetic", algo=algo, backend="inline", rounds=2, settings={**SMALL, "clients_per_round": 5, "tau": 5})
    rows = run(cfg).metrics.to_dict("records")
    assert len(rows) == 3
    for row in rows:
        for key in ("train_loss", "val_loss", "val_acc", "val_loss_worst"):
            assert math.isfinite(row[key]), (algo, key, row)
    assert rows[-1]["train_loss"] < rows[0]["train_loss"]


def test_local_scgdm_needs_a_meta_learning_task():
    from raycompo.engine import run

    with pytest.raises(ConfigError, match="meta-learning"):
        run(RunConfig(task="synthetic", algo="local-scgdm", backend="inline", rounds=1, settings=SMALL))
