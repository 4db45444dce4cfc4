"""raycompo: a Ray-based simulation engine for federated compositional optimization.

The public API (everything a user imports is named here; each name's docstring is its
reference)::

    import raycompo

    raycompo.run(task, algo, rounds=..., settings={...}, backend="inline" | "ray")
    raycompo.resume(out_folder, rounds=...)
    raycompo.tune(space, search="grid" | "optuna", ...)

    # your own algorithm                 # your own task / data
    raycompo.Algorithm                   raycompo.Task, raycompo.ClassificationTask
    raycompo.LocalSettings               raycompo.ClientData
    raycompo.client_phase                raycompo.task_from_arrays, raycompo.task_from_clients
    raycompo.local_sgd                   raycompo.partitioners (IID, Dirichlet, shards, ...)
    raycompo.ClientContext, RoundContext raycompo.FlatModel, LogisticRegression
    raycompo.batched_phase, CohortBatch  # the vectorized form of a client phase
    raycompo.ClientRows, Shares          # ctx.map_rows' answer; a payload of each client's own entry

    raycompo.list_algorithms(), raycompo.list_tasks()   # registered names -> classes
    raycompo.RunConfig, RunResult, SweepResult
    raycompo.RaycompoError, ConfigError, DataUnavailableError, CorruptDataError

A task or algorithm is named the same way everywhere (Python, `--task`/`--algo`, a
sweep's keys): a registered name, 'path/to/file.py:ClassName',
'package.module:ClassName', or (Python) the class itself; see `raycompo.configuration.plugins`.

The package, layer by layer from the bottom. A part imports only from itself and the layers
above it in this list, never from a sibling: `a | b` share a layer and must not import each
other. Every import counts: inside a function, by a name (importlib) or through this facade
(checked in CI by `lint-imports` and tests/test_layers.py, see docs/architecture.md):

  errors | runfolder.atomic | runfolder.failure
                       user-facing errors; writing a file atomically (a temp file renamed over it)
  costs.exchange       the cost record of an exchange; the one list of the cost columns
  watch.per_client     one evaluation's per-client values and their spread over clients
  settings | seeding | costs.budget | runfolder.lockfile | runfolder.round_rows | configuration.registry | configuration.backends | watch.observers | watch.stats | configuration.arguments | costs.axes
                       typed settings dataclasses and `--set key=value`; seeded streams; the
                       cost limits a run stops at; file locks;
                       discovery of built-ins; backend names; the Observer interface; t-intervals;
                       what the public functions' arguments accept; the cost axes (--x, --rank-at)
  keyed                counter-based keyed draws (hashes of (seed, i)): a chunk's mini-batch
                       indices, compression's random levels and entries, at once
  problems | models | data | system/ | compression/
                       compositional objectives as pure torch functions; models over a flat
                       parameter vector; data sets and partitions; the simulated system
                       (profiles, devices, availability, the clock, deadlines; it imports
                       only errors, settings, seeding, costs); payload transforms
                       (compression methods, DP clipping, noise and the accountant)
  tasks/               the papers' tasks (clients' data, model, loss, evaluation);
                       tasks/from_data: a task from the user's own arrays
  algorithms/          one file per algorithm: client phases + the server's round
  configuration.plugins
                       names, specs and entry points -> classes (list_algorithms,
                       list_tasks); shipping user code to Ray
  configuration.vectorize
                       which client phases run batched (--vectorize), and why not
  configuration.config
                       a run's configuration, resolved into validated settings
  runfolder.clients_file | runfolder.costs_file | runfolder.events_file
                       the run folder's clients.csv, costs.csv and events.csv (appended as each
                       round ends)
  runfolder.results    the run folder: config.json, metrics.csv, resuming
  engine/              runs an algorithm over clients: hosts, pools (inline, Ray actors),
                       driver, checkpoints, recovery, placement, metrics for the dashboard;
                       the only layer that imports Ray
  watch.progress | watch.trackers
                       watchers of a run: the progress line, MLflow / W&B
  api                  raycompo.run / resume
  run | tune/ | reproduce/ | plot | grafana
                       the command lines (tune/ also holds raycompo.tune and the sweeps)
  bench/               benchmarks

The packages configuration/, costs/, runfolder/ and watch/ group modules by concern (a
run's configuration and plugins; costs and budgets; run folders and their files; watching
runs); their modules sit on the layers above.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.1"

_EXPORTS = {
    # running
    "run": ("raycompo.run", None),
    "tune": ("raycompo.tune", None),
    "plot": ("raycompo.plot", None),
    "resume": ("raycompo.api", "resume"),
    "RunResult": ("raycompo.engine.runner", "RunResult"),
    "SweepResult": ("raycompo.tune.api", "SweepResult"),
    "RunConfig": ("raycompo.configuration.config", "RunConfig"),
    "list_algorithms": ("raycompo.configuration.plugins", "list_algorithms"),
    "list_tasks": ("raycompo.configuration.plugins", "list_tasks"),
    # writing an algorithm
    "Algorithm": ("raycompo.algorithms.base", "Algorithm"),
    "LocalSettings": ("raycompo.algorithms.base", "LocalSettings"),
    "client_phase": ("raycompo.algorithms.base", "client_phase"),
    "local_sgd": ("raycompo.algorithms.base", "local_sgd"),
    "batched_phase": ("raycompo.algorithms.cohort", "batched_phase"),
    "CohortBatch": ("raycompo.algorithms.cohort", "CohortBatch"),
    "ClientRows": ("raycompo.algorithms.client_rows", "ClientRows"),
    "Shares": ("raycompo.algorithms.client_rows", "Shares"),
    "ClientContext": ("raycompo.algorithms.base", "ClientContext"),
    "RoundContext": ("raycompo.algorithms.base", "RoundContext"),
    "State": ("raycompo.algorithms.base", "State"),
    "require": ("raycompo.settings", "require"),
    # writing a task, bringing data
    "Task": ("raycompo.tasks.base", "Task"),
    "ClassificationTask": ("raycompo.tasks.base", "ClassificationTask"),
    "ClientData": ("raycompo.tasks.base", "ClientData"),
    "task_from_arrays": ("raycompo.tasks.from_data", "task_from_arrays"),
    "task_from_clients": ("raycompo.tasks.from_data", "task_from_clients"),
    "partitioners": ("raycompo.data.partitioners", None),
    "FlatModel": ("raycompo.models", "FlatModel"),
    "LogisticRegression": ("raycompo.models", "LogisticRegression"),
    # errors
    "RaycompoError": ("raycompo.errors", "RaycompoError"),
    "ConfigError": ("raycompo.errors", "ConfigError"),
    "DataUnavailableError": ("raycompo.errors", "DataUnavailableError"),
    "CorruptDataError": ("raycompo.errors", "CorruptDataError"),
    "DivergedError": ("raycompo.errors", "DivergedError"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Public names load on first use, so `import raycompo` (and every command line) stays
    light until torch, Ray or pandas are needed."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'raycompo' has no attribute {name!r}")
    module, attr = _EXPORTS[name]
    value = importlib.import_module(module)
    return value if attr is None else getattr(value, attr)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
