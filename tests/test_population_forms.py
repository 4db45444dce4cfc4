"""Population forms of the batched algorithms beyond FedAvg and ComFedL (issue 42,
raycompo/engine/population.py): trials that differ in an algorithm's `row_settings` run their
batched phases as rows of one computation, and each trial's rows are those of the trial run
alone (1e-5), its costs exactly so, a diverging trial's included."""

from __future__ import annotations

import pytest

from raycompo.configuration.config import RunConfig
from raycompo.engine import runner
from tests.test_population import assert_same_rows, together

DRO_SYN = {
    "n_clients": 8,
    "min_samples": 2,
    "max_samples": 30,
    "sync_every": 3,
    "batch_size": 8,
    "lam": 2.0,
}
SYN = {"n_clients": 10, "min_samples": 2, "max_samples": 30, "clients_per_round": 5, "tau": 3}
SINE = {"n_clients": 4, "p": 2}
COSTS = ("samples", "values_up", "bytes_up", "values_down", "exchanges")


def config(task: str, algo: str, **settings) -> RunConfig:
    return RunConfig(
        task=task,
        algo=algo,
        rounds=3,
        backend="inline",
        vectorize="on",
        eval_clients=4,
        settings=settings,
    )


def assert_population_is_each_alone(
    cfgs: list[RunConfig], statuses: list[str] | None = None
) -> None:
    """The trials together ran at least one exchange as one computation, and each one's
    rows and costs are its run alone's."""
    results, population = together(cfgs)
    assert population.together > 0
    if statuses is not None:
        assert [r.status for r in results] == statuses
    for cfg, pop in zip(cfgs, results):
        alone = runner.run(cfg)
        assert_same_rows(alone, pop)
        for cost in COSTS:
            if cost in alone.metrics:
                assert alone.metrics[cost].tolist() == pop.metrics[cost].tolist(), cost


@pytest.mark.slow
def test_feddro_step_sizes_and_their_drop_per_row():
    cfgs = [
        config("synthetic", "feddro", **DRO_SYN, beta=0.5, lr=lr, lr_decay_round=1, lr_decay=decay)
        for lr, decay in ((0.02, 0.5), (0.05, 0.1), (500.0, 1.0))
    ]
    assert_population_is_each_alone(cfgs, ["completed", "completed", "diverged"])


def test_feddro_beta_lambda_and_kl_shift_per_row():
    """beta, lam and the KL shift differ per row: eq. (8)'s correction in the rows of beta < 1
    only (beta = 1: g(x_k^t) alone, as that trial), exp((l - shift) / lam) and the floor of
    grad f = 1 / y with each row's lam and shift."""
    rows = (dict(beta=0.5, lam=2.0), dict(beta=1.0, lam=0.5, kl_shift=1.0), dict(beta=0.1, lam=5.0, kl_shift=0.5))
    cfgs = [config("synthetic", "feddro", **DRO_SYN | r, lr=0.1) for r in rows]
    assert_population_is_each_alone(cfgs)


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["chi2", "chi2-dro"])
def test_feddro_lambda_per_row_in_the_chi_square_objectives(objective):
    """h and f of (5) and of the chi-square penalty with each row's lam."""
    cfgs = [config("synthetic", "feddro", **DRO_SYN | {"lam": lam}, objective=objective, lr=0.05) for lam in (1.0, 4.0)]
    assert_population_is_each_alone(cfgs)


