"""Models batched over clients through torch.func.functional_call under vmap
(raycompo/models/flat.py `FlatModel.batched`): CNN4, ResNet-20 and a user's nn.Module give
the per-client outputs and gradients to 1e-5, with batch-norm statistics per client and
over its real rows only (padded clients); whole runs `--vectorize on` equal `off`; a module
with buffers is refused with its reason; `auto` keeps vmap models per client on the CPU
(raycompo/configuration/vectorize.py `vmap_device_rule`)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

import raycompo
from raycompo.configuration.config import RunConfig, resolve
from raycompo.configuration.vectorize import convolutions, plan, resolved_plan
from raycompo.errors import ConfigError
from raycompo.models.cnn4 import CNN4
from raycompo.models.flat import FlatModel
from raycompo.models.resnet20 import ResNet20
from tests.helpers import assert_rows_close

TOL = 1e-5


class SmallConvNet(nn.Module):
    """A user's conv net without batched_forward: conv, batch norm on batch statistics,
    ReLU, global average pooling, linear."""

    def __init__(self, classes: int = 3):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4, track_running_stats=False)
        self.fc = nn.Linear(4, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3)))


MODULES = [
    ("cnn4", lambda: CNN4(3, 5, image_size=16, hidden=4), (3, 16, 16)),
    ("resnet20", lambda: ResNet20(5, in_channels=3, blocks_per_stage=1, width=4), (3, 8, 8)),
    ("user", SmallConvNet, (1, 6, 6)),
]


def rows(model: FlatModel, k: int, gen: torch.Generator) -> torch.Tensor:
    w = model.flatten()
    return torch.stack([w + 0.1 * torch.randn(model.dim, generator=gen) for _ in range(k)])


def close(a: torch.Tensor, b: torch.Tensor) -> None:
    assert (a - b).abs().max().item() <= TOL * max(1.0, b.abs().max().item()), (a - b).abs().max().item()


@pytest.mark.parametrize("name,make,shape", MODULES, ids=[m[0] for m in MODULES])
def test_vmap_forward_and_gradients_equal_per_client(name, make, shape):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    model = FlatModel(make())
    assert model.batchable and model.vmapped and not model.own_batched
    k, width = 4, 6
    w = rows(model, k, gen)
    x = torch.randn(k, width, *shape, generator=gen)
    y = torch.randint(0, 5 if name != "user" else 3, (k, width), generator=gen)
    # every client with a full batch: one vmap, batch statistics per client
    close(model.batched(w, x), torch.stack([model(w[i], x[i]) for i in range(k)]))
    # ragged clients (padded rows): each normalized over its real rows only, padded outputs 0
    count = torch.tensor([6.0, 4.0, 6.0, 3.0])
    out = model.batched(w, x, count)
    for i, n in enumerate(count.int().tolist()):
        close(out[i, :n], model(w[i], x[i, :n]))
        assert out[i, n:].abs().sum().item() == 0.0
    # gradients of the clients' mean cross-entropies: one backward of the sum (Task.batched_loss_grad's way)
    wb = w.clone().requires_grad_(True)
    logits = model.batched(wb, x, count)
    mask = (torch.arange(width).unsqueeze(0) < count.unsqueeze(1)).float()
    losses = nn.functional.cross_entropy(logits.transpose(1, 2), y, reduction="none")
    (g,) = torch.autograd.grad(((losses * mask).sum(1) / count).sum(), wb)
    for i, n in enumerate(count.int().tolist()):
        wi = w[i].clone().requires_grad_(True)
        (gi,) = torch.autograd.grad(nn.functional.cross_entropy(model(wi, x[i, :n]), y[i, :n]), wi)
        close(g[i], gi)


def test_batch_statistics_are_each_clients_own():
    """Under vmap, a client's outputs do not depend on the other clients' inputs."""
    torch.manual_seed(0)
    model = FlatModel(SmallConvNet())
    w = rows(model, 3, torch.Generator().manual_seed(2))
    x = torch.randn(3, 5, 1, 6, 6)
    moved = x.clone()
    moved[1:] = 100 * moved[1:] + 7
    close(model.batched(w, moved)[0], model.batched(w, x)[0])


TINY_DAMAML = {"train_per_client": 20, "val_per_client": 10, "hidden": 4, "batch_size": 8, "tau": 2}


@pytest.mark.parametrize("algo,settings", [
    ("fedavg", {"eval_adapt_steps": 0}),
    ("comfedl", {"gamma": 1.0}),
])
def test_cnn_runs_vectorized_equal_per_client(algo, settings):
    s = {**TINY_DAMAML, **settings}
    ref = raycompo.run("damaml-mnist5k", algo, rounds=2, settings=s, vectorize="off")
    vec = raycompo.run("damaml-mnist5k", algo, rounds=2, settings=s, vectorize="on")
    assert "local" in vec.config["vectorized"]["phases"]
    assert "evaluate" not in vec.config["vectorized"]["phases"]  # batch statistics: no evaluation over clients' data concatenated
    assert ref.config["vectorized"]["phases"] == []
    assert_rows_close(vec.rows, ref.rows, tol=TOL)
    counted = [[{k: v for k, v in r.items() if isinstance(v, int)} for r in run.rows] for run in (vec, ref)]
    assert counted[0] == counted[1] and counted[0][-1]["oracle_calls"] > 0  # samples, oracle calls, bytes: the same ledger


def test_a_users_module_batches_through_vmap():
    """Clients of unequal sizes (Dirichlet), some smaller than the batch: padded chunks,
    run as one vmap per real row count."""
    gen = torch.Generator().manual_seed(3)
    x, y = torch.randn(150, 1, 6, 6, generator=gen), torch.arange(150) % 3
    task = raycompo.task_from_arrays(x, y, n_clients=6, model=SmallConvNet, name="user-conv",
                                     partition="dirichlet", dirichlet_alpha=0.5, partition_seed=0)
    sizes = [c.num_samples for c in task(task.Settings(), 0, None).partition()]
    settings = {"tau": 2, "batch_size": 16, "lr": 0.1}
    assert min(sizes) < 16 < max(sizes) and len(set(min(n, 16) for n in sizes)) > 2
    ref = raycompo.run(task, "fedavg", rounds=2, settings=settings, vectorize="off")
    vec = raycompo.run(task, "fedavg", rounds=2, settings=settings, vectorize="on")
    assert vec.config["vectorized"]["phases"] == ["local"]
    assert_rows_close(vec.rows, ref.rows, tol=TOL)


class RunningStatsNet(SmallConvNet):
    """Batch norm with running statistics: buffers, which k clients' models cannot share."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(4)


