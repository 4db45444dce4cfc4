"""Vectorized cohorts (raycompo/configuration/vectorize.py, algorithms/cohort.py, engine/batched.py): a
host's clients run as one batched computation and give the per-client path's numbers to
1e-5 (float32 rounding of a batched product and a masked mean; see algorithms/cohort.py),
with the same per-client seeded draws, ragged clients, per-client state, chunks of any
size, and the same numbers on the Ray backend."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

import raycompo
from raycompo.algorithms.cohort import CohortBatch, picks_to
from raycompo.configuration.config import RunConfig, resolve
from raycompo.configuration.vectorize import resolved_plan, vectorized_algorithms
from raycompo.engine.federation import Federation
from raycompo.engine.host import ClientCtx
from raycompo.errors import ConfigError
from raycompo.run import main as run_main
from tests.helpers import SMALL_DRO, assert_client_states_close

TOL = 1e-5

# Synthetic: clients of 2..40 samples with batch 10, so several are smaller than a batch
# (ragged, padded); dro-mnist5k: the paper's logistic regression; an MLP on the user-data task.
SYN = {"n_clients": 12, "min_samples": 2, "max_samples": 40, "clients_per_round": 7, "tau": 3}
DRO_SYN = {"n_clients": 12, "min_samples": 2, "max_samples": 40, "sync_every": 3, "batch_size": 10, "lam": 2.0}
CASES = [
    ("dro-mnist5k", "fedavg", {}),
    ("synthetic", "fedavg", SYN),
    ("dro-mnist5k", "comfedl", {"gamma": 1.0}),
    ("synthetic", "comfedl", {**SYN, "normalizer": "lse", "gamma": 0.5}),
    ("dro-mnist5k", "comfedl", {"normalizer": "lse"}),
    ("synthetic", "ditto", SYN),
    ("dro-mnist5k", "ditto", {"personal_steps": 2}),
    ("synthetic", "qfedavg", {**SYN, "q": 1.0}),
    ("dro-mnist5k", "drfl", {}),
    ("synthetic", "drfl", SYN),
    # FedDRO: y exchanged every step, the hybrid estimate (8), h for the chi-square objectives
    ("dro-mnist5k", "feddro", {"sync_every": 3, "beta": 0.5, "lr": 0.1}),
    ("synthetic", "feddro", {**DRO_SYN, "objective": "chi2-dro", "beta": 0.3}),
    ("feddro-digits-st", "feddro", {"sync_every": 2, "objective": "chi2", "lam": 5.0, "beta": 1.0}),
    ("synthetic", "fedavg-co", {**DRO_SYN, "case": 1}),
    ("dro-mnist5k", "fedavg-co", {"sync_every": 2, "case": 2, "objective": "chi2-dro", "lr": 0.1}),
    ("synthetic", "mbsgd-co", {**DRO_SYN, "objective": "chi2-dro"}),
    ("synthetic", "feddro", {**DRO_SYN, "batch_size": None, "beta": 0.7}),  # full local data, ragged
    ("synthetic", "fedavg-co", {**DRO_SYN, "batch_size": None, "case": 2}),
    ("synthetic", "fastdro", {**DRO_SYN, "lr": 0.05}),  # per-client losses out, weights q in
    ("dro-mnist5k", "fastdro", {"objective": "chi2-dro", "lr": 0.1}),
    ("synthetic", "fastdro", {**DRO_SYN, "geometry": "cvar", "batch_size": None}),
    ("synthetic", "pdsgd", {**DRO_SYN, "lr": 0.05, "dual_lr": 0.05}),  # per-sample dual weights in the state
    ("dro-mnist5k", "pdsgd", {"batch_size": None, "lr": 0.1}),
    # the Local-SCGD family: MAML rows under vmap, per-task inner states, averaged m and u
    ("maml-sinusoid", "local-scgdm", {}),
    ("maml-sinusoid", "local-scgdm", {"per_task_state": False, "clients_per_round": 3}),
    ("maml-sinusoid", "local-scgd", {"clients_per_round": 4}),
    ("maml-sinusoid", "local-moml", {}),
    ("maml-sinusoid", "local-bsgd", {"first_order": True}),
    ("maml-sinusoid", "local-scgd", {"batch_size": None, "first_order": True}),  # every task of a client
]


def federation(task: str, algo: str, settings: dict, vectorize: str, **cfg) -> Federation:
    extra = SMALL_DRO if task == "dro-mnist5k" else {}
    return Federation(RunConfig(task=task, algo=algo, rounds=4, settings={**extra, **settings}, backend="inline",
                                vectorize=vectorize, **cfg))


def run_rounds(fed: Federation, rounds: int = 4) -> Federation:
    for _ in range(rounds):
        fed.run_round()
    return fed


@pytest.mark.parametrize("task,algo,settings", CASES)
def test_vectorized_equals_per_client(task, algo, settings):
    ref = run_rounds(federation(task, algo, settings, "off"))
    vec = run_rounds(federation(task, algo, settings, "on"))
    assert ref.pool.host.batched == set() and vec.pool.host.batched  # each path ran what it says
    assert not torch.equal(ref.w, federation(task, algo, settings, "off").w)  # it trained
    torch.testing.assert_close(vec.w, ref.w, rtol=TOL, atol=TOL)
    for key, value in ref.state.items():  # server state (DRFL's lambda)
        torch.testing.assert_close(vec.state[key], value, rtol=TOL, atol=TOL)
    # per-client state (Ditto's personal models, PDSGD's dual weights)
    assert_client_states_close(ref.pool.client_states(), vec.pool.client_states(), TOL)


@pytest.mark.parametrize("task,algo,settings", [
    ("synthetic", "fedavg", SYN),  # ragged clients
    ("dro-mnist5k", "comfedl", {"gamma": 1.0}),
    ("synthetic", "gcivr", {"n_clients": 12, "min_samples": 2, "max_samples": 40}),  # training per client
])
def test_batched_evaluation_equals_per_client(task, algo, settings, monkeypatch):
    """The evaluate phase as one forward pass per chunk (Task.batched_evaluate) gives every
    client's metrics, hence the row's means and worst clients, to 1e-6; also in chunks of a
    few clients (a small budget), and with some clients on their own tensors and the others
    concatenated in one chunk (EVAL_OWN_BYTES between their sizes)."""
    import raycompo.tasks.base as task_base

    ref = run_rounds(federation(task, algo, settings, "off"), 2)
    ref_clients = ref.pool.map("evaluate", ref.round, {c: 1 for c in ref.eval_clients()}, {"w": ref.w}, False)
    for budget, own in ((512.0, task_base.EVAL_OWN_BYTES), (0.1, task_base.EVAL_OWN_BYTES), (512.0, 4000)):
        monkeypatch.setattr(task_base, "EVAL_OWN_BYTES", own)
        vec = federation(task, algo, settings, "auto", vectorize_memory_mb=budget)
        vec.w = ref.w
        assert "evaluate" in vec.pool.host.batched
        per_client = vec.pool.map("evaluate", ref.round, {c: 1 for c in ref.eval_clients()}, {"w": ref.w}, False)
        assert per_client.keys() == ref_clients.keys()
        for cid, metrics in ref_clients.items():
            assert list(per_client[cid]) == list(metrics)  # the same keys, in the same order
            for key, value in metrics.items():
                assert abs(per_client[cid][key] - value) <= 1e-6 * max(1.0, abs(value)), (cid, key)
        row, ref_row = vec.evaluate(), ref.evaluate()
        assert list(row) == list(ref_row)
        for key, value in ref_row.items():
            assert abs(row[key] - value) <= 1e-6 * max(1.0, abs(value)), key
    # an algorithm that evaluates in its own way (Ditto: the personal models) keeps it
    assert "evaluate" not in federation("synthetic", "ditto", SYN, "on").pool.host.batched


def test_draws_are_the_per_client_draws():
    """The batch of client i at step t holds exactly the rows `ClientData.batch(c.rng(t), b)`
    draws; a client smaller than the batch gets all its rows, in order, and padding."""
    r = resolve(RunConfig(task="synthetic", algo="fedavg", settings=SYN, backend="inline"))
    task = r.make_task()
    ctxs = [ClientCtx(cid, d, round=3, seed=0) for cid, d in enumerate(task.clients(list(range(12))))]
    sizes = [c.data.num_samples for c in ctxs]
    assert min(sizes) < 10 < max(sizes)  # ragged for batch 10
    cb = CohortBatch(ctxs, task, torch.device("cpu"))
    for step in (0, 1):
        b = cb.batch(step, 10, stream=1)
        for i, c in enumerate(ctxs):
            x, y = c.data.batch(c.rng(step, 1), 10)
            n = len(y)
            assert int(b.count[i]) == n and b.mask[i].sum() == n and bool(b.mask[i, :n].all())
            assert torch.equal(b.x[i, :n], x) and torch.equal(b.y[i, :n], y)
    w = torch.randn(len(ctxs), task.model.dim)
    losses = cb.losses(w, b)
    for i, c in enumerate(ctxs):
        x, y = c.data.batch(c.rng(1, 1), 10)
        torch.testing.assert_close(losses[i], task.loss(w[i], (x, y)), rtol=1e-6, atol=1e-6)


def test_drawn_indices_reach_the_data_device_in_one_copy_in_client_order():
    """`picks_to` (the GPU path of `CohortBatch.batch`): on the data's device nothing moves;
    elsewhere every drawn client gets a tensor on that device and the whole-data clients
    (None) stay None, in their places. The "meta" device stands in for a GPU here: it keeps
    devices and shapes but no values, so the values' order is not checked (no GPU here)."""
    picks = [torch.tensor([3, 1]), None, torch.tensor([0, 2]), None, torch.tensor([4, 5])]
    assert picks_to(picks, torch.device("cpu")) is picks
    moved = picks_to(picks, torch.device("meta"))
    assert [m is None for m in moved] == [p is None for p in picks]
    assert all(m.device.type == "meta" and m.shape == p.shape for m, p in zip(moved, picks) if p is not None)


