"""maml-sinusoid: the paper's protocol (section 5.1) and the Figure 1 data."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from raycompo.run import main
from raycompo.tasks.maml_sinusoid import MamlSinusoid, SinusoidSettings


@pytest.fixture(scope="module")
def task():
    return MamlSinusoid(SinusoidSettings(), seed=3)


def test_25_tasks_spread_randomly_and_evenly(task):
    clients = task.clients(list(range(5)))
    ids = [c.task_ids for c in clients]
    assert sorted(i for c in ids for i in c) == list(range(25)) and all(len(c) == 5 for c in ids)
    params = {tuple(p.tolist()) for c in clients for p in c.params}
    assert params == {(float(a), float(b)) for a in range(1, 6) for b in range(1, 6)}
    other = MamlSinusoid(SinusoidSettings(), seed=4).clients(list(range(5)))
    assert [c.task_ids for c in other] != ids  # the spread depends on the seed


def test_meta_batch_is_three_tasks_of_k_points(task):
    client = task.clients([0])[0]
    batch = client.batch(torch.Generator().manual_seed(0), 3)
    assert (
        len(batch) == 3
        and len({s.key for s in batch}) == 3
        and {s.key for s in batch} <= set(client.task_ids)
    )
    for s in batch:
        (xs, ys), (xq, _) = s.support, s.query
        assert xs.shape == (10, 1) and xq.shape == (10, 1)
        assert xs.abs().max() <= 5 and xq.abs().max() <= 5
        a, b = client.params[client.task_ids.index(s.key)].tolist()
        torch.testing.assert_close(ys, a * torch.sin(xs + b * math.pi / 5))


def test_600_validation_tasks_split_over_clients(task):
    clients = task.clients(list(range(5)))
    vals = torch.cat([c.val.params for c in clients])
    assert [len(c.val.params) for c in clients] == [120] * 5
    assert (
        vals[:, 0].min() >= 0.1
        and vals[:, 0].max() <= 5
        and vals[:, 1].min() >= 0
        and vals[:, 1].max() <= 5
    )
    assert len(torch.unique(vals, dim=0)) == 600


def test_zero_model_loss_is_the_mean_signal_power(task):
    """With w = 0 the network predicts 0, so a task's loss is mean of (A sin)^2 ~ A^2 / 2."""
    client = task.clients([0])[0]
    metrics = task.evaluate(torch.zeros(task.model.dim), client)
    want = (client.train_eval.params[:, 0] ** 2 / 2).mean().item()
    assert metrics["train_loss"] == pytest.approx(want, rel=0.15)


def test_cli_run_writes_figure1(tmp_path):
    out = tmp_path / "run"
    code = main(
        [
            "--task",
            "maml-sinusoid",
            "--algo",
            "local-scgdm",
            "--backend",
            "inline",
            "--rounds",
            "2",
            "--quiet",
            "--out",
            str(out),
            "--set",
            "hidden=8",
            "val_tasks=10",
            "eval_query=10",
            "p=2",
        ]
    )
    assert code == 0
    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics["round"]) == [0, 1, 2] and metrics["val_loss"].notna().all()
    fig = pd.read_csv(out / "figure1.csv")
    assert set(fig["algo"]) == {"local-scgdm"} and len(fig) == 201
    truth = 2.5 * torch.sin(torch.tensor(fig["x"].values) + 1.5 * math.pi / 5)
    assert torch.allclose(torch.tensor(fig["y_true"].values), truth, atol=1e-5)
    assert (fig["y_adapted"] != fig["y_before"]).any()  # one adaptation step moved the prediction
    assert len(pd.read_csv(out / "figure1_support.csv")) == 10
