"""DRO tasks' validation sets: `val_split` (client-proportions default, disjoint-balanced)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from raycompo.configuration.config import RunConfig, resolve
from raycompo.data.partition import balanced_counts
from raycompo.errors import ConfigError
from tests.helpers import SMALL_DRO


def clients(**settings):
    task = resolve(RunConfig(task="dro-mnist5k", algo="fedavg", settings={**SMALL_DRO, **settings}, backend="inline")).make_task()
    return task.partition()


def rows(x):
    return {bytes(r.numpy().tobytes()) for r in x.reshape(len(x), -1)}


def test_disjoint_balanced_sets_are_disjoint_and_globally_balanced():
    cs = clients(val_split="disjoint-balanced", val_per_client=50)
    train = set().union(*(rows(c.x) for c in cs))
    seen: set = set()
    for c in cs:
        v = rows(c.x_val)
        assert len(v) == len(c.y_val) == 50  # no image twice within a client
        assert not v & seen  # ... nor across clients
        assert not v & train  # ... nor one anyone trains on
        seen |= v
    # the same class counts for every client, in the global proportions (the held-out pool's)
    task = resolve(RunConfig(task="dro-mnist5k", algo="fedavg", settings=SMALL_DRO, backend="inline")).make_task()
    global_freq = torch.bincount(task.load()[1][1], minlength=10).double().numpy()
    want = balanced_counts(global_freq, 50)
    for c in cs:
        np.testing.assert_array_equal(torch.bincount(c.y_val, minlength=10).numpy(), want)
    assert abs(want / 50 - global_freq / global_freq.sum()).max() <= 1 / 50


def test_default_follows_each_clients_own_proportions():
    cs = clients()
    small = [c for c in cs if len(c.y) == SMALL_DRO["small_client_size"]]
    for c in small:  # classes absent from a client's training data are absent from its validation
        absent = torch.bincount(c.y, minlength=10) == 0
        assert (torch.bincount(c.y_val, minlength=10)[absent] == 0).all()


def test_default_partition_is_unchanged_by_the_option():
    a, b = clients(), clients(val_split="disjoint-balanced")
    for ca, cb in zip(a, b):
        assert torch.equal(ca.x, cb.x) and torch.equal(ca.y, cb.y)  # same training data


def test_too_many_disjoint_images_is_refused_with_the_limit():
    with pytest.raises(ConfigError, match=r"at most \d+") as err:
        clients(val_split="disjoint-balanced", val_per_client=2000)
    limit = int(str(err.value).rsplit(" ", 1)[1])
    assert len(clients(val_split="disjoint-balanced", val_per_client=limit)[0].y_val) == limit
    with pytest.raises(ConfigError, match="val_split"):
        clients(val_split="stratified")


def test_balanced_counts_sum_and_rounding():
    c = balanced_counts(np.array([3.0, 1.0, 1.0]), 7)
    assert c.sum() == 7 and list(c) == [4, 2, 1]  # 4.2, 1.4, 1.4: the spare one to the first tie
