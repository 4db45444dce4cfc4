"""Local-SCGDM and its baselines: Algorithm 1's recurrences computed by hand on a small
quadratic MAML problem, the settings checks, and Ray == inline with per-task states."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from raycompo.configuration.config import RunConfig, resolve
from raycompo.engine import run
from raycompo.engine.federation import Federation
from raycompo.errors import ConfigError
from raycompo.tasks.meta import MetaTask, TaskSample
from tests.helpers import assert_rows_close

D, LAM = 3, 0.1


def quadratic(w: torch.Tensor, data) -> torch.Tensor:
    """L(w; (A, b)) = 1/2 ||A w - b||^2."""
    a, b = data
    return 0.5 * ((a @ w - b) ** 2).sum()


def client_problem(cid: int):
    """Client cid's one task: support (A, b), query (C, d); deterministic in cid."""
    g = torch.Generator().manual_seed(100 + cid)
    return [torch.randn(s, generator=g, dtype=torch.float32) for s in ((4, D), (4,), (4, D), (4,))]


@dataclass
class ToySettings:
    n_clients: int = 1
    """Clients, each with one quadratic task."""
    maml_inner_lr: float = LAM
    """lambda."""
    eval_steps: int = 1
    """Adaptation steps of the metrics."""

    def validate(self) -> None:
        pass


@dataclass
class ToyClient:
    client_id: int
    support: tuple
    query: tuple

    def batch(self, gen, size):
        return [TaskSample(self.client_id, self.support, self.query)]  # full batch, always

    def to(self, device):
        return self


class ToyQuadraticMaml(MetaTask):
    """One quadratic task per client (a user-defined task: RunConfig takes the class)."""

    name = "toy-quadratic-maml"
    Settings = ToySettings
    capabilities = frozenset({"composition", "task_ids"})

    @property
    def n_clients(self) -> int:
        return self.settings.n_clients

    def build_module(self) -> nn.Module:
        return nn.Linear(D, 1, bias=False)

    def loss(self, w, data):
        return quadratic(w, data)

    def clients(self, ids):
        out = []
        for i in ids:
            a, b, c, d = client_problem(i)
            out.append(ToyClient(i, (a, b), (c, d)))
        return out

    def evaluate(self, w, client):
        return {"train_loss": float(self.adapted_loss(w, client.support, client.query))}


def by_hand(
    x0: torch.Tensor, n_clients: int, p: int, steps: int, beta, eta, alpha, gamma
) -> list[torch.Tensor]:
    """Algorithm 1 with explicit matrices: g(x) = (I - lam A^T A) x + lam A^T b,
    J = I - lam A^T A, grad f(y) = C^T (C y - d). Returns x-bar after each period."""
    probs = [[t.double() for t in client_problem(k)] for k in range(n_clients)]
    x = [x0.double().clone() for _ in range(n_clients)]
    u, m = [None] * n_clients, [None] * n_clients
    out = []
    for t in range(steps):
        for k, (a, b, c, d) in enumerate(probs):
            jac = torch.eye(D, dtype=torch.float64) - LAM * a.T @ a
            g = jac @ x[k] + LAM * a.T @ b
            if t == 0:
                u[k] = g  # line 3
                m[k] = jac.T @ (c.T @ (c @ u[k] - d))  # lines 4-5
            else:
                u[k] = (1 - gamma * eta) * u[k] + gamma * eta * g  # line 7
                z = jac.T @ (c.T @ (c @ u[k] - d))  # line 8
                m[k] = (1 - alpha * eta) * m[k] + alpha * eta * z  # line 9
            x[k] = x[k] - beta * eta * m[k]  # line 11
        if (t + 1) % p == 0:  # lines 12-16
            for v in (u, m, x):
                mean = sum(v) / n_clients
                v[:] = [mean.clone() for _ in range(n_clients)]
            out.append(x[0].clone())
    return out


@pytest.mark.parametrize("n_clients,p", [(1, 1), (2, 3)])
def test_iterates_equal_algorithm1_by_hand(n_clients, p):
    hyper = {"lr": 0.05, "eta": 0.8, "alpha": 0.6, "gamma": 0.5}
    rounds = 4
    cfg = RunConfig(
        task=ToyQuadraticMaml,
        algo="local-scgdm",
        rounds=rounds,
        backend="inline",
        settings={"n_clients": n_clients, "p": p, "batch_size": None, **hyper},
    )
    fed = Federation(cfg)
    x0 = fed.w.clone()
    got = []
    for _ in range(rounds):
        fed.run_round()
        got.append(fed.w.double())
    want = by_hand(
        x0,
        n_clients,
        p,
        rounds * p,
        beta=hyper["lr"],
        eta=hyper["eta"],
        alpha=hyper["alpha"],
        gamma=hyper["gamma"],
    )
    for r, (a, b) in enumerate(zip(got, want)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=f"round {r + 1}")
    assert not torch.allclose(got[-1], x0.double())
    # The server state is the averaged momentum and inner estimate (lines 13-14).
    assert set(fed.state) == {"m", "u"}


