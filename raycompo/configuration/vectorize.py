"""Which client phases of a run are vectorized, and why not (`--vectorize auto|on|off`).

A host runs a phase's clients as one batched computation (raycompo/algorithms/cohort.py,
driven by raycompo/engine/batched.py) when all of these hold:

* the algorithm declares a batched form of the phase (`@batched_phase`) in its own class,
  and its settings allow it (`Algorithm.cannot_batch`);
* the task computes k clients' losses at once (`Task.batched_losses`; the classification
  tasks with their cross-entropy do; FedDRO's family needs the per-sample ones,
  `Task.batched_sample_losses`, and a DRO objective rather than a task's own composition:
  `Algorithm.cannot_batch_task`);
* the task's model computes k models at once (`batched_forward`: logistic regression, MLP;
  `Algorithm.cannot_batch_model`). The Local-SCGD family runs its MAML rows under
  `torch.func.vmap` instead, on meta-learning tasks that declare `vmap_meta_batches`.

`auto` (default) vectorizes where these hold and runs per client elsewhere; `on` makes a
run that cannot be vectorized an error that says why; `off` always runs per client (the
reference path). The `evaluate` phase is decided on its own (`evaluation_blocker`): it
batches, in `auto` and `on`, wherever the algorithm keeps the base evaluation and the task
evaluates a chunk at once (`Task.batched_evaluate`), whatever the training phases do. config.json records the mode asked for (`vectorize`) and what ran (`vectorized`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


def blocker(algo_cls: type, algo_settings: Any, task_cls: type, task: Any = None) -> str | None:
    """Why this (algorithm, settings, task) cannot train batched; None when it can. `task`
    (an instance) lets the model be checked too."""
    if not training_phases(algo_cls):
        return f"algorithm {algo_cls.name} has no batched training phases (vectorized: {', '.join(vectorized_algorithms())})"
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
    if why is None and task is not None and not task.model.batchable:  # per-sample outputs, no batch statistics
        why = f"the model of task {task_cls.name} ({type(task.model.module).__name__}) has no batched_forward"
    return why


def plan(mode: str, algo_cls: type, algo_settings: Any, task_cls: type, task: Any = None) -> Plan:
    """The phases to run batched under `mode`; `on` with a pair that cannot train batched
    is a ConfigError naming why. The evaluation batches wherever it can, in `on` and `auto`."""
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
    return Plan(tuple(sorted([*training_phases(algo_cls), *evaluate])))


def resolved_plan(resolved: Any, task: Any = None) -> Plan:
    """The plan of a resolved config (`config.Resolved`): the one `resolve` decided, else
    decided now (`task`, an instance, lets the model be checked)."""
    r = resolved
    if r.vectorized is not None:
        return r.vectorized
    return plan(r.config.vectorize, r.algo_cls, r.algo_settings, r.task_cls, task)


def vectorized_algorithms() -> list[str]:
    """The registered algorithms that declare batched training phases."""
    from raycompo.configuration.plugins import list_algorithms

    return sorted(name for name, cls in list_algorithms().items() if training_phases(cls))
