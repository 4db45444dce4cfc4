"""maml-omniglot on small Omniglot-format folders written by the tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from raycompo.configuration.config import RunConfig, resolve
from raycompo.data.omniglot import load_alphabet, omniglot_alphabets
from raycompo.errors import ConfigError, DataUnavailableError
from raycompo.run import main
from raycompo.tasks.maml_omniglot import MamlOmniglot, OmniglotSettings, episode
from tests.omniglot_data import write_omniglot

SPLIT = {"n_train_alphabets": 3, "n_val_alphabets": 1, "n_test_alphabets": 1}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = tmp_path_factory.mktemp("omniglot")
    write_omniglot(path, alphabets=5, characters=4, images=8, size=12, evaluation=2)
    return path


def test_loader_reads_both_halves_resized_and_inverted(root):
    alphabets = omniglot_alphabets(root)
    assert [n for n, _ in alphabets][:3] == [
        f"images_background/Alphabet_{i:02d}" for i in range(3)
    ]
    assert len(alphabets) == 5 and alphabets[-1][0].startswith("images_evaluation/")
    images = load_alphabet(alphabets[0][1], 28)
    assert images.shape == (4, 8, 1, 28, 28) and images.dtype == torch.float32
    assert 0 <= images.min() and images.max() <= 1
    assert images.mean() < 0.5  # strokes (30% of pixels) are 1, the white background 0


def test_split_and_one_alphabet_per_client(root):
    task = MamlOmniglot(OmniglotSettings(**SPLIT, k_query=3), seed=0, data_dir=str(root))
    assert task.n_clients == 3
    parts = task.split()
    names = [n for part in parts.values() for n, _ in part]
    assert len(names) == len(set(names)) == 5
    clients = task.clients([0, 1, 2])
    assert [c.alphabet for c in clients] == [n for n, _ in parts["train"]]
    again = MamlOmniglot(OmniglotSettings(**SPLIT, k_query=3), seed=5, data_dir=str(root)).split()
    assert again == parts  # the split is fixed by split_seed, not by the run seed


def test_episode_is_n_way_k_shot_with_rotated_classes():
    s = OmniglotSettings(n_way=5, k_shot=2, k_query=3)
    images = torch.rand(2, 6, 1, 8, 8)  # 2 characters x 4 rotations = 8 classes
    (xs, ys), (xq, yq) = episode(images, torch.Generator().manual_seed(0), s)
    assert xs.shape == (10, 1, 8, 8) and xq.shape == (15, 1, 8, 8)
    assert (
        ys.tolist() == [c for c in range(5) for _ in range(2)]
        and torch.bincount(yq).tolist() == [3] * 5
    )
    # every support image is a rotation of one of the alphabet's images
    flat = {
        tuple(np.round(torch.rot90(img, r, dims=(-2, -1)).flatten().numpy(), 5))
        for img in images.flatten(0, 1)
        for r in range(4)
    }
    assert all(tuple(np.round(x.flatten().numpy(), 5)) in flat for x in xs)


@pytest.mark.parametrize(
    "settings,message",
    [
        (
            {"n_way": 17},
            r"n_way=17 is larger than alphabet .* 16 classes \(4 characters x 4 rotations\)",
        ),
        ({"n_way": 5, "rotation_classes": False}, r"n_way=5 is larger than alphabet .* 4 classes"),
        (
            {"n_train_alphabets": 33, "n_val_alphabets": 5, "n_test_alphabets": 12},
            "has 5 alphabets; the split 33/5/12",
        ),
        ({"k_shot": 1, "k_query": 15}, "k_shot \\+ k_query = 16"),
    ],
)
def test_bad_settings_give_clear_errors(root, settings, message):
    cfg = RunConfig(
        task="maml-omniglot",
        algo="local-scgdm",
        rounds=1,
        backend="inline",
        data_dir=str(root),
        settings={**SPLIT, "k_query": 3, **settings},
    )
    with pytest.raises(ConfigError, match=message):
        resolve(cfg).make_task().clients([0])


def test_missing_data_names_data_dir(tmp_path, monkeypatch):
    import torchvision.datasets

    def offline(*args, **kwargs):
        raise RuntimeError("no network")

    monkeypatch.setattr(torchvision.datasets, "Omniglot", offline)
    with pytest.raises(DataUnavailableError, match="--data-dir"):
        omniglot_alphabets(tmp_path / "empty")


@pytest.mark.parametrize("algo", ["local-scgdm", "local-bsgd"])
def test_cli_runs_on_the_small_folder(root, tmp_path, algo):
    out = tmp_path / algo
    code = main(
        [
            "--task",
            "maml-omniglot",
            "--algo",
            algo,
            "--backend",
            "inline",
            "--rounds",
            "1",
            "--quiet",
            "--data-dir",
            str(root),
            "--out",
            str(out),
            "--set",
            "n_train_alphabets=3",
            "n_val_alphabets=1",
            "n_test_alphabets=1",
            "k_query=3",
            "hidden=4",
            "image_size=16",
            "p=2",
            "batch_size=1",
            "eval_tasks=1",
        ]
    )
    assert code == 0
    m = pd.read_csv(out / "metrics.csv")
    assert list(m["round"]) == [0, 1]
    assert m["val_acc"].between(0, 1).all() and m["train_loss"].notna().all()
    assert m["train_loss"].iloc[1] != m["train_loss"].iloc[0]
