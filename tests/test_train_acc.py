"""Every classification task's rows have train_acc (mean and worst client), next to the
existing columns."""

from __future__ import annotations

import pytest

from raycompo.configuration.config import RunConfig, resolve
from raycompo.engine.federation import summarize
from raycompo.tasks.base import ClassificationTask
from tests.helpers import SMALL_DRO

OFFLINE = {
    "dro-mnist5k": SMALL_DRO,
    "damaml-mnist5k": {"train_per_client": 20, "val_per_client": 10},
    "feddro-digits-st": {"n_clients": 4, "minority_keep": 5},
}


@pytest.mark.parametrize("task", sorted(OFFLINE))
def test_classification_rows_have_train_acc(task):
    r = resolve(RunConfig(task=task, algo="fedavg", settings=OFFLINE[task], backend="inline"))
    t = r.make_task()
    assert isinstance(t, ClassificationTask)
    w = t.init_weights()
    per_client = {c.client_id: t.evaluate(w, c) for c in t.clients(list(range(t.n_clients)))}
    for m in per_client.values():
        assert {"train_loss", "val_loss", "val_acc", "train_acc"} <= set(m)
        assert 0.0 <= m["train_acc"] <= 1.0
    c = t.clients([0])[0]
    acc = float((t.model(w, c.x).argmax(1) == c.y).double().mean())
    assert per_client[0]["train_acc"] == pytest.approx(acc)
    row = summarize(per_client, t.worst)
    assert row["train_acc_worst"] == min(m["train_acc"] for m in per_client.values())
    assert {"train_loss_worst", "val_loss_worst", "val_acc_worst"} <= set(row)
