"""CIFAR10-ST / CIFAR100-ST loaders on small CIFAR-format files, and ResNet-20."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from raycompo.configuration.config import RunConfig, resolve
from raycompo.engine import run
from raycompo.errors import DataUnavailableError
from raycompo.models.resnet20 import ResNet20
from tests.fakedata import accept_fake_cifar, write_cifar


def make_task(name, root, **settings):
    r = resolve(RunConfig(task=name, algo="feddro", settings=settings, backend="inline", data_dir=str(root)))
    return r.make_task()


@pytest.mark.parametrize("num_classes,name,n_train,keep", [(10, "feddro-cifar10st", 200, 5), (100, "feddro-cifar100st", 400, 2)])
def test_step_imbalance_keeps_the_last_images_of_the_first_half(tmp_path, num_classes, name, n_train, keep):
    images, labels = write_cifar(tmp_path, num_classes, n_train=n_train, n_test=48)
    with accept_fake_cifar():
        task = make_task(name, tmp_path, n_clients=2, minority_keep=keep)
        clients = task.clients([0, 1])
    per_class = n_train // num_classes
    y = torch.cat([c.y for c in clients])
    counts = torch.bincount(y, minlength=num_classes)
    half = num_classes // 2
    expected = half * keep + half * per_class
    assert len(y) == expected - expected % 2 and clients[0].num_samples == clients[1].num_samples
    assert counts[:half].max() <= keep and counts[half:].min() >= per_class - 1
    # the minority images kept are the LAST `keep` of their class, in file order
    mean = torch.tensor(task.mean).view(3, 1, 1)
    std = torch.tensor(task.std).view(3, 1, 1)
    x = torch.cat([c.x for c in clients]) * std + mean
    last0 = images[np.flatnonzero(labels == 0)[-keep:]]
    want = torch.as_tensor(last0, dtype=torch.float32).permute(0, 3, 1, 2) / 255.0
    got = x[y == 0]
    for img in got:
        assert min(float((img - w).abs().max()) for w in want) < 1e-4
    # each client holds an equal shard of the (unchanged) test set
    assert clients[0].y_val.shape == clients[1].y_val.shape == (24,)


def test_missing_cifar_names_the_offline_task(tmp_path, monkeypatch):
    monkeypatch.setattr("torchvision.datasets.CIFAR10.download", lambda self: (_ for _ in ()).throw(RuntimeError("offline")))
    task = make_task("feddro-cifar10st", tmp_path)
    with pytest.raises(DataUnavailableError, match="feddro-digits-st"):
        task.clients([0])


def test_resnet20_is_a_function_of_its_parameters():
    m = ResNet20(10)
    assert sum(p.numel() for p in m.parameters()) == 269_722  # He et al.: 0.27M
    assert not list(m.buffers())  # batch statistics, nothing to average besides w
    assert m(torch.randn(3, 3, 32, 32)).shape == (3, 10)


def test_feddro_round_on_cifar10st_format(tmp_path):
    write_cifar(tmp_path, 10, n_train=100, n_test=20)
    cfg = RunConfig(task="feddro-cifar10st", algo="feddro", rounds=1, backend="inline", data_dir=str(tmp_path),
                    settings={"n_clients": 2, "minority_keep": 2, "batch_size": 4, "sync_every": 2, "lr": 0.05})
    with accept_fake_cifar():
        rows = run(cfg).rows
    assert {"train_acc", "val_acc", "objective"} <= set(rows[-1])
    assert "grad_norm" not in rows[-1]  # off by default on CIFAR (cost)
    assert rows[-1]["objective"] != rows[0]["objective"]