def test_scgd_with_gamma_one_is_bsgd():
    """SCGD's inner state with weight 1 on the new value is the plug-in gradient of BSGD."""
    base = {"n_clients": 2, "p": 2, "batch_size": None, "lr": 0.05}
    runs = {}
    for algo, extra in (("local-scgd", {"gamma": 1.0}), ("local-bsgd", {})):
        fed = Federation(
            RunConfig(
                task=ToyQuadraticMaml,
                algo=algo,
                rounds=3,
                backend="inline",
                settings={**base, **extra},
            )
        )
        for _ in range(3):
            fed.run_round()
        runs[algo] = fed.w
    torch.testing.assert_close(runs["local-scgd"], runs["local-bsgd"])


def test_scgdm_momentum_changes_the_path():
    """alpha*eta < 1 keeps a memory of old gradients: iterates differ from SCGD's."""
    base = {"n_clients": 1, "p": 1, "batch_size": None, "lr": 0.05, "gamma": 0.5}
    ws = {}
    for algo, extra in (("local-scgd", {}), ("local-scgdm", {"alpha": 0.5, "eta": 1.0})):
        fed = Federation(
            RunConfig(
                task=ToyQuadraticMaml,
                algo=algo,
                rounds=3,
                backend="inline",
                settings={**base, **extra},
            )
        )
        for _ in range(3):
            fed.run_round()
        ws[algo] = fed.w
    assert not torch.allclose(ws["local-scgd"], ws["local-scgdm"])


@pytest.mark.parametrize(
    "algo,settings,message",
    [
        ("local-scgdm", {"gamma": 0.7, "eta": 1.5}, "gamma*eta"),
        ("local-scgdm", {"gamma": 1.0, "eta": 1.0}, "gamma*eta"),
        ("local-scgdm", {"alpha": 1.0}, "alpha*eta"),
        ("local-scgdm", {"alpha": -0.1}, "alpha*eta"),
        ("local-scgdm", {"p": 0}, "p (communication period)"),
        ("local-scgd", {"gamma": 0.0}, "gamma"),
        ("local-moml", {"gamma": 1.5}, "gamma"),
        ("local-bsgd", {"lr": 0.0}, "lr"),
    ],
)
def test_bad_settings_are_rejected(algo, settings, message):
    with pytest.raises(
        ConfigError, match=message.replace("*", r"\*").replace("(", r"\(").replace(")", r"\)")
    ):
        resolve(RunConfig(task="maml-sinusoid", algo=algo, settings=settings, backend="inline"))


@pytest.mark.parametrize(
    "algo,extra,averaged",
    [("local-moml", {}, set()), ("local-scgdm", {"per_task_state": True}, {"m"})],
)
def test_per_task_states_persist_across_rounds(algo, extra, averaged):
    cfg = RunConfig(
        task="maml-sinusoid",
        algo=algo,
        rounds=2,
        backend="inline",
        settings={**SMALL_SINE, "p": 2, "batch_size": None, **extra},
    )
    fed = Federation(cfg)
    fed.run_round()
    first = fed.client_state(0)
    fed.run_round()
    second = fed.client_state(0)
    owned = len(fed.pool.host.clients[0].task_ids)
    slots = fed.pool.host.task.max_tasks_per_client  # 25 tasks over 2 clients: 13
    # one state per task, a row of u_task by the client's own tasks (all sampled: batch_size None) ...
    for state in (first, second):
        assert state["u_task"].shape == (slots, first["u_task"].shape[1])
        assert state["u_seen"].tolist() == [True] * owned + [False] * (slots - owned)
        assert not state["u_task"][owned:].any()
    # ... kept by the client and updated round after round
    assert all(not torch.equal(first["u_task"][j], second["u_task"][j]) for j in range(owned))
    assert set(fed.state) == averaged  # per-task states are never averaged; SCGDM's m is


def test_per_task_state_needs_task_ids(tmp_path):
    from tests.omniglot_data import write_omniglot

    write_omniglot(tmp_path, alphabets=3, characters=5, images=4, size=8)
    cfg = RunConfig(
        task="maml-omniglot",
        algo="local-moml",
        rounds=1,
        backend="inline",
        data_dir=str(tmp_path),
        settings={
            "n_train_alphabets": 1,
            "n_val_alphabets": 1,
            "n_test_alphabets": 1,
            "k_query": 2,
        },
    )
    with pytest.raises(ConfigError, match="per task"):
        Federation(cfg)


# A small sinusoid federation for the backend checks: 2 clients, a thin network.
SMALL_SINE = {"n_clients": 2, "hidden": 8, "val_tasks": 10, "eval_query": 20}