@pytest.mark.parametrize("task,algo,settings,tiny", [
    ("synthetic", "ditto", SYN, 0.1),  # MB: 3 clients of the synthetic task's model a chunk
    ("synthetic", "feddro", {**DRO_SYN, "beta": 0.5}, 0.1),  # 3 a chunk; the scratch kept across step calls
    ("maml-sinusoid", "local-scgdm", {}, 0.6),  # MAML rows: 3 clients a chunk
])
def test_chunks_give_the_same_numbers(task, algo, settings, tiny):
    """A memory budget that fits only a few clients runs the cohort as several chunks."""
    from raycompo.engine.batched import clients_per_chunk

    one = run_rounds(federation(task, algo, settings, "on"), 2)
    many = run_rounds(federation(task, algo, settings, "on", vectorize_memory_mb=tiny), 2)
    host = many.pool.host
    assert 1 < clients_per_chunk(host, 0) < 5  # the cohort (5 to 12 clients) is split into chunks of several
    torch.testing.assert_close(many.w, one.w, rtol=1e-6, atol=1e-6)
    for key, value in one.state.items():
        if value is not None:
            torch.testing.assert_close(many.state[key], value, rtol=1e-6, atol=1e-6)


def test_plan_and_errors():
    assert {"fedavg", "comfedl", "ditto", "qfedavg", "drfl", "feddro", "fedavg-co", "mbsgd-co", "fastdro", "pdsgd",
            "local-scgdm", "local-scgd", "local-moml", "local-bsgd"} <= set(vectorized_algorithms())
    auto = resolved_plan(resolve(RunConfig(task="dro-mnist5k", algo="comfedl", backend="inline")))
    assert auto.phases == ("evaluate", "local", "robust_value")
    # auto falls back to per client with the reason; on is an error that gives it
    x, y = torch.randn(200, 5), torch.arange(200) % 3
    custom = raycompo.task_from_arrays(x, y, n_clients=4, loss=torch.nn.functional.cross_entropy, name="custom-loss")
    plain = raycompo.task_from_arrays(x, y, n_clients=4, model="mlp", name="plain-ce")
    assert resolved_plan(resolve(RunConfig(task=plain, algo="fedavg", backend="inline"))).phases == ("evaluate", "local")
    for task, algo, why in [
        ("fair-synth", "feddro", "solves the task's own composition, which has no batched form"),
        ("dro-mnist5k", "gcivr", "algorithm gcivr has no batched training phases"),
        ("dro-mnist5k", "comfedl-maml", "algorithm comfedl-maml has no batched training phases"),
        (custom, "fedavg", "uses the loss function it was given"),
    ]:
        cfg = RunConfig(task=task, algo=algo, backend="inline")
        plan = resolved_plan(resolve(cfg), resolve(cfg).make_task())
        assert "local" not in plan.phases and why in plan.why_not
        # the evaluation batches on its own where the algorithm keeps the base one and the task can
        assert plan.phases == (("evaluate",) if algo == "gcivr" else ())
        with pytest.raises(ConfigError, match="--vectorize on: .*" + why.split()[-1] + ".*use --vectorize auto"):
            resolve(dataclasses.replace(cfg, vectorize="on"))
    from raycompo.configuration.plugins import list_algorithms, list_tasks
    from raycompo.configuration.vectorize import blocker

    scgdm = list_algorithms()["local-scgdm"]
    why = blocker(scgdm, scgdm.Settings(), list_tasks()["maml-omniglot"])  # Omniglot's data is not here: the class alone
    assert "maml-omniglot: its meta-batches do not declare vmap_meta_batches" in why
    assert blocker(scgdm, scgdm.Settings(), list_tasks()["maml-sinusoid"]) is None
    with pytest.raises(ConfigError, match="vectorize must be one of auto, on, off"):
        resolve(RunConfig(vectorize="yes", backend="inline"))
    with pytest.raises(ConfigError, match="outer_batch_size"):
        resolve(RunConfig(algo="comfedl", settings={"outer_batch_size": 8}, vectorize="on", backend="inline"))


