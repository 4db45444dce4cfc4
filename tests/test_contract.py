"""The engine/algorithm contract (issue 13): declared phases, capabilities checked at
resolve(), settings without collisions, and the state the engine owns (issue 12)."""

from __future__ import annotations

import dataclasses

import pytest

import raycompo.configuration.plugins as task_registry
from raycompo.algorithms.base import Algorithm, client_phase
from raycompo.configuration.config import RunConfig, resolve, setting_owners
from raycompo.engine import run
from raycompo.engine.federation import Federation, RoundCtx
from raycompo.errors import ConfigError
from tests.helpers import assert_rows_close, small_config


def test_an_undeclared_phase_fails_at_the_driver_naming_the_declared_ones():
    fed = Federation(small_config("fedavg", rounds=1))
    with pytest.raises(ConfigError, match="no client phase 'lcoal'.*evaluate, local"):
        RoundCtx(fed, 0).map("lcoal", [0], {"w": fed.w})


def test_phases_are_collected_from_declarations_and_mixins():
    class Probe(Algorithm):
        @client_phase("twice")
        def client_twice(self, c, state, payload):
            return {"x": 2 * payload["x"]}, {**state, "n": state.get("n", 0) + 1}

    assert set(Probe.phases) == {"evaluate", "twice"}
    from raycompo.configuration.plugins import load

    assert load("algorithm", "fedmaml").phases["evaluate"] == "client_evaluate"  # from the mixin


@pytest.mark.parametrize("task,algo,message", [
    ("maml-sinusoid", "comfedl", "needs a task with classification"),
    ("toy-co", "ditto", "needs a task with classification"),
    ("dro-mnist5k", "local-scgdm", "needs a compositional"),
    ("maml-sinusoid", "feddro", "global composition or per-sample losses"),
])
def test_a_pair_that_does_not_fit_fails_at_resolve(task, algo, message):
    with pytest.raises(ConfigError, match=message):
        resolve(RunConfig(task=task, algo=algo, backend="inline"))


def test_no_settings_key_belongs_to_a_task_and_an_algorithm():
    owners = setting_owners()
    assert owners["maml_inner_lr"] == "task" and owners["inner_lr"] == "algo"
    assert owners["eval_chunk"] == "task" and owners["phi_chunk"] == "algo"


def test_a_colliding_key_is_an_error(monkeypatch):
    @dataclasses.dataclass
    class Clash:
        lr: float = 0.1

        def validate(self):
            pass

    real = task_registry.list_tasks()
    fake = type("Clashing", (), {"Settings": Clash})
    monkeypatch.setattr(task_registry, "list_tasks", lambda: {**real, "clashing": fake})
    with pytest.raises(ConfigError, match="'lr' is declared by"):
        setting_owners()


def test_namespaced_and_renamed_keys(capsys):
    base = {"n_clients": 4, "big_client_size": 60, "small_client_size": 20, "val_per_client": 40}
    r = resolve(RunConfig(task="dro-mnist5k", algo="fedavg", backend="inline", settings={**base, "algo.lr": 0.3}))
    assert r.algo_settings.lr == 0.3
    with pytest.raises(ConfigError, match="not a setting of the task"):
        resolve(RunConfig(task="dro-mnist5k", algo="fedavg", backend="inline", settings={"task.lr": 0.3}))
    r = resolve(RunConfig(task="maml-sinusoid", algo="local-scgdm", backend="inline", settings={"inner_lr": 0.01}))
    assert r.task_settings.maml_inner_lr == 0.01
    assert "now 'maml_inner_lr'" in capsys.readouterr().err


def test_worst_columns_follow_the_task_declaration():
    row = run(small_config("fedavg", rounds=1)).rows[-1]
    assert row["val_acc_worst"] <= row["val_acc"] and row["train_loss_worst"] >= row["train_loss"]


def test_spilling_client_state_changes_no_number():
    """Ditto's personal models through a state budget far below their size (most are on
    disk between rounds) give the rows of the in-memory run."""
    cfg = RunConfig(task="synthetic", algo="ditto", rounds=4, backend="inline", eval_every=2, eval_clients=8,
                    settings={"n_clients": 200, "clients_per_round": 10})
    free = run(cfg)
    tight = Federation(dataclasses.replace(cfg, state_memory_gb=2e-6))
    for _ in range(4):
        tight.run_round()
    assert tight.pool.host.stats()["state_spilled_bytes"] > 0
    spilled = run(dataclasses.replace(cfg, state_memory_gb=2e-6))
    assert_rows_close(free.rows, spilled.rows, tol=0)


def test_eval_clients_scores_a_seeded_sample():
    cfg = RunConfig(task="synthetic", algo="fedavg", rounds=2, backend="inline", eval_clients=5,
                    settings={"n_clients": 1000, "clients_per_round": 10})
    fed = Federation(cfg)
    first = fed.eval_clients()
    assert len(first) == 5 and first == Federation(cfg).eval_clients()
    fed.round = 1
    assert fed.eval_clients() != first  # a new sample each evaluation round
