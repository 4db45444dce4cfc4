"""ComFedL with tau = 1, every client every round and full batches is gradient descent on
the composite objective F(w) = 1/n sum_i exp(f_i(w) / gamma) (Algorithm 1 with line 18)."""

import torch
import torch.nn.functional as F

from raycompo.configuration.config import resolve
from raycompo.engine.federation import Federation
from tests.helpers import small_config


def test_tau1_full_batch_equals_gradient_descent():
    lr, gamma, steps = 0.05, 2.0, 4
    cfg = small_config("comfedl", rounds=steps, lr=lr, gamma=gamma, tau=1, batch_size=None)
    fed = Federation(cfg)
    task = resolve(cfg).make_task()
    clients = task.clients(list(range(task.n_clients)))

    def composite(w):
        return torch.stack([torch.exp(F.cross_entropy(task.model(w, c.x), c.y) / gamma) for c in clients]).mean()

    w = task.init_weights().clone()
    torch.testing.assert_close(fed.w, w)
    for _ in range(steps):
        w = w.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(composite(w), w)
        w = (w - lr * g).detach()
        fed.run_round()
        torch.testing.assert_close(fed.w, w, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(w, task.init_weights())  # it moved


def test_more_local_steps_differ_from_one():
    """tau > 1 is not the same as tau = 1 (local steps are really taken)."""
    a = Federation(small_config("comfedl", lr=0.05, gamma=2.0, tau=1, batch_size=None))
    b = Federation(small_config("comfedl", lr=0.05, gamma=2.0, tau=3, batch_size=None))
    a.run_round()
    b.run_round()
    assert not torch.allclose(a.w, b.w)