def test_config_json_records_mode_and_phases(tmp_path, capsys):
    out = tmp_path / "run"
    code = run_main(["--backend", "inline", "--algo", "fedavg", "--rounds", "1", "--quiet", "--out", str(out),
                     "--set", *[f"{k}={v}" for k, v in SMALL_DRO.items()], "--vectorize", "off"])
    assert code == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["vectorize"] == "off" and cfg["vectorized"]["phases"] == []
    r = raycompo.run("dro-mnist5k", "fedavg", rounds=1, settings=SMALL_DRO)
    assert r.config["vectorize"] == "auto" and r.config["vectorized"] == {"phases": ["evaluate", "local"]}
    assert run_main(["--backend", "inline", "--algo", "feddro", "--task", "fair-synth", "--rounds", "1",
                     "--vectorize", "on"]) == 2
    assert "--vectorize on: feddro on task fair-synth solves the task's own composition" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("algo,settings", [
    ("ditto", SYN),  # per-client personal models
    ("feddro", {**DRO_SYN, "beta": 0.5}),  # the y exchange every step; the evaluation batched too
    ("pdsgd", {**DRO_SYN, "dual_lr": 0.05}),  # stacked dual weights; round 1's log-masses one by one (map_each)
])
def test_ray_vectorized_equals_inline(ray_session, algo, settings):
    """Hosts of 3 clients each run their own chunks; the rows equal the inline backend's."""
    from raycompo.engine import run
    from tests.helpers import assert_rows_close

    cfg = RunConfig(task="synthetic", algo=algo, rounds=3, settings=settings, backend="inline", vectorize="on")
    inline = run(cfg)
    remote = run(dataclasses.replace(cfg, backend="ray", clients_per_actor=3, cpus_per_actor=0.5))
    reference = run(dataclasses.replace(cfg, vectorize="off"))
    assert_rows_close(inline.rows, remote.rows, tol=1e-6)
    assert_rows_close(reference.rows, remote.rows, tol=TOL)


