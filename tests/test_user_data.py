"""Tasks from a user's own data: the partitioners, task_from_arrays / task_from_clients,
their input checks, settings, recording, pickling, and a short inline FedAvg run."""

from __future__ import annotations

import gc
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from raycompo.data.dominant import dominant_partition, dominant_split
from raycompo.data.partitioners import (
    PARTITIONERS,
    partition_indices,
    partitioner_params,
)
from raycompo.data.step_imbalance import step_imbalance_indices
from raycompo.errors import ConfigError
from raycompo.seeding import numpy_rng
from raycompo.settings import build, field_docs, names
from raycompo.tasks.base import _cached_partition
from raycompo.tasks.from_data import task_from_arrays, task_from_clients
from raycompo.tasks.user_data import ArraysSettings, ClientsSettings


@pytest.fixture(autouse=True, scope="module")
def _forget_classes():
    """The classes made here must not outlive this module (the registry sees live ones)."""
    yield
    _cached_partition.cache_clear()
    gc.collect()


def balanced_labels(per_class: int = 60, classes: int = 10) -> np.ndarray:
    return np.random.default_rng(1).permutation(np.repeat(np.arange(classes), per_class))


def blobs(n: int = 400, classes: int = 4, dim: int = 6, seed: int = 0):
    """Separable Gaussian blobs: features (n, dim) float64, labels (n,) int64."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    centers = rng.normal(scale=3.0, size=(classes, dim))
    return centers[y] + rng.normal(size=(n, dim)), y


def parts_of(task_cls, seed: int = 0, **settings):
    task = task_cls(build(task_cls.Settings, settings), seed)
    return task.split_indices()


# --- partitioners ---------------------------------------------------------------------------

PARAMS = {
    "iid": {},
    "dirichlet": {"dirichlet_alpha": 0.5, "dirichlet_min_size": 5},
    "shards": {"shards_per_client": 2},
    "dominant": {"rho": 0.6},
    "step": {"step_keep": 10},
}


@pytest.mark.parametrize("name", list(PARTITIONERS))
def test_partitioner_is_disjoint_seeded_and_covers_its_samples(name):
    y = balanced_labels()
    parts = partition_indices(name, y, 7, numpy_rng(0, 3), num_classes=10, **PARAMS[name])
    assert len(parts) == 7 and all(len(p) > 0 for p in parts)
    every = np.concatenate(parts)
    assert len(np.unique(every)) == len(every)  # disjoint
    if name in ("iid", "dirichlet", "shards"):  # every sample is used
        assert sorted(every) == list(range(len(y)))
    if name == "step":  # the kept samples, bar the remainder of an equal split
        kept = step_imbalance_indices(torch.as_tensor(y), 10, 10)
        assert set(every) <= set(kept) and len(every) == len(kept) // 7 * 7
    again = partition_indices(name, y, 7, numpy_rng(0, 3), num_classes=10, **PARAMS[name])
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    other = partition_indices(name, y, 7, numpy_rng(1, 3), num_classes=10, **PARAMS[name])
    assert any(not np.array_equal(a, b) for a, b in zip(parts, other))


def mean_label_entropy(y: np.ndarray, parts: list[np.ndarray]) -> float:
    out = []
    for p in parts:
        freq = np.bincount(y[p], minlength=10) / len(p)
        out.append(-sum(f * math.log(f) for f in freq if f > 0))
    return float(np.mean(out))


def test_dirichlet_small_alpha_skews_labels_more():
    y = balanced_labels(100)
    h = {
        a: np.mean([
            mean_label_entropy(y, partition_indices("dirichlet", y, 10, numpy_rng(s), dirichlet_alpha=a))
            for s in range(3)
        ])
        for a in (0.05, 1.0, 100.0)
    }
    assert h[0.05] < h[1.0] < h[100.0]
    assert h[100.0] > 0.9 * math.log(10)  # near iid
    assert h[0.05] < 0.5 * math.log(10)  # few classes per client


def test_dirichlet_min_size_holds_and_an_impossible_one_is_refused():
    y = balanced_labels()
    parts = partition_indices("dirichlet", y, 10, numpy_rng(0), dirichlet_alpha=0.1, dirichlet_min_size=20)
    assert min(len(p) for p in parts) >= 20
    with pytest.raises(ConfigError, match="too few samples"):
        partition_indices("dirichlet", y, 10, numpy_rng(0), dirichlet_min_size=61)


def test_shards_give_each_client_at_most_two_labels_per_shard():
    y = balanced_labels(60)  # 600 samples, 40 shards of 15: within a class or across two
    for spc in (1, 2, 4):
        parts = partition_indices("shards", y, 10, numpy_rng(spc), shards_per_client=spc)
        assert all(len(np.unique(y[p])) <= 2 * spc for p in parts)
        assert sorted(len(p) for p in parts) == [60] * 10
    parts = partition_indices("shards", y, 10, numpy_rng(0), shards_per_client=1)
    assert max(len(np.unique(y[p])) for p in parts) <= 2 and min(len(np.unique(y[p])) for p in parts) == 1


@pytest.mark.parametrize("n_clients", [10, 25])
def test_dominant_gives_client_i_a_fraction_rho_of_class_i(n_clients):
    y = balanced_labels(100)
    parts = partition_indices("dominant", y, n_clients, numpy_rng(0), rho=0.7, dominant_size=30, num_classes=10)
    for i, p in enumerate(parts):
        assert len(p) == 30
        assert abs(np.mean(y[p] == i % 10) - 0.7) <= 1 / 30 + 1e-9
    auto = partition_indices("dominant", y, n_clients, numpy_rng(0), rho=0.7, num_classes=10)
    assert len(auto[0]) >= 30 and len({len(p) for p in auto}) == 1  # the largest feasible size


def test_dominant_split_for_c_clients_is_the_journals_partition():
    y = balanced_labels(100)
    a = dominant_partition(y, 40, 0.28, 10, np.random.default_rng(5))
    b = dominant_split(y, 10, 40, 0.28, 10, np.random.default_rng(5))
    assert all(np.array_equal(p, q) for p, q in zip(a, b))


def test_step_keeps_step_keep_samples_of_each_minority_class():
    y = balanced_labels(60)
    parts = partition_indices("step", y, 3, numpy_rng(0), step_keep=12, num_classes=10)
    counts = np.bincount(y[np.concatenate(parts)], minlength=10)
    kept = np.bincount(y[step_imbalance_indices(torch.as_tensor(y), 10, 12)], minlength=10)
    assert list(kept) == [12] * 5 + [60] * 5
    assert (counts <= kept).all() and kept.sum() - counts.sum() < 3  # only the remainder is left
    parts = partition_indices("step", y, 2, numpy_rng(0), step_keep=12, step_minority=3, num_classes=10)
    assert np.bincount(y[np.concatenate(parts)], minlength=10)[3] == 60


def test_unknown_partitioner_and_parameter_are_named(monkeypatch):
    with pytest.raises(ConfigError, match="unknown partitioner 'nope'; choose one of: iid, dirichlet, shards"):
        partition_indices("nope", balanced_labels(), 3, numpy_rng(0))
    with pytest.raises(ConfigError, match="no parameter.*shards_per_client.*dirichlet_alpha"):
        partition_indices("dirichlet", balanced_labels(), 3, numpy_rng(0), shards_per_client=2)
    monkeypatch.setitem(PARTITIONERS, "lopsided", lambda labels, n, rng: [np.arange(5)] + [np.arange(0)] * (n - 1))
    with pytest.raises(ConfigError, match="left client 1 with no samples"):
        partition_indices("lopsided", balanced_labels(), 3, numpy_rng(0))


def test_partitioner_parameters_are_settings_with_the_same_defaults():
    defaults = ArraysSettings()
    for name in PARTITIONERS:
        for key, value in partitioner_params(name).items():
            assert getattr(defaults, key) == value, (name, key)


# --- settings -----------------------------------------------------------------------------

def test_settings_keys_collide_with_no_algorithm_key_and_all_have_docs():
    from raycompo.configuration.plugins import list_algorithms

    algo_keys = {k for cls in list_algorithms().values() for k in names(cls.Settings)}
    x, y = blobs()
    for cls in (ArraysSettings, ClientsSettings, task_from_arrays(x, y, n_clients=4).Settings):
        assert not set(names(cls)) & algo_keys, set(names(cls)) & algo_keys
        assert set(field_docs(cls)) == set(names(cls))


def test_settings_default_to_the_call_and_are_overridden_like_any_setting():
    x, y = blobs()
    T = task_from_arrays(x, y, n_clients=5, partition="dirichlet", dirichlet_alpha=0.3, val_fraction=0.25)
    s = T.Settings()
    assert (s.n_clients, s.partition, s.dirichlet_alpha, s.val_fraction) == (5, "dirichlet", 0.3, 0.25)
    s = build(T.Settings, {"dirichlet_alpha": "0.1", "n_clients": 8})  # as --set passes them
    s.validate()
    assert (s.dirichlet_alpha, s.n_clients) == (0.1, 8)
    assert len(T(s, 0).partition()) == 8
    for bad, what in (({"dirichlet_alpha": 0}, "dirichlet_alpha"), ({"partition": "x"}, "unknown partitioner"),
                      ({"val_fraction": 1.0}, "val_fraction"), ({"rho": 2.0}, "rho")):
        with pytest.raises(ConfigError, match=what):
            build(T.Settings, bad).validate()


# --- task_from_arrays / task_from_clients: checks ---------------------------------------------

X, Y = blobs(60)

BAD_ARRAYS = [
    (dict(x=X, y=Y[:-1]), "the data \\(x, y\\) holds 60 samples of features but 59 labels"),
    (dict(x=X, y=Y.astype(float)), "integer class labels"),
    (dict(x=X, y=np.where(Y == 0, -1, Y)), "y: a label is negative"),
    (dict(x=X, y=Y, num_classes=3), "y: the largest label is 3, but num_classes is 3"),
    (dict(x=np.where(np.arange(60)[:, None] == 7, np.nan, X), y=Y), "x: 1 sample.s. hold NaN or infinite values .e.g. row 7"),
    (dict(x=X, y=Y, n_clients=61), "too few samples: 60 samples for 61 clients"),
    (dict(x=X, y=Y, model="resnet"), "unknown model 'resnet'; choose one of: logistic, mlp"),
    (dict(x=X, y=Y, model=torch.nn.Linear(6, 4)), "not a module instance"),
    (dict(x=X, y=Y, model=lambda: torch.nn.Linear(6, 3)), r"logits of shape \(batch, num_classes\)"),
    (dict(x=X, y=Y, partition="zipf"), "unknown partitioner 'zipf'"),
    (dict(x=X, y=Y, partition="iid", dirichlet_alpha=0.1), "has no parameter.*dirichlet_alpha"),
    (dict(x=X, y=Y, x_val=X), "give both x_val and y_val"),
    (dict(x=X, y=Y, x_val=X[:, :3], y_val=Y), "x_val has samples of shape"),
    (dict(x=X, y=Y, loss=lambda logits, y: F.cross_entropy(logits, y, reduction="none")), "scalar tensor"),
    (dict(x=X[:, 0], y=Y), r"shape \(samples, features...\)"),
    (dict(x=X, y=np.zeros(60, int)), "labels hold only class 0"),
]


@pytest.mark.parametrize("kwargs,message", BAD_ARRAYS, ids=[m[:30] for _, m in BAD_ARRAYS])
def test_bad_arrays_are_refused_by_name(kwargs, message):
    kwargs = {"n_clients": 3, **kwargs}
    with pytest.raises(ConfigError, match=message):
        task_from_arrays(kwargs.pop("x"), kwargs.pop("y"), **kwargs)


BAD_CLIENTS = [
    (dict(clients=[]), "non-empty list of"),
    (dict(clients=[(X[:10], Y[:10]), (X[:0], Y[:0])]), "client 1 holds no samples"),
    (dict(clients=[(X[:10], Y[:10]), (X[:5], Y[:4])]), "client 1 holds 5 samples of features but 4 labels"),
    (dict(clients=[(X[:10], Y[:10]), X[:10]]), r"client 1 must be an \(x, y\) pair"),
    (dict(clients=[(X[:10], Y[:10]), (X[:5, :2], Y[:5])]), "client 1 has samples of shape"),
    (dict(clients=[(X[:10], Y[:10]), (X[:1], Y[:1])]), "client 1 has 1 sample"),
    (dict(clients=[(X[:10], Y[:10])] * 2, val=[(X[:3], Y[:3])]), "one .x_val, y_val. pair per client: 2 clients, got 1"),
    (dict(clients=[(X[:10], Y[:10])] * 2, val=[(X[:3], Y[:3]), (X[:0], Y[:0])]), "validation data of client 1 holds no samples"),
    (dict(clients=[(X[:10], Y[:10] + 5)], num_classes=6), "client 0's labels: the largest label is"),
]


@pytest.mark.parametrize("kwargs,message", BAD_CLIENTS, ids=[m[:30] for _, m in BAD_CLIENTS])
def test_bad_clients_are_refused_by_name(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        task_from_clients(**kwargs)


# --- task_from_arrays / task_from_clients: what they build -------------------------------------

def test_numpy_and_torch_arrays_give_identical_tasks():
    x, y = blobs()
    a = task_from_arrays(x, y, n_clients=6, partition="dirichlet", dirichlet_alpha=0.2)
    b = task_from_arrays(torch.from_numpy(x), torch.from_numpy(y), n_clients=6, partition="dirichlet",
                         dirichlet_alpha=0.2)
    assert a.data_sha256 == b.data_sha256 and a is not b
    ca, cb = a(a.Settings(), 3).partition(), b(b.Settings(), 3).partition()
    for p, q in zip(ca, cb):
        assert torch.equal(p.x, q.x) and torch.equal(p.y, q.y) and torch.equal(p.x_val, q.x_val)


def test_classes_are_new_unregistered_task_classes():
    from raycompo.tasks import ClassificationTask

    x, y = blobs()
    T = task_from_arrays(x, y, n_clients=4, name="my-data")
    assert isinstance(T, type) and issubclass(T, ClassificationTask) and T.name == "my-data"
    assert T.__module__ == __name__ and not T.__module__.startswith("raycompo.")
    assert T.x.dtype == torch.float32 and T.y.dtype == torch.int64 and T.num_classes == 4
    x[0, 0] = 1e6  # the task holds a copy
    assert T.x[0, 0] != 1e6


def test_task_from_clients_keeps_each_clients_data_exactly():
    x, y = blobs(100)
    clients = [(x[:30], y[:30]), (x[30:45], y[30:45]), (torch.from_numpy(x[45:]), torch.from_numpy(y[45:]))]
    val = [(x[:5], y[:5]), (x[5:9], y[5:9]), (x[9:20], y[9:20])]
    T = task_from_clients(clients, val=val, model="mlp")
    data = T(T.Settings(), 0).partition()
    for c, (xi, yi), (xv, yv) in zip(data, clients, val):
        assert torch.equal(c.x, torch.as_tensor(xi, dtype=torch.float32)) and torch.equal(c.y, torch.as_tensor(yi))
        assert torch.equal(c.x_val, torch.as_tensor(xv, dtype=torch.float32)) and torch.equal(c.y_val, torch.as_tensor(yv))
    S = task_from_clients(clients, val_fraction=0.2)  # no val: each client's own samples split
    for c, (_, yi) in zip(S(S.Settings(), 0).partition(), clients):
        assert len(c.y_val) == round(0.2 * len(yi)) and len(c.y) + len(c.y_val) == len(yi)
        assert sorted(torch.cat([c.y, c.y_val]).tolist()) == sorted(torch.as_tensor(yi).tolist())


def test_validation_arrays_are_drawn_with_each_clients_class_proportions():
    x, y = blobs(600)
    xv, yv = blobs(200, seed=1)
    T = task_from_arrays(x, y, n_clients=4, partition="dominant", rho=0.9, x_val=xv, y_val=yv)
    for i, c in enumerate(T(T.Settings(), 0).partition()):
        assert len(c.y_val) == 50
        assert (c.y_val == i).double().mean() > 0.7  # the client's dominant class dominates


def test_partition_record_recreates_the_partition():
    x, y = blobs()
    T = task_from_arrays(x, y, n_clients=5, partition="shards", shards_per_client=3)
    rec = T(T.Settings(), 7).partition_record()
    assert rec["partitioner"] == "shards" and rec["params"] == {"shards_per_client": 3} and rec["seed"] == 7
    assert sum(rec["train_sizes"]) + sum(rec["val_sizes"]) == len(y) and len(rec["val_sizes"]) == 5
    assert rec["data_sha256"] == T.data_sha256 and len(rec["data_sha256"]) == 64
    assert T(T.Settings(), 7).partition_record() == rec
    assert T(T.Settings(), 8).partition_record()["indices_sha256"] != rec["indices_sha256"]
    fixed = build(T.Settings, {"partition_seed": 7})  # a fixed partition under any run seed
    assert T(fixed, 123).partition_record()["indices_sha256"] == rec["indices_sha256"]
    from raycompo.tasks.base import Task

    assert Task.partition_record(object()) == {}  # the built-in tasks' default


def test_custom_losses_keep_or_drop_sample_losses():
    x, y = blobs()
    aware = task_from_arrays(x, y, n_clients=3, loss=lambda z, t, reduction="mean": F.multi_margin_loss(z, t, reduction=reduction))
    plain = task_from_arrays(x, y, n_clients=3, loss=lambda z, t: F.multi_margin_loss(z, t))
    assert "sample_losses" in aware.capabilities and "sample_losses" not in plain.capabilities
    t = aware(aware.Settings(), 0)
    w = torch.randn_like(t.init_weights())
    batch = (t.x[:20], t.y[:20])
    assert torch.allclose(t.sample_losses(w, batch).mean(), t.loss(w, batch))
    assert torch.allclose(t.loss(w, batch), F.multi_margin_loss(t.model(w, batch[0]), batch[1]))


def test_a_callable_model_is_built_in_every_task_instance():
    x, y = blobs()
    T = task_from_arrays(x, y, n_clients=3, model=lambda: torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4)))
    a, b = T(T.Settings(), 0), T(T.Settings(), 0)
    assert a.model.dim == 6 * 8 + 8 + 8 * 4 + 4 and torch.equal(a.init_weights(), b.init_weights())


# --- shipping and running -------------------------------------------------------------------

def test_cloudpickle_round_trip_rebuilds_the_same_partition(tmp_path):
    from ray import cloudpickle

    x, y = blobs()
    T = task_from_arrays(x, y, n_clients=5, partition="dirichlet", dirichlet_alpha=0.3, name="shipped")
    rec = T(T.Settings(), 4).partition_record()
    U = cloudpickle.loads(cloudpickle.dumps(T))
    assert U(U.Settings(), 4).partition_record() == rec
    # In a fresh process (as a Ray actor gets it), where this test module is not imported.
    path = tmp_path / "task.pkl"
    path.write_bytes(cloudpickle.dumps(T))
    code = (
        "import pickle, sys; T = pickle.loads(open(sys.argv[1], 'rb').read()); "
        "print(T.name, T(T.Settings(), 4).partition_record()['indices_sha256'])"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["shipped", rec["indices_sha256"]]


def test_fedavg_inline_lowers_the_loss():
    import raycompo

    x, y = blobs(400)
    T = task_from_arrays(x, y, n_clients=4, partition="dirichlet", dirichlet_alpha=0.5, model="mlp")
    result = raycompo.run(T, "fedavg", rounds=3, settings={"lr": 0.1, "tau": 5})
    rows = result.rows
    first = rows[0]
    assert result.config["partition"]["partitioner"] == "dirichlet"
    assert rows[-1]["train_loss"] < 0.5 * first["train_loss"]
    assert rows[-1]["val_acc"] > 0.8
