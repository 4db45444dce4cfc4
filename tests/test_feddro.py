"""FedDRO, vanilla FedAvg for CO and MBSGD for CO: exactness, Theorem 4.1, backends."""

from __future__ import annotations

import pytest
import torch

from raycompo.configuration.config import RunConfig
from raycompo.engine import run
from raycompo.engine.federation import Federation
from raycompo.problems.global_composition import phi
from tests.helpers import assert_rows_close

SMALL = {"n_clients": 4, "minority_keep": 5, "test_fraction": 0.3}


def digits(algo, rounds=2, backend="inline", **settings):
    return RunConfig(task="feddro-digits-st", algo=algo, rounds=rounds, settings={**SMALL, **settings}, backend=backend)


@pytest.mark.parametrize("objective", ["kl", "chi2-dro"])  # chi2 (eq. 5) is stationary at the zero init
def test_full_batch_beta1_I1_is_gradient_descent_on_phi(objective):
    cfg = digits("feddro", rounds=3, batch_size=None, beta=1.0, sync_every=1, lr=0.3, objective=objective, lam=2.0)
    fed = Federation(cfg)
    task, problem = fed.task, fed.algorithm.problem
    batches = [(c.x, c.y) for c in task.clients(list(range(task.n_clients)))]
    w = fed.w.clone()
    for _ in range(3):
        fed.run_round()
        x = w.clone().requires_grad_()
        (g,) = torch.autograd.grad(phi(problem, x, batches), x)
        w = w - 0.3 * g
        assert torch.allclose(fed.w, w, atol=1e-5, rtol=1e-4), float((fed.w - w).abs().max())
    assert float((fed.w - task.init_weights()).abs().max()) > 1e-3  # it moved


def grad_norms(algo, rounds=60, every=30, **settings):
    """||grad Phi(x-bar)|| after every `every` rounds on the deterministic toy instance."""
    cfg = RunConfig(task="toy-co", algo=algo, rounds=rounds, backend="inline", eval_every=every,
                    settings={"n_clients": 4, "spread": 1.0, "batch_size": None, "lr": 0.2, "sync_every": 8, **settings})
    return [r["grad_norm"] for r in run(cfg).rows[1:] if "grad_norm" in r]


@pytest.mark.slow
def test_theorem_4_1_fedavg_co_stalls_while_feddro_converges():
    # g_k(x) = a_k x + b_k, f = y^2 / 2, h = 0, K = 4, I = 8 local steps, exact values.
    for case in (1, 2):
        mid, end = grad_norms("fedavg-co", case=case)
        assert end > 0.02, (case, end)  # bounded away from zero ...
        assert abs(end - mid) < 1e-4 * end, (case, mid, end)  # ... at a fixed point that is not stationary
    mid, end = grad_norms("feddro", beta=0.5)
    assert end < 1e-8, (mid, end)  # converges to a stationary point (linearly, on this instance)


def test_each_local_step_costs_one_round_trip():
    fed = Federation(digits("feddro", sync_every=4))
    calls = []
    inner = fed.pool.map
    fed.pool.map = lambda phase, *a, **k: calls.append(phase) or inner(phase, *a, **k)
    fed.algorithm.server_round(__import__("raycompo.engine.federation", fromlist=["RoundCtx"]).RoundCtx(fed, 0), fed.w, fed.state)
    assert calls == ["start", "step", "step", "step", "step"]  # I + 1 exchanges for I = 4 steps


def test_feddro_keeps_a_random_averaged_iterate():
    fed = Federation(digits("feddro", sync_every=2))
    seen = []
    for _ in range(3):
        fed.run_round()
        seen.append(fed.w.clone())
    state = fed.server_state()
    assert state["averages"] == 3
    assert any(torch.equal(state["x_random"], s) for s in seen)


def test_rows_have_the_objective_and_accuracies():
    rows = run(digits("mbsgd-co", rounds=1, sync_every=2)).rows
    for key in ("objective", "grad_norm", "train_acc", "val_acc", "val_acc_worst"):
        assert key in rows[-1]
    assert rows[-1]["objective"] < rows[0]["objective"]


@pytest.mark.slow
@pytest.mark.parametrize("algo,settings", [("feddro", {"sync_every": 2, "objective": "chi2-dro"})])
def test_ray_equals_inline(ray_session, algo, settings):
    a = run(digits(algo, rounds=2, **settings)).rows
    b = run(digits(algo, rounds=2, backend="ray", **settings)).rows
    assert_rows_close(a, b, tol=1e-6)
    assert a[-1]["objective"] != a[0]["objective"]