class MyProx(raycompo.Algorithm):
    """A user's algorithm with a batched phase, written as docs/running.md describes:
    FedAvg's average of tau proximal local steps grad f_i(w) + mu (w - w_s)."""

    name = "my-prox"
    mu = 0.5

    def server_round(self, ctx, w, state):
        sums = ctx.map("local", ctx.sample(self.s.cohort_size(ctx.n_clients)), {"w": w})
        return sums["w"] / sums["count"], state

    @raycompo.client_phase("local")
    def client_local(self, c, state, payload):
        w0 = payload["w"]
        w = raycompo.local_sgd(c, w0, self.s.tau, self.s.lr, self.s.batch_size,
                               lambda w, b, t: self.loss_grad(w, b) + self.mu * (w - w0))
        return {"w": w, "count": 1.0}, state

    @raycompo.batched_phase("local")
    def batched_local(self, cb: raycompo.CohortBatch, states, payload):
        w0 = payload["w"]
        w = cb.local_sgd(cb.broadcast(w0), self.s.tau, self.s.lr, self.s.batch_size,
                         lambda w, b, t: cb.loss_grad(w, b)[0] + self.mu * (w - w0))
        return {"w": w, "count": [1.0] * cb.k}, states


class MyProxChild(MyProx):
    """Changes the local step: the parent's batched form must not run for it."""

    name = "my-prox-child"
    mu = 2.0

    @raycompo.client_phase("local")
    def client_local(self, c, state, payload):
        return super().client_local(c, state, payload)


