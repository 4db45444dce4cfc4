"""Ditto: personal models persist across rounds in the client state and follow
v <- v - lr (grad f_i(v) + lam (v - w_s)); evaluation uses them."""

import torch

from raycompo.engine.federation import Federation
from raycompo.watch.per_client import N_SAMPLES_KEY
from tests.damaml_common import tiny_config


def test_personal_model_update_and_persistence():
    lam, lr = 0.5, 0.2
    fed = Federation(tiny_config("ditto", rounds=2, lam=lam, tau=1, lr=lr))
    host = fed.pool.host
    w0 = fed.w.clone()
    assert fed.client_state(3) == {}  # no personal model before the first round
    fed.run_round()
    v1 = fed.client_state(3)["v"]
    # first round: v starts at w_0, one step on the batch of stream 1 (the prox term is 0)
    c = host.context(3, 0)
    batch = c.data.batch(c.rng(0, stream=1), 8)
    torch.testing.assert_close(
        v1, w0 - lr * host.algorithm.loss_grad(w0, batch), rtol=1e-5, atol=1e-6
    )
    # second round: continues from v1 (persisted), pulled toward the new global model w_1
    w1 = fed.w.clone()
    fed.run_round()
    c = host.context(3, 1)
    batch = c.data.batch(c.rng(0, stream=1), 8)
    expected = v1 - lr * (host.algorithm.loss_grad(v1, batch) + lam * (v1 - w1))
    torch.testing.assert_close(fed.client_state(3)["v"], expected, rtol=1e-5, atol=1e-6)
    # evaluation uses the personal model
    metrics = fed.pool.map("evaluate", 2, {3: 1}, {"w": fed.w}, False)[3]
    assert metrics.pop(N_SAMPLES_KEY) == c.data.num_samples  # the engine's n_i, for clients.csv
    assert metrics == host.task.evaluate(fed.client_state(3)["v"], c.data)
    assert metrics != host.task.evaluate(fed.w, c.data)
