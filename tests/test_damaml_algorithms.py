"""ComFedL-MAML / -DAMAML, FedMAML, TR-MAML and FedAvg's adapted evaluation, on small problems."""

from types import SimpleNamespace

import torch
import torch.nn.functional as F

from raycompo.algorithms.comfedl_damaml import ComFedLDamaml, ComFedLDamamlSettings
from raycompo.algorithms.comfedl_maml import ComFedLMaml, ComFedLMamlSettings
from raycompo.algorithms.fedmaml import FedMaml, FedMamlSettings
from raycompo.configuration.config import resolve
from raycompo.engine.federation import Federation
from raycompo.engine.host import ClientCtx
from raycompo.problems import compositional_gradient
from raycompo.tasks.base import ClientData
from raycompo.watch.per_client import N_SAMPLES_KEY
from tests.damaml_common import tiny_config


def _logistic():
    """A 3-class linear model on 5 features, as a flat vector w of 18 numbers."""
    g = torch.Generator().manual_seed(0)

    def loss(w, batch):
        x, y = batch
        return F.cross_entropy(x @ w[:15].view(5, 3) + w[15:], y)

    x, y = torch.randn(40, 5, generator=g), torch.randint(0, 3, (40,), generator=g)
    w = 0.3 * torch.randn(18, generator=g)
    return SimpleNamespace(loss=loss), x, y, w


def test_damaml_direction_approaches_maml_over_gamma():
    """u_DAMAML = exp(f/gamma)/gamma * u_MAML: gamma * u_DAMAML -> u_MAML as gamma grows."""
    task, x, y, w = _logistic()
    support, query = (x[:20], y[:20]), (x[20:], y[20:])
    maml = ComFedLMaml(ComFedLMamlSettings(inner_lr=0.3), task).problem
    u_maml, _ = compositional_gradient(maml, w, support, query)
    errors = []
    for gamma in (1.0, 1e2, 1e4, 1e6):
        damaml = ComFedLDamaml(ComFedLDamamlSettings(inner_lr=0.3, gamma=gamma), task).problem
        u, _ = compositional_gradient(damaml, w, support, query)
        errors.append(float((gamma * u - u_maml).norm() / u_maml.norm()))
    assert errors[0] > 0.1  # at gamma = 1 the scaling exp(f) is far from 1
    assert all(a > b for a, b in zip(errors, errors[1:]))
    assert errors[-1] < 1e-5
    # and the MAML direction really contains the Hessian term: it differs from FO-MAML
    fo = ComFedLMaml(ComFedLMamlSettings(inner_lr=0.3, first_order=True), task).problem
    assert not torch.allclose(compositional_gradient(fo, w, support, query)[0], u_maml, atol=1e-4)


def test_fedmaml_step_is_per_fedavg_hf():
    """One local step of FedMAML: w - beta (I - alpha H(w; D'')) grad f(w - alpha grad f(w; D); D'),
    with the three batches that the client's streams 0, 1, 2 draw; checked against a dense Hessian."""
    task, x, y, w = _logistic()
    alpha, beta, b = 0.3, 0.2, 8
    algo = FedMaml(FedMamlSettings(lr=beta, inner_lr=alpha, tau=1, batch_size=b), task)
    c = ClientCtx(
        0, ClientData(0, x, y, x[:5], y[:5]), {}, round=3, seed=11, device=torch.device("cpu")
    )
    w_new = algo.client_local(c, {}, {"w": w})[0]["w"]
    d, dq, dh = (c.data.batch(c.rng(0, stream=k), b) for k in range(3))
    y_adapt = w - alpha * torch.func.grad(task.loss)(w, d)
    g_query = torch.func.grad(task.loss)(y_adapt, dq)
    hess = torch.autograd.functional.hessian(lambda v: task.loss(v, dh), w)
    torch.testing.assert_close(
        w_new, w - beta * (g_query - alpha * hess @ g_query), rtol=1e-5, atol=1e-6
    )


def test_trmaml_first_round_matches_comfedl_maml_then_reweights():
    """With uniform task weights and every client sampled, TR-MAML's p-weighted average of the
    (identical) local MAML steps is ComFedL-MAML's model; then p moves toward the clients
    with the highest MAML loss and stays on the simplex."""
    tr = Federation(tiny_config("tr-maml", rounds=1, rho=0.8))
    ref = Federation(tiny_config("comfedl-maml", rounds=1, rho=0.8))
    tr.run_round()
    ref.run_round()
    torch.testing.assert_close(tr.w, ref.w, rtol=1e-5, atol=1e-6)
    p = tr.state["p"]
    assert abs(float(p.sum()) - 1) < 1e-9 and bool((p >= 0).all())
    assert float(p.max() - p.min()) > 1e-4  # the weights moved off uniform
    tr.run_round()
    assert not torch.allclose(tr.state["p"], p)


def test_fedavg_evaluates_after_adaptation_only_when_asked():
    cfg0 = tiny_config("fedavg", eval_adapt_steps=0)
    cfg1 = tiny_config("fedavg")  # the task's default: one adaptation step
    assert resolve(cfg1).algo_settings.eval_adapt_steps == 1
    assert resolve(tiny_config("fedavg")).algo_settings.lr == 0.1  # journal's FedAvg lr
    plain, adapted = Federation(cfg0), Federation(cfg1)
    task = resolve(cfg0).make_task()
    client = task.clients([0])[0]
    m0, m1 = plain.evaluate(), adapted.evaluate()
    direct = task.evaluate(plain.w, client)
    per_client0 = plain.pool.map("evaluate", 0, {0: 1}, {"w": plain.w}, False)[0]
    assert per_client0.pop(N_SAMPLES_KEY) == client.num_samples  # the engine's n_i, for clients.csv
    assert per_client0 == direct  # eval_adapt_steps=0: the global model itself (old behaviour)
    assert m0["val_loss"] != m1["val_loss"]
