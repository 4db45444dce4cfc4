"""The rho-dominant heterogeneous tasks (damaml-cifar10 on CIFAR-format files the test
writes, damaml-mnist5k offline) and the checks on bad settings."""

import numpy as np
import pytest
import torch

from raycompo.configuration.config import RunConfig, resolve
from raycompo.data.dominant import dominant_counts, dominant_partition
from raycompo.engine import run
from raycompo.errors import ConfigError
from tests.damaml_common import TINY, tiny_config
from tests.fakedata import accept_fake_cifar, write_cifar


@pytest.mark.parametrize(
    "n,rho", [(20, 0.28), (300, 0.28), (7, 0.5), (10, 0.0), (10, 1.0), (33, 0.9)]
)
def test_dominant_counts_sum_and_use_every_class_equally(n, rho):
    counts = np.stack([dominant_counts(n, rho, 10, i) for i in range(10)])
    assert (counts.sum(1) == n).all()
    assert (counts.sum(0) == n).all()  # so 10 x n images need exactly n per class
    assert abs(counts[3, 3] - rho * n) < 1.0  # the dominant class gets rho * n, rounded
    assert (counts >= 0).all()


def test_dominant_partition_is_disjoint_and_rejects_small_pools():
    labels = np.repeat(np.arange(10), 30)
    parts = dominant_partition(labels, 30, 0.28, 10, np.random.default_rng(0))
    allidx = np.concatenate(parts)
    assert len(np.unique(allidx)) == len(allidx) == 300
    assert abs(np.bincount(labels[parts[4]], minlength=10)[4] - 0.28 * 30) < 1.0
    with pytest.raises(ValueError, match="class"):
        dominant_partition(labels, 31, 0.28, 10, np.random.default_rng(0))


def test_cifar10_task_from_cifar_files(tmp_path):
    write_cifar(tmp_path, 10, n_train=400, n_test=200)  # 40 / 20 images per class
    settings = {
        "train_per_client": 40,
        "val_per_client": 20,
        "rho": 0.5,
        "hidden": 4,
        "batch_size": 8,
        "tau": 1,
    }
    cfg = RunConfig(
        task="damaml-cifar10",
        algo="comfedl-damaml",
        rounds=1,
        settings=settings,
        backend="inline",
        data_dir=str(tmp_path),
    )
    with accept_fake_cifar():
        task = resolve(cfg).make_task()
        clients = task.clients(list(range(10)))
        result = run(cfg)
    seen = set()
    for c in clients:
        assert c.x.shape == (40, 3, 32, 32) and c.x_val.shape == (20, 3, 32, 32)
        assert int((c.y == c.client_id).sum()) == 20 and int((c.y_val == c.client_id).sum()) == 10
        rows = {tuple(r.tolist()) for r in c.x.flatten(1)[:, :16]}
        assert not rows & seen  # no image is shared by two clients
        seen |= rows
    assert result.status == "completed"
    assert {"val_acc", "val_acc_worst", "val_loss", "val_loss_worst"} <= set(result.final)
    assert result.final["val_acc_worst"] <= result.final["val_acc"]


def test_mnist5k_dominant_fractions():
    cfg = tiny_config("comfedl-maml", rho=0.6)
    task = resolve(cfg).make_task()
    for c in task.clients(list(range(10))):
        assert len(c.y) == TINY["train_per_client"] and len(c.y_val) == TINY["val_per_client"]
        assert float((c.y == c.client_id).double().mean()) == pytest.approx(0.6)
        assert float((c.y_val == c.client_id).double().mean()) == pytest.approx(0.6)
        assert c.x.shape[1:] == (1, 28, 28)
    # the validation images are not training images of any client
    train = torch.cat([c.x.flatten(1) for c in task.clients(list(range(10)))])
    val = task.clients([0])[0].x_val.flatten(1)
    assert not any(bool((train == v).all(1).any()) for v in val)


@pytest.mark.parametrize(
    "algo,settings,message",
    [
        ("comfedl-damaml", {"rho": 1.5}, "rho must be in"),
        ("fedavg", {"rho": -0.1}, "rho must be in"),
        ("comfedl-damaml", {"gamma": 0.0}, "gamma must be > 0"),
        ("comfedl-damaml", {"gamma": -2}, "gamma must be > 0"),
        ("tr-maml", {"weight_lr": 0}, "weight_lr must be > 0"),
        ("ditto", {"lam": -1}, "lam must be >= 0"),
        ("fedmaml", {"inner_lr": 0}, "inner_lr must be > 0"),
        ("comfedl-maml", {"gamma": 0.5}, "unknown setting"),  # ComFedL-MAML has no gamma
    ],
)
def test_bad_settings_are_config_errors(algo, settings, message):
    with pytest.raises(ConfigError, match=message):
        resolve(tiny_config(algo, **settings))


def test_mnist5k_too_many_images_is_clear():
    with pytest.raises(ValueError, match="exceeds the 500 images"):
        resolve(
            tiny_config("fedavg", train_per_client=450, val_per_client=100)
        ).make_task().clients([0])
