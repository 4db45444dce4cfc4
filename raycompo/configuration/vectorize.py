"""Which client phases of a run are vectorized, and why not (`--vectorize auto|on|off`).

A host runs a phase's clients as one batched computation (raycompo/algorithms/cohort.py,
driven by raycompo/engine/batched.py) when all of these hold:

* the algorithm declares a batched form of the phase (`@batched_phase`) in its own class,
  and its settings allow it (`Algorithm.cannot_batch`);
* the task computes k clients' losses at once (`Task.batched_losses`; the classification
  tasks with their cross-entropy do; FedDRO's family needs the per-sample ones,
  `Task.batched_sample_losses`, and a DRO objective rather than a task's own composition:
  `Algorithm.cannot_batch_task`);
* the task's model computes k models at once (`FlatModel.batchable`,
  `Algorithm.cannot_batch_model`): with its own `batched_forward` (logistic regression,
  MLP), or through `torch.func.functional_call` under `torch.func.vmap` (any module whose
  state is parameters only: CNN4, ResNet-20, a user's nn.Module; batch norm with
  `track_running_stats=False`, each client normalized by its own batch; a module with
  buffers, e.g. running statistics, does not batch, and says so). The Local-SCGD family
  runs its MAML rows under `torch.func.vmap` instead, on meta-learning tasks that declare
  `vmap_meta_batches`.

The vmap models' rule in `auto`, per device (`vmap_device_rule`): batched on CUDA
(`gpus_per_actor > 0` and a CUDA device here); on the CPU batched unless the module has a
convolution, which stays client by client: the vmapped convolutions measured slower than
the per-client loop (`VMAP_CPU_FIGURES`; on the CPU a convolution already uses every thread
on one client's batch, and vmap folds the clients into the batch of a grouped convolution,
which is slower there), while vmapped matrix layers become one batched product each,
faster than a product per client (`VMAP_CPU_MATMUL_FIGURES`). `on` batches them on any
device. The plan's `why_not` says which ran and why.

`auto` (default) vectorizes where these hold and runs per client elsewhere; `on` makes a
run that cannot be vectorized an error that says why; `off` always runs per client (the
reference path). The `evaluate` phase is decided on its own (`evaluation_blocker`): it
batches, in `auto` and `on`, wherever the algorithm keeps the base evaluation and the task
evaluates a chunk at once (`Task.batched_evaluate`), whatever the training phases do. config.json records the mode asked for (`vectorize`) and what ran (`vectorized`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from raycompo.errors import ConfigError

MODES = ("auto", "on", "off")
EVALUATE = "evaluate"

DEFAULT_MEMORY_MB = 512.0
"""Memory a host's batched chunk may use (`vectorize_memory_mb`): a cohort share larger
than that runs as several chunks of clients, one after the other."""


@dataclass(frozen=True)
class Plan:
    """What a run vectorizes: the phases run batched (empty: none) and, when the training
    phases run per client, why."""

    phases: tuple[str, ...]
    why_not: str | None = None

    def record(self) -> dict[str, Any]:
        """config.json's `vectorized` entry."""
        return {"phases": list(self.phases), **({"why_not": self.why_not} if self.why_not else {})}


def training_phases(algo_cls: type) -> list[str]:
    """The algorithm's batched phases other than `evaluate`."""
    return sorted(p for p in algo_cls.batched_phases if p != EVALUATE)


def _not_inherited(algo_cls: type) -> str:
    """For a user's subclass of an algorithm with batched phases: that they are not
    inherited, and how to declare the parent's where the subclass keeps the parent's client
    phase (the same method); an empty string otherwise (a built-in algorithm's missing
    batched form is by design: its phases compute something else)."""
    if algo_cls.__module__.startswith("raycompo."):
        return ""
    parent = next((k for k in algo_cls.__mro__[1:] if any(p != EVALUATE for p in getattr(k, "batched_phases", ()))), None)
    if parent is None:
        return ""
    kept = [p for p in training_phases(parent)
            if p in algo_cls.phases and getattr(algo_cls, algo_cls.phases[p]) is getattr(parent, parent.phases.get(p, ""), None)]
    if not kept:
        return ""
    method = parent.batched_phases[kept[0]]
    return (f"; batched phases are not inherited: where {algo_cls.__name__}'s phases {', '.join(kept)} compute what "
            f"{parent.__name__}'s do, declare {parent.__name__}'s batched forms in its class body "
            f"(`{method} = {parent.__name__}.{method}`)")


def blocker(algo_cls: type, algo_settings: Any, task_cls: type, task: Any = None) -> str | None:
    """Why this (algorithm, settings, task) cannot train batched; None when it can. `task`
    (an instance) lets the model be checked too."""
    if not training_phases(algo_cls):
        return f"algorithm {algo_cls.name} has no batched training phases{_not_inherited(algo_cls)} " \
               f"(vectorized: {', '.join(vectorized_algorithms())})"
    why = algo_cls.cannot_batch(algo_settings) or algo_cls.cannot_batch_task(task_cls, algo_settings)
    if why:
        return why
    why = algo_cls.cannot_batch_model(task.model) if task is not None else None
    if why:
        return f"the model of task {task_cls.name} ({type(task.model.module).__name__}) {why}"
    return None


