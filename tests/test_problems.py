"""The compositional gradient is a vector-Jacobian product: check it against the explicit
Jacobian product, and the KL-DRO estimate against its closed form."""

import torch
from torch.func import grad, jacrev

from raycompo.problems import KLDRO, compositional_gradient


class VectorInner:
    """f(w; B) = mean over B of tanh(A w) * x  (R^5 -> R^3); g(y; B~) = mean ||y - z||^2 * y_1."""

    needs_outer_batch = True

    def __init__(self):
        torch.manual_seed(0)
        self.A = torch.randn(3, 5)

    def inner(self, w, batch):
        return (torch.tanh(self.A @ w) * batch.unsqueeze(1)).mean(0)

    def outer(self, y, batch1):
        return ((y - batch1) ** 2).sum(1).mean() * y[0]


def test_vjp_equals_explicit_jacobian_product():
    problem = VectorInner()
    w = torch.randn(5, dtype=torch.float64)
    problem.A = problem.A.double()
    batch, batch1 = torch.randn(4, dtype=torch.float64), torch.randn(6, 3, dtype=torch.float64)
    u, y = compositional_gradient(problem, w, batch, batch1)
    J = jacrev(lambda v: problem.inner(v, batch))(w)  # 3 x 5, formed only here
    gy = grad(lambda z: problem.outer(z, batch1))(problem.inner(w, batch))
    torch.testing.assert_close(u, J.T @ gy, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(y, problem.inner(w, batch))


def test_outer_gradient_taken_at_y_hat():
    """SCGD-style estimators evaluate grad g at a running estimate instead of f(w; B)."""
    problem = VectorInner()
    w, batch, batch1 = torch.randn(5), torch.randn(4), torch.randn(6, 3)
    y_hat = torch.randn(3)
    u, _ = compositional_gradient(problem, w, batch, batch1, y_hat=y_hat)
    J = jacrev(lambda v: problem.inner(v, batch))(w)
    torch.testing.assert_close(u, J.T @ grad(lambda z: problem.outer(z, batch1))(y_hat))


def test_kl_dro_estimate_is_exp_weighted_gradient():
    """ComFedL section 3: u = exp(f_B(w)/gamma) grad f_B(w) / gamma."""
    x, t = torch.randn(8, 3), torch.randn(8)

    def loss(w, batch):
        xb, tb = batch
        return ((xb @ w - tb) ** 2).mean()

    gamma = 0.7
    problem = KLDRO(loss, gamma)
    w = torch.randn(3)
    u, y = compositional_gradient(problem, w, (x, t))
    expected = torch.exp(loss(w, (x, t)) / gamma) / gamma * grad(loss)(w, (x, t))
    torch.testing.assert_close(u, expected)
    torch.testing.assert_close(y, loss(w, (x, t)).reshape(1))
