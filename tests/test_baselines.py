"""Properties of the robust-FL baselines that could fail."""

import torch

from raycompo.algorithms.drfl import project_simplex
from raycompo.engine.federation import Federation, RoundCtx
from tests.helpers import small_config


def test_project_simplex_known_values():
    torch.testing.assert_close(project_simplex(torch.tensor([0.5, 0.5, 0.5])), torch.full((3,), 1 / 3))
    torch.testing.assert_close(project_simplex(torch.tensor([2.0, 0.0, -1.0])), torch.tensor([1.0, 0.0, 0.0]))
    torch.testing.assert_close(project_simplex(torch.tensor([0.9, 0.5, 0.0])), torch.tensor([0.7, 0.3, 0.0]))


def test_qfedavg_with_q0_is_the_uniform_average_of_local_models():
    """q = 0: Delta_k = L (w - w_k), h_k = L, so w - sum Delta / sum h = mean_k w_k,
    which is ComFedL's server rule applied to plain local SGD (gamma -> inf aside)."""
    q = Federation(small_config("qfedavg", q=0.0, lr=0.1))
    q.run_round()
    # The same local SGD models averaged uniformly: FedAvg with equal sample counts.
    f = Federation(small_config("fedavg", lr=0.1, big_client_size=20))
    q2 = Federation(small_config("qfedavg", q=0.0, lr=0.1, big_client_size=20))
    f.run_round()
    q2.run_round()
    torch.testing.assert_close(q2.w, f.w, rtol=1e-5, atol=1e-6)


def test_fedavg_weights_by_sample_count():
    """With one client holding most samples, FedAvg's model is pulled toward that
    client's local model: the weighted average differs from the uniform one."""
    f = Federation(small_config("fedavg", lr=0.1))
    q = Federation(small_config("qfedavg", q=0.0, lr=0.1))
    f.run_round()
    q.run_round()
    assert not torch.allclose(f.w, q.w)


class RecordingCtx(RoundCtx):
    """Records the per-client outputs of `map_rows` (DRFL's loss queries)."""

    def map_rows(self, phase, cohort, payload):
        rows = super().map_rows(phase, cohort, payload)
        self.recorded = rows.as_dict()
        return rows


def test_drfl_weight_update_is_projected_ascent_on_reported_losses():
    """DRFA step 4: lambda <- Proj(lambda + weight_lr * tau * v), v_i = n/m f_i(w^{t'})."""
    weight_lr, tau = 0.05, 5
    fed = Federation(small_config("drfl", weight_lr=weight_lr, tau=tau, clients_per_round=2))
    for r in range(3):
        lam = fed.state["lambda"].clone()
        ctx = RecordingCtx(fed, r)
        fed.w, fed.state = fed.algorithm.server_round(ctx, fed.w, fed.state)
        n, m = fed.n_clients, 2
        v = torch.zeros(n, dtype=torch.float64)
        for i, out in ctx.recorded.items():
            v[i] = n / m * float(out["loss"])
        assert len(ctx.recorded) == m
        expected = project_simplex(lam + weight_lr * tau * v)
        torch.testing.assert_close(fed.state["lambda"], expected)
        assert torch.all(expected >= 0) and abs(float(expected.sum()) - 1) < 1e-9
    assert not torch.allclose(fed.state["lambda"], torch.full((fed.n_clients,), 1 / fed.n_clients, dtype=torch.float64))