@pytest.mark.parametrize("case", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_fedavg_co_step_size_and_lambda_per_row_in_both_cases(case):
    """Algorithm 1 of the FedDRO paper: Case I's y_k of each row's trial, Case II's y-bar each
    trial's own (a payload that differs per trial)."""
    cfgs = [config("synthetic", "fedavg-co", **DRO_SYN | {"lam": lam}, case=case, lr=lr)
            for lr, lam in ((0.05, 2.0), (0.2, 0.5))]
    assert_population_is_each_alone(cfgs)


@pytest.mark.slow
def test_mbsgd_co_lambda_per_row_with_each_trials_server_steps():
    cfgs = [config("synthetic", "mbsgd-co", **DRO_SYN | {"lam": lam}, lr=lr) for lr, lam in ((0.05, 2.0), (0.02, 1.0))]
    assert_population_is_each_alone(cfgs)


SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    "algo, settings, rows",
    [
        ("local-scgd", {}, [dict(lr=0.01, gamma=0.9), dict(lr=0.03, gamma=0.5)]),
        pytest.param(
            "local-scgdm",
            {"per_task_state": False},
            [
                dict(lr=0.01, alpha=0.8, gamma=0.7),
                dict(lr=0.03, eta=0.5, alpha=0.4, gamma=0.9),
                dict(lr=0.02, alpha=0.5, gamma=0.2),
            ],
            marks=SLOW,
        ),
        pytest.param(
            "local-scgdm",
            {"per_task_state": True},
            [dict(lr=0.01, alpha=0.8, gamma=0.7), dict(lr=0.03, eta=0.5, alpha=0.4, gamma=0.9)],
            marks=SLOW,
        ),
        pytest.param(
            "local-moml", {}, [dict(lr=0.01, gamma=0.7), dict(lr=0.02, gamma=0.3)], marks=SLOW
        ),
        pytest.param("local-bsgd", {}, [dict(lr=0.01), dict(lr=0.05)], marks=SLOW),
    ],
)
def test_the_local_compositional_family_per_row(algo, settings, rows):
    """Step sizes and moving-average weights per row; shared u-bar and m-bar in the payload
    (each trial's), per-task inner states u_i in each trial's client states."""
    assert_population_is_each_alone(
        [config("maml-sinusoid", algo, **SINE, **settings, **r) for r in rows]
    )


def test_ditto_step_size_and_lambda_per_row_with_each_trials_personal_models():
    cfgs = [
        config("synthetic", "ditto", **SYN, lr=lr, lam=lam)
        for lr, lam in ((0.05, 0.1), (0.2, 1.0), (0.5, 0.0))
    ]
    assert_population_is_each_alone(cfgs)


def test_qfedavg_step_size_and_q_per_row():
    cfgs = [
        config("synthetic", "qfedavg", **SYN, lr=lr, q=q)
        for lr, q in ((0.05, 0.2), (0.1, 1.0), (0.02, 0.0))
    ]
    assert_population_is_each_alone(cfgs)


@pytest.mark.slow
def test_pdsgd_steps_dual_steps_and_lambda_per_row():
    rows = ((0.05, 0.05, 2.0), (0.1, 0.02, 1.0), (0.02, 0.2, 4.0))
    cfgs = [
        config(
            "synthetic",
            "pdsgd",
            **DRO_SYN | {"lam": lam, "grad_norm_metric": False},
            lr=lr,
            dual_lr=dual,
        )
        for lr, dual, lam in rows
    ]
    assert_population_is_each_alone(cfgs)


def test_a_differing_float_of_the_payload_is_per_row_only_where_declared():
    import torch

    from raycompo.algorithms.cohort import CohortBatch, TrialValues
    from raycompo.engine.population import same_payload_shape, trial_payload

    a, b = {"w": torch.zeros(3), "lr": 0.1, "j": 1}, {"w": torch.ones(3), "lr": 0.2, "j": 1}
    assert same_payload_shape(a, b, frozenset({"lr"}))
    assert not same_payload_shape(
        a, b
    )  # undeclared (e.g. ComFedL's lse centre): the trials run apart
    assert not same_payload_shape(a, {**b, "j": 2}, frozenset({"lr", "j"}))  # an int is a structure
    both = trial_payload([a, b], torch.device("cpu"))
    assert isinstance(both["lr"], TrialValues) and both["j"] == 1
    cb = CohortBatch([], None, torch.device("cpu"))
    cb.trials = torch.tensor([0, 0, 1])
    assert cb.row_value(both["lr"]).tolist() == [0.1, 0.1, 0.2] and cb.row_value(0.5) == 0.5