def test_a_module_with_buffers_is_refused_with_its_reason():
    model = FlatModel(RunningStatsNet())
    assert not model.batchable and "bn.running_mean" in model.why_not_batchable()
    with pytest.raises(ValueError, match="has buffers"):
        model.batched(torch.zeros(2, model.dim), torch.zeros(2, 3, 1, 6, 6))
    x, y = torch.randn(60, 1, 6, 6), torch.arange(60) % 3
    task = raycompo.task_from_arrays(x, y, n_clients=3, model=RunningStatsNet, name="running-stats")
    cfg = RunConfig(task=task, algo="fedavg", rounds=1, settings={"batch_size": 8}, backend="inline")
    with pytest.raises(ConfigError, match=r"--vectorize on: .*\(RunningStatsNet\) has buffers \(bn.running_mean"):
        resolve(dataclasses.replace(cfg, vectorize="on"))
    auto = resolved_plan(resolve(cfg))
    assert auto.phases == () and "has buffers" in auto.why_not
    run = raycompo.run(task, "fedavg", rounds=1, settings={"batch_size": 8})
    assert run.config["vectorized"]["phases"] == [] and "has buffers" in run.config["vectorized"]["why_not"]


def test_auto_keeps_vmap_convolutions_per_client_on_the_cpu_and_batches_them_on_cuda():
    r = resolve(RunConfig(task="damaml-mnist5k", algo="fedavg", rounds=1, settings=TINY_DAMAML, backend="inline"))
    task = r.make_task()
    on_cpu = plan("auto", r.algo_cls, r.algo_settings, r.task_cls, task, "cpu")
    assert on_cpu.phases == () and "(CNN4) batches through torch.func.vmap and has convolutions (features.0.0" in on_cpu.why_not
    assert "on CUDA only" in on_cpu.why_not
    assert "local" in plan("auto", r.algo_cls, r.algo_settings, r.task_cls, task, "cuda").phases
    assert "local" in plan("on", r.algo_cls, r.algo_settings, r.task_cls, task, "cpu").phases
    if not torch.cuda.is_available():  # what a run here records: no GPU, so per client
        run = raycompo.run("damaml-mnist5k", "fedavg", rounds=1, settings=TINY_DAMAML)
        assert run.config["vectorized"]["phases"] == [] and "on CUDA only" in run.config["vectorized"]["why_not"]


def test_auto_batches_vmap_models_without_convolutions_on_the_cpu():
    """A vmapped model of matrix layers only (maml-sinusoid's 1-40-40-1 MLP under the
    Local-SCGD family's vmap) batches under `auto` on the CPU too, and a run records it."""
    r = resolve(RunConfig(task="maml-sinusoid", algo="local-moml", rounds=1, backend="inline"))
    task = r.make_task()
    assert task.model.vmapped and convolutions(task.model.module) == []
    assert plan("auto", r.algo_cls, r.algo_settings, r.task_cls, task, "cpu").phases == ("local",)
    run = raycompo.run("maml-sinusoid", "local-moml", rounds=1)
    assert run.config["vectorized"]["phases"] == ["local"] and "why_not" not in run.config["vectorized"]
    conv = torch.nn.Sequential(torch.nn.Conv1d(1, 2, 3), torch.nn.Flatten(), torch.nn.ConvTranspose2d(1, 1, 2))
    assert convolutions(conv) == ["0", "2"]


def test_activation_numel_sizes_vmap_chunks():
    """The vmap path's chunks are sized with the layers' outputs per sample
    (`FlatModel.activation_numel`): a known count for a small conv net (conv 2x6x6 = 72,
    ReLU 72, flatten 72, linear 3), and fewer clients per chunk than without them."""
    from raycompo.engine.batched import chunk_size
    from raycompo.models import FlatModel

    net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(72, 3))
    model = FlatModel(net)
    assert model.vmapped
    assert model.activation_numel(torch.zeros(1, 6, 6)) == 72 + 72 + 72 + 3
    plain = chunk_size(model.dim, 36, 32, 2**24)
    sized = chunk_size(model.dim, 36, 32, 2**24, activations=model.activation_numel(torch.zeros(1, 6, 6)))
    assert sized < plain