@pytest.mark.slow
@pytest.mark.parametrize(
    "algo,per_actor,extra",
    # two host actors, then one hosting both clients
    [("local-scgdm", 1, {"per_task_state": False}), ("local-moml", 2, {})],
)
def test_ray_equals_inline(ray_session, algo, per_actor, extra):
    """Per-task states (MOML) and averaged m, u (SCGDM) live in the host actors across rounds."""
    cfg = RunConfig(
        task="maml-sinusoid",
        algo=algo,
        rounds=2,
        backend="inline",
        settings={**SMALL_SINE, "p": 2, "batch_size": 2, **extra},
    )
    inline = run(cfg)
    remote = run(
        dataclasses.replace(cfg, backend="ray", clients_per_actor=per_actor, cpus_per_actor=0.5)
    )
    assert inline.status == remote.status == "completed"
    assert_rows_close(inline.rows, remote.rows, tol=1e-6)
    assert inline.rows[-1]["train_loss"] != inline.rows[0]["train_loss"]


@pytest.mark.parametrize("extra,per_task,averaged", [({}, True, {"m"}), ({"per_task_state": False}, False, {"m", "u"})])
def test_sinusoid_defaults_to_per_task_states(extra, per_task, averaged):
    """Section 5.1 runs Local-SCGDM with one inner state per task: the task's default;
    per_task_state=false gives Algorithm 1's shared, averaged u."""
    cfg = RunConfig(task="maml-sinusoid", algo="local-scgdm", rounds=1, backend="inline",
                    settings={**SMALL_SINE, "p": 1, "batch_size": 1, **extra})
    assert resolve(cfg).algo_settings.per_task_state is per_task
    fed = Federation(cfg)
    fed.run_round()
    assert set(fed.state) == averaged
    state = fed.client_state(0)
    assert ("u_seen" in state) is per_task and isinstance(state["u_task"], torch.Tensor) is per_task


PER_TASK = {**SMALL_SINE, "n_clients": 3, "p": 2, "batch_size": 2}
"""Per-task states on 3 clients of 9, 8 and 8 tasks (rows of 9: the most one client owns)."""


@pytest.mark.parametrize("vectorize", ["off", "on"])
def test_per_task_states_of_an_earlier_release_resume_to_the_same_numbers(vectorize):
    """A checkpoint of release 0.1.1 holds per-task states as a dict by task id (`u_task`, no
    `u_seen`): restored, they are read as the same rows, and the run goes on exactly as one
    that was never interrupted."""
    cfg = RunConfig(task="maml-sinusoid", algo="local-moml", rounds=4, backend="inline", vectorize=vectorize,
                    settings=PER_TASK)
    whole = Federation(cfg)
    whole.run_rounds(4)
    first = Federation(cfg)
    first.run_rounds(2)
    ckpt = first.checkpoint()
    for cid, state in ckpt["client_states"].items():  # as 0.1.1 wrote them
        ids = first.pool.host.clients[cid].task_ids
        rows, seen = state.pop("u_task"), state.pop("u_seen")
        state["u_task"] = {tid: rows[j].clone() for j, tid in enumerate(ids) if seen[j]}
        assert state["u_task"]  # each client sampled some of its tasks
    second = Federation(cfg)
    second.restore(ckpt)
    second.run_rounds(2)
    assert torch.equal(second.w, whole.w)
    for cid, state in whole.pool.client_states().items():
        again = second.pool.client_states()[cid]
        assert torch.equal(state["u_task"], again["u_task"]) and torch.equal(state["u_seen"], again["u_seen"])


def test_a_chunks_per_task_states_are_read_and_written_as_stacked_rows(monkeypatch):
    """Vectorized, a chunk's per-task states are (k, T, d) rows read from the state store at
    once from round 2 on, and the run's model and states equal the per-client run's."""
    from raycompo.engine.state_store import StateStore

    reads = []
    get_many = StateStore.get_many

    def counted(self, ids):
        got = get_many(self, ids)
        reads.append(got is not None and "u_task" in got[0])
        return got

    cfg = RunConfig(task="maml-sinusoid", algo="local-scgdm", rounds=3, backend="inline", settings=PER_TASK)
    ref = Federation(dataclasses.replace(cfg, vectorize="off"))
    ref.run_rounds(3)
    monkeypatch.setattr(StateStore, "get_many", counted)
    vec = Federation(dataclasses.replace(cfg, vectorize="on"))
    vec.run_rounds(3)
    assert any(reads)
    torch.testing.assert_close(vec.w, ref.w, rtol=1e-5, atol=1e-6)
    for cid, state in ref.pool.client_states().items():
        got = vec.pool.client_states()[cid]
        assert list(got) == list(state) and torch.equal(got["u_seen"], state["u_seen"])
        torch.testing.assert_close(got["u_task"], state["u_task"], rtol=1e-5, atol=1e-6)
