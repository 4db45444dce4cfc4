"""raycompo.plot's lines (issue 33): runs that differ by anything of their configuration but
the seed (the simulated system, the budget, any other RunConfig field) are separate lines,
each named by what tells it apart; only seeds are averaged."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import raycompo

SETTINGS = {"n_clients": 20, "clients_per_round": 5, "tau": 2, "max_samples": 60}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lines")
    made = {
        "sync": dict(system="mobile-sync"), "fastest": dict(system="mobile-fastest"),
        "sync-budget": dict(system="mobile-sync", budget={"samples": 2000}),
        "s0": dict(), "s1": dict(seed=1), "sampled": dict(eval_clients=10),
    }
    for name, kw in made.items():
        raycompo.run("synthetic", "fedavg", rounds=3, settings=SETTINGS, out=root / name, **kw)
    return root


def legend(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def drawn(fig) -> dict[str, np.ndarray]:
    return {ln.get_label(): ln.get_ydata() for ln in fig.axes[0].get_lines()}


def test_runs_on_two_systems_are_two_lines_named_by_their_system(runs):
    fig = raycompo.plot([runs / "sync", runs / "fastest"], "val_acc", x="sim_time")
    assert sorted(legend(fig)) == ["FedAvg (system=mobile-fastest)", "FedAvg (system=mobile-sync)"]
    for name in ("sync", "fastest"):  # each line is its own run's values, not a mean of both
        own = pd.read_csv(runs / name / "metrics.csv")["val_acc"].to_numpy()
        np.testing.assert_array_equal(drawn(fig)[f"FedAvg (system=mobile-{name})"], own)


def test_a_budget_tells_lines_apart(runs):
    fig = raycompo.plot([runs / "sync", runs / "sync-budget"], "val_acc")
    assert sorted(legend(fig)) == ["FedAvg (budget samples=2000)", "FedAvg (no budget)"]


def test_any_other_config_field_tells_lines_apart_and_seeds_are_averaged(runs):
    """eval_clients stands for any RunConfig field: none is named in plot.py."""
    fig = raycompo.plot([runs / "s0", runs / "s1", runs / "sampled"], "val_acc")
    assert sorted(legend(fig)) == ["FedAvg (eval_clients=10)", "FedAvg (no eval_clients), 2 seeds"]
    a, b = (pd.read_csv(runs / s / "metrics.csv")["val_acc"].to_numpy() for s in ("s0", "s1"))
    np.testing.assert_allclose(drawn(fig)["FedAvg (no eval_clients), 2 seeds"], (a + b) / 2)


def test_the_same_seed_twice_is_not_called_two_seeds(runs, tmp_path):
    import shutil

    shutil.copytree(runs / "s0", tmp_path / "copy")
    fig = raycompo.plot([runs / "s0", tmp_path / "copy"], "val_acc")
    assert legend(fig) == ["FedAvg, 2 runs (1 seed)"]
