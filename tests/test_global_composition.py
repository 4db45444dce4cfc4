"""The global-composition objectives of FedDRO (eq. 4, eq. 5) and their gradients."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from raycompo.configuration.config import RunConfig, resolve
from raycompo.errors import ConfigError
from raycompo.problems.global_composition import (
    OBJECTIVES,
    dro_objective,
    full_parts,
    phi,
    phi_from_parts,
)

torch.manual_seed(0)
X = [torch.randn(13, 4, dtype=torch.float64) for _ in range(3)]
Y = [torch.randint(0, 3, (13,)) for _ in range(3)]
W = torch.randn(12, dtype=torch.float64)


def losses(w, batch):
    x, y = batch
    return F.cross_entropy(x @ w.view(4, 3), y, reduction="none")


@pytest.mark.parametrize("name", list(OBJECTIVES))
def test_chunked_parts_give_phi_and_its_autograd_gradient(name):
    p = dro_objective(name, losses, 0.7)
    parts = [full_parts(p, W, x, y, chunk=5) for x, y in zip(X, Y)]
    mean = {k: sum(q[k] for q in parts) / len(parts) for k in parts[0]}
    got = phi_from_parts(p, mean)
    w = W.clone().requires_grad_()
    value = phi(p, w, list(zip(X, Y)))
    (grad,) = torch.autograd.grad(value, w)
    assert got["objective"] == pytest.approx(value.detach().item(), rel=1e-10)
    assert got["grad_norm"] == pytest.approx(float(grad.norm()), rel=1e-10)


def test_objectives_match_the_paper_formulas():
    ls = torch.cat([losses(W, (x, y)) for x, y in zip(X, Y)])  # all m samples (equal client sizes)
    lam = 0.7
    batches = list(zip(X, Y))
    kl = phi(dro_objective("kl", losses, lam), W, batches)
    assert float(kl) == pytest.approx(float(torch.log(torch.exp(ls / lam).mean())), rel=1e-12)  # eq. (4)
    chi2 = phi(dro_objective("chi2", losses, lam), W, batches)
    eq5 = -(ls**2).sum() / (2 * lam * len(ls)) + ls.mean() ** 2 / (2 * lam)
    assert float(chi2) == pytest.approx(float(eq5), rel=1e-12)  # eq. (5) as printed
    pen = phi(dro_objective("chi2-dro", losses, lam), W, batches)
    assert float(pen) == pytest.approx(float(ls.mean() + ls.var(unbiased=False) / (2 * lam)), rel=1e-12)


def test_kl_shift_keeps_the_gradient_and_shifts_phi():
    a = dro_objective("kl", losses, 0.5)
    b = dro_objective("kl", losses, 0.5, shift=3.0)
    pa = [full_parts(a, W, x, y) for x, y in zip(X, Y)]
    pb = [full_parts(b, W, x, y) for x, y in zip(X, Y)]
    ma = phi_from_parts(a, {k: sum(q[k] for q in pa) / 3 for k in pa[0]})
    mb = phi_from_parts(b, {k: sum(q[k] for q in pb) / 3 for k in pb[0]})
    assert mb["objective"] == pytest.approx(ma["objective"] - 3.0 / 0.5, rel=1e-10)
    assert mb["grad_norm"] == pytest.approx(ma["grad_norm"], rel=1e-10)
    assert math.isfinite(float(a.grad_f(torch.tensor([-2.0]))))  # negative estimate: projected


@pytest.mark.parametrize(
    "algo,settings,message",
    [
        ("feddro", {"beta": 0.0}, "beta"),
        ("feddro", {"beta": 1.5}, "beta"),
        ("feddro", {"sync_every": 0}, "sync_every"),
        ("feddro", {"lam": 0.0}, "lam"),
        ("fedavg-co", {"lam": -1.0}, "lam"),
        ("fedavg-co", {"case": 3}, "case"),
        ("mbsgd-co", {"objective": "tv"}, "objective"),
    ],
)
def test_bad_settings_give_a_clear_error(algo, settings, message):
    with pytest.raises(ConfigError, match=message):
        resolve(RunConfig(task="feddro-digits-st", algo=algo, settings=settings, backend="inline"))