# --- eq. (8): the correction g(x_k^t) - g(x_k^{t-1}) uses the point of the previous estimate

def spy_ybar(fed):
    """Record the y-bar^t the server sends with every local step."""
    seen = []
    inner = fed.pool.map

    def spy(phase, round_, counts, payload, *rest, **kwargs):  # (reduce, count: passed on)
        if phase == "step":
            seen.append(payload["ybar"].clone())
        return inner(phase, round_, counts, payload, *rest, **kwargs)

    fed.pool.map = spy
    return seen


@pytest.mark.parametrize("beta", [0.1, 0.5])
def test_full_batch_shared_y_is_exact_after_every_averaging(beta):
    # Full batches: if y-bar^{t-1} = g(x^{t-1}) exactly, eq. (8) gives y-bar^t = g(x^t) for
    # any beta, provided x_k^{t-1} is where y-bar^{t-1} was estimated. With I = 1 every
    # estimate is taken at the fresh average x-bar.
    fed = Federation(digits("feddro", rounds=6, batch_size=None, beta=beta, sync_every=1, lr=0.5))
    problem = fed.algorithm.problem
    batches = [(c.x, c.y) for c in fed.task.clients(list(range(fed.task.n_clients)))]
    seen = spy_ybar(fed)
    for _ in range(6):
        xbar = fed.w.clone()
        fed.run_round()
        with torch.no_grad():
            exact = sum(problem.g(xbar, b) for b in batches) / len(batches)
        assert torch.allclose(seen[-1], exact, rtol=1e-5, atol=0), (float(seen[-1]), float(exact))


def reference_feddro(clients, model, w0, rounds, I, lr, beta, lam, batch_size, seed):  # noqa: E741 (the paper's I)
    """Algorithm 2 with the KL objective (g_k = mean exp(l / lam), f = log, h = 0), written
    directly over K clients; the same mini-batches as the engine (stream 0 of (seed,
    client, round, step)). Returns every y-bar^t and the final average."""
    import torch.nn.functional as F

    from raycompo.seeding import CLIENT, generator

    def g(x, b):
        return torch.exp(F.cross_entropy(model(x, b[0]), b[1], reduction="none") / lam).mean()

    K = len(clients)
    xbar, ybar, ys = w0.clone(), None, []
    x_prev = [w0.clone()] * K  # x_k^{-1} = x_k^0
    for r in range(rounds):
        xs = [xbar.clone() for _ in range(K)]  # line 8: x_k = x-bar
        for j in range(I):
            bs = [c.batch(generator(seed, CLIENT, c.client_id, r, j, 0), batch_size) for c in clients]
            with torch.no_grad():
                yk = [g(xs[k], bs[k]) if ybar is None else (1 - beta) * (ybar - g(x_prev[k], bs[k])) + g(xs[k], bs[k]) for k in range(K)]
            ybar = sum(yk) / K  # eq. (8), shared (line 6)
            ys.append(ybar)
            x_prev = [x.clone() for x in xs]
            for k in range(K):
                x = xs[k].clone().requires_grad_()
                (gr,) = torch.autograd.grad(g(x, bs[k]), x)
                xs[k] = xs[k] - lr * gr / ybar.clamp(min=1.0)  # eq. (7); grad f = 1/y on g's range [1, inf)
        xbar = sum(xs) / K
    return ys, xbar


@pytest.mark.parametrize("I", [1, 3])
def test_shared_y_follows_an_independent_implementation_of_eq_8(I):  # noqa: E741
    rounds, lr, beta, lam, bs = 4, 0.1, 0.3, 1.0, 8
    fed = Federation(digits("feddro", rounds=rounds, batch_size=bs, beta=beta, sync_every=I, lr=lr, lam=lam))
    clients = fed.task.clients(list(range(fed.task.n_clients)))
    seen = spy_ybar(fed)
    for _ in range(rounds):
        fed.run_round()
    ys, xbar = reference_feddro(clients, fed.task.model, fed.task.init_weights(), rounds, I, lr, beta, lam, bs, fed.seed)
    # the engine's y-bar sequence: every estimate is sent with the next step
    assert len(seen) == len(ys) == rounds * I
    for t, (a, b) in enumerate(zip(seen, ys)):
        assert torch.allclose(a.reshape(()), b.to(a.dtype), rtol=1e-5), (t, float(a), float(b))
    assert max(float(y) for y in ys) < 20  # a meaningful run (no blow-up of the estimate)
    assert torch.allclose(fed.w, xbar, atol=1e-5, rtol=1e-4), float((fed.w - xbar).abs().max())