def test_a_users_batched_phase_through_the_public_api():
    settings = {**SYN, "lr": 0.05}
    ref = raycompo.run("synthetic", MyProx, rounds=3, settings=settings, vectorize="off")
    vec = raycompo.run("synthetic", MyProx, rounds=3, settings=settings, vectorize="on")
    assert vec.config["vectorized"] == {"phases": ["evaluate", "local"]}
    assert_rows_close_tol(ref.rows, vec.rows)
    child = raycompo.run("synthetic", MyProxChild, rounds=1, settings=settings)
    assert child.config["vectorized"]["phases"] == ["evaluate"]  # its own local step runs per client
    assert "my-prox-child has no batched training phases" in child.config["vectorized"]["why_not"]


def assert_rows_close_tol(a, b):
    from tests.helpers import assert_rows_close

    assert_rows_close(a, b, tol=TOL)


@pytest.mark.parametrize("model", ["logistic", "mlp"])
def test_hand_written_pullback_equals_autograd(model):
    """ClassificationTask.batched_loss_grad's written-out cross-entropy gradient, pulled
    back by the model's batched_pullback, equals autograd through batched_losses, and each
    client's row equals the per-client gradient (ragged batches, a per-client scale)."""
    from raycompo.tasks.base import Task

    x, y = torch.randn(300, 7), torch.arange(300) % 4
    cls = raycompo.task_from_arrays(x, y, n_clients=5, model=model, partition="dirichlet", name=f"pull-{model}")
    task = resolve(RunConfig(task=cls, algo="fedavg", backend="inline")).make_task()
    ctxs = [ClientCtx(cid, d, round=0, seed=1) for cid, d in enumerate(task.clients(list(range(5))))]
    cb = CohortBatch(ctxs, task, torch.device("cpu"))
    batch = cb.batch(0, 40)
    assert batch.mask.sum() < batch.mask.numel()  # some client has fewer than 40 samples
    w = torch.randn(5, task.model.dim) * 0.3
    scale = lambda f: torch.exp(f)  # noqa: E731
    g, f = task.batched_loss_grad(w, batch, scale)
    g_ref, f_ref = Task.batched_loss_grad(task, w, batch, scale)
    torch.testing.assert_close(f, f_ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(g, g_ref, rtol=1e-5, atol=1e-6)
    for i, c in enumerate(ctxs):
        xb, yb = c.data.batch(c.rng(0), 40)
        wi = w[i].clone().requires_grad_(True)
        (gi,) = torch.autograd.grad(task.loss(wi, (xb, yb)), wi)
        torch.testing.assert_close(g[i], torch.exp(f[i]) * gi, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("objective", ["kl", "chi2", "chi2-dro"])
@pytest.mark.parametrize("model", ["logistic", "mlp"])
def test_batched_dro_parts_equal_per_client(objective, model):
    """FedDRO's batched parts (problems/global_batched.py): each client's g_k, Jacobian and
    grad h_k from one batched pass of per-sample losses equal the per-client torch.func
    ones (ragged batches), and the written-out per-sample gradient equals autograd's."""
    from raycompo.algorithms.co_common import GlobalCOSettings
    from raycompo.algorithms.feddro import FedDRO
    from raycompo.problems import global_batched
    from raycompo.problems.global_composition import g_value_and_jacobian, h_grad
    from raycompo.tasks.base import Task

    x, y = torch.randn(300, 7), torch.arange(300) % 4
    cls = raycompo.task_from_arrays(x, y, n_clients=5, model=model, partition="dirichlet", name=f"dro-{model}")
    task = resolve(RunConfig(task=cls, algo="feddro", backend="inline")).make_task()
    problem = FedDRO(GlobalCOSettings(objective=objective, lam=3.0), task).problem
    ctxs = [ClientCtx(cid, d, round=0, seed=1) for cid, d in enumerate(task.clients(list(range(5))))]
    cb = CohortBatch(ctxs, task, torch.device("cpu"))
    b_g, b_h = cb.batch(0, 40), cb.batch(0, 40, stream=1)
    assert b_g.mask.sum() < b_g.mask.numel()  # some client has fewer than 40 samples
    w = torch.randn(5, task.model.dim) * 0.3
    g, jac, gh = global_batched.local_parts(task, problem, w, b_g, b_h if problem.has_h else None)
    assert (gh is None) == (objective == "kl")
    for i, c in enumerate(ctxs):
        value, jac_i = g_value_and_jacobian(problem, w[i], c.data.batch(c.rng(0), 40))
        torch.testing.assert_close(g[i], value, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(jac[i], jac_i, rtol=1e-5, atol=1e-6)
        if gh is not None:
            torch.testing.assert_close(gh[i], h_grad(problem, w[i], c.data.batch(c.rng(0, 1), 40)), rtol=1e-5, atol=1e-6)
    weigh = lambda losses: torch.exp(losses) * b_g.mask / b_g.count.unsqueeze(1)  # noqa: E731
    hand, losses = task.batched_sample_grad(w, b_g, weigh)
    auto, losses_ref = Task.batched_sample_grad(task, w, b_g, weigh)
    torch.testing.assert_close(losses * b_g.mask, losses_ref * b_g.mask, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(hand, auto, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("objective", ["kl", "chi2", "chi2-dro"])
def test_batched_full_parts_equal_per_client_with_lambda_per_row(objective):
    """The Phi parts of the evaluation (`batched_phi_parts`): each client's full-data g_k, h_k,
    Jacobian and grad h_k from one padded read equal `global_composition.full_parts`, also
    where lam and the KL shift are a population's (k,) values, row i with row i's."""
    from dataclasses import replace

    from raycompo.algorithms.co_common import GlobalCOSettings
    from raycompo.algorithms.feddro import FedDRO
    from raycompo.problems import global_batched
    from raycompo.problems.global_composition import full_parts

    x, y = torch.randn(300, 7), torch.arange(300) % 4
    cls = raycompo.task_from_arrays(x, y, n_clients=5, partition="dirichlet", name="dro-full")
    task = resolve(RunConfig(task=cls, algo="feddro", backend="inline")).make_task()
    lams, shifts = [1.0, 1.5, 2.0, 4.0, 8.0], [0.0, 0.5, 0.0, 1.0, 0.2]
    settings = GlobalCOSettings(objective=objective, lam=3.0)
    rows = replace(settings, lam=torch.tensor(lams), kl_shift=torch.tensor(shifts))
    ctxs = [ClientCtx(cid, d, round=0, seed=1) for cid, d in enumerate(task.clients(list(range(5))))]
    cb = CohortBatch(ctxs, task, torch.device("cpu"))
    whole = cb.whole(9, count=False)
    assert whole is not None and whole.mask.sum() < whole.mask.numel()  # ragged clients
    w = torch.randn(5, task.model.dim) * 0.3
    for with_grad in (True, False):
        one = global_batched.full_parts(task, FedDRO(settings, task).problem, w, whole, with_grad)
        per_row = global_batched.full_parts(task, FedDRO(rows, task).problem, w, whole, with_grad)
        for i, c in enumerate(ctxs):
            for parts, s in ((one, settings), (per_row, replace(settings, lam=lams[i], kl_shift=shifts[i]))):
                ref = full_parts(FedDRO(s, task).problem, w[i], c.data.x, c.data.y, with_grad=with_grad)
                assert set(parts) == set(ref)
                for key, value in ref.items():
                    torch.testing.assert_close(parts[key][i].reshape(value.shape), value, rtol=1e-5, atol=1e-6)
    assert all(d.samples_read == 0 for d in cb.data)  # an evaluation's read: not counted


@pytest.mark.parametrize("objective,phi_chunk,fits", [("kl", 16, True), ("chi2", 16, True), ("kl", 1024, False)])
def test_batched_phi_parts_client_by_client_keep_each_rows_lambda(objective, phi_chunk, fits, monkeypatch):
    """Where a client's data is more than one `phi_chunk` (or the chunk's read does not fit),
    `batched_phi_parts` reads client by client, in `phi_chunk` pieces as the per-client path
    does (the same batches, also for a model with batch statistics): a population's row i
    still with its own lam and KL shift (`GlobalComposition.row`)."""
    from dataclasses import replace

    from raycompo.algorithms.co_common import GlobalCOSettings
    from raycompo.algorithms.feddro import FedDRO
    from raycompo.problems.global_composition import full_parts

    x, y = torch.randn(300, 7), torch.arange(300) % 4
    cls = raycompo.task_from_arrays(x, y, n_clients=5, partition="dirichlet", name="dro-pieces")
    task = resolve(RunConfig(task=cls, algo="feddro", backend="inline")).make_task()
    lams, shifts = [1.0, 1.5, 2.0, 4.0, 8.0], [0.0, 0.5, 0.0, 1.0, 0.2]
    settings = GlobalCOSettings(objective=objective, lam=3.0, phi_chunk=phi_chunk)
    rows = replace(settings, lam=torch.tensor(lams), kl_shift=torch.tensor(shifts))
    ctxs = [ClientCtx(cid, d, round=0, seed=1) for cid, d in enumerate(task.clients(list(range(5))))]
    cb = CohortBatch(ctxs, task, torch.device("cpu"))
    reads = []
    monkeypatch.setattr(CohortBatch, "whole", lambda self, *a, **k: reads.append(a) if fits else None)
    w = torch.randn(task.model.dim) * 0.3
    parts, _ = FedDRO(rows, task).batched_phi_parts(cb, [{}] * 5, {"w": w})
    assert (max(cb.sizes) > phi_chunk) is fits and not reads  # more than a phi_chunk: never read whole
    for i, c in enumerate(ctxs):
        alone = FedDRO(replace(settings, lam=lams[i], kl_shift=shifts[i]), task).problem
        ref = full_parts(alone, w, c.data.x, c.data.y, settings.phi_chunk)
        for key, value in ref.items():
            torch.testing.assert_close(parts[key][i].reshape(value.shape), value, rtol=1e-5, atol=1e-6)


def test_padded_rows_never_reach_the_objective():
    """KL's exp(l / lam) of a padded row (zero inputs, label 0) may overflow where the
    client's real rows do not; the batched parts stay those of the real rows."""
    from raycompo.algorithms.co_common import GlobalCOSettings
    from raycompo.algorithms.feddro import FedDRO
    from raycompo.problems import global_batched
    from raycompo.problems.global_composition import g_value_and_jacobian

    x, y = torch.randn(120, 5), 1 + torch.arange(120) % 3  # labels 1..3: padding's label 0 is never real
    cls = raycompo.task_from_arrays(x, y, n_clients=4, num_classes=4, partition="dirichlet", name="pad-kl")
    task = resolve(RunConfig(task=cls, algo="feddro", backend="inline")).make_task()
    problem = FedDRO(GlobalCOSettings(objective="kl", lam=1.0), task).problem
    ctxs = [ClientCtx(cid, d, round=0, seed=1) for cid, d in enumerate(task.clients(list(range(4))))]
    cb = CohortBatch(ctxs, task, torch.device("cpu"))
    batch = cb.batch(0, 40)
    assert batch.mask.sum() < batch.mask.numel()  # padded rows exist
    w = torch.zeros(4, task.model.dim)
    w[:, -4] = -100.0  # the bias of class 0: a loss of ~100 on padded rows, exp(100) > float32's max
    g, jac, _ = global_batched.local_parts(task, problem, w, batch, None)
    assert torch.isfinite(g).all() and torch.isfinite(jac).all()
    for i, c in enumerate(ctxs):
        value, jac_i = g_value_and_jacobian(problem, w[i], c.data.batch(c.rng(0), 40))
        torch.testing.assert_close(g[i], value, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(jac[i], jac_i, rtol=1e-5, atol=1e-6)