def evaluation_blocker(algo_cls: type, algo_settings: Any, task_cls: type, task: Any = None) -> str | None:
    """Why the evaluate phase cannot run batched (`Task.batched_evaluate`: one forward pass
    of the global model over a chunk's data); None when it can."""
    if EVALUATE not in algo_cls.batched_phases:
        return f"algorithm {algo_cls.name} evaluates in its own way"
    why = algo_cls.cannot_batch_evaluate(algo_settings) or task_cls.cannot_batch_evaluate()
    if why is None and task is not None and not task.model.own_batched:  # per-sample outputs, no batch statistics
        why = (f"the model of task {task_cls.name} ({type(task.model.module).__name__}) has no batched_forward "
               "(one forward over several clients' data needs per-sample outputs, not batch statistics)")
    return why


VMAP_CPU_FIGURES = ("CNN4 on CIFAR-shaped data, one local step's gradients, client by client / vmap: "
                    "0.71x at m = 10, 0.44x at m = 100; python -m raycompo.bench gpu --cnn")
"""What the client-by-client / vmapped local step measured on this project's 2-core CPU
(below 1: vmap is slower; docs/benchmarks.md, "CNN4 batched through vmap"), quoted where
`auto` keeps a vmap model per client."""


def run_device(gpus_per_actor: float) -> str:
    """The device a run's hosts compute on: 'cuda' where they are given a GPU and this
    process sees one (engine/host.py chooses the same way), else 'cpu'."""
    return "cuda" if gpus_per_actor > 0 and torch.cuda.is_available() else "cpu"


VMAP_CPU_MATMUL_FIGURES = ("Local-SCGDM on maml-sinusoid (a 1-40-40-1 MLP), ms per round, client by client / "
                           "vectorized: 7.2-11.8x; python -m raycompo.bench vectorize")
"""What a vmapped model without convolutions measured on the CPU (docs/benchmarks.md, "Every
family that batches"): `auto` batches such models there."""


def convolutions(module: torch.nn.Module) -> list[str]:
    """The names of `module`'s convolution layers (torch.nn's Conv1d / 2d / 3d and their
    transposes), in order."""
    return [name for name, layer in module.named_modules() if isinstance(layer, torch.nn.modules.conv._ConvNd)]


def vmap_device_rule(task: Any, device: str) -> str | None:
    """Why `auto` keeps this task's model per client on `device` (None: it batches): a
    model batched through vmap (`FlatModel.vmapped`) batches on CUDA, and on the CPU where
    it has no convolution."""
    model = getattr(task, "model", None)
    if model is None or not getattr(model, "vmapped", False) or device != "cpu":
        return None
    convs = convolutions(model.module)
    if not convs:
        return None
    return (f"the model of task {type(task).name} ({type(model.module).__name__}) batches through torch.func.vmap "
            f"and has convolutions ({', '.join(convs[:3])}{', ...' if len(convs) > 3 else ''}), which --vectorize auto "
            f"batches on CUDA only: slower on the CPU ({VMAP_CPU_FIGURES}); --vectorize on batches it")


def plan(mode: str, algo_cls: type, algo_settings: Any, task_cls: type, task: Any = None,
         device: str = "cpu") -> Plan:
    """The phases to run batched under `mode`; `on` with a pair that cannot train batched
    is a ConfigError naming why. The evaluation batches wherever it can, in `on` and `auto`.
    `device` ('cpu' or 'cuda', `run_device`) decides `auto` for the vmap models
    (`vmap_device_rule`)."""
    if mode not in MODES:
        raise ConfigError(f"vectorize must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "off":
        return Plan((), "vectorize off")
    evaluate = () if evaluation_blocker(algo_cls, algo_settings, task_cls, task) else (EVALUATE,)
    why = blocker(algo_cls, algo_settings, task_cls, task)
    if why is not None:
        if mode == "on":
            raise ConfigError(f"--vectorize on: {why}; use --vectorize auto (per-client where it cannot) or off")
        return Plan(evaluate, why)
    why = vmap_device_rule(task, device) if mode == "auto" else None
    if why is not None:
        return Plan(evaluate, why)
    return Plan(tuple(sorted([*training_phases(algo_cls), *evaluate])))


def resolved_plan(resolved: Any, task: Any = None) -> Plan:
    """The plan of a resolved config (`config.Resolved`): the one `resolve` decided, else
    decided now (`task`, an instance, lets the model be checked)."""
    r = resolved
    if r.vectorized is not None:
        return r.vectorized
    return plan(r.config.vectorize, r.algo_cls, r.algo_settings, r.task_cls, task, run_device(r.config.gpus_per_actor))


def vectorized_algorithms() -> list[str]:
    """The registered algorithms that declare batched training phases."""
    from raycompo.configuration.plugins import list_algorithms

    return sorted(name for name, cls in list_algorithms().items() if training_phases(cls))
