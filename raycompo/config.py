"""A run's configuration, and its resolution into validated task and algorithm settings."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from raycompo.arguments import Arg, check
from raycompo.backends import backend_names
from raycompo.budget import check_budget
from raycompo.errors import ConfigError
from raycompo.settings import build, check_known, names, require

BACKENDS = backend_names()
"""The backends' names, from the one registry in raycompo/backends.py."""

RENAMED = {"inner_lr": "maml_inner_lr", "eval_chunk": "phi_chunk"}
"""Old flat keys that still work where they are unambiguous: the meta-learning tasks'
MAML inner step (now `maml_inner_lr`, apart from the MAML algorithms' `inner_lr`) and
the global-composition algorithms' chunk of the Phi evaluation (now `phi_chunk`, apart
from the FedDRO tasks' `eval_chunk`)."""


@dataclass
class RunConfig:
    """Everything that defines a run; `config.json` holds it, so any run can be repeated."""

    task: str = "dro-mnist5k"
    """Task: a name (see `python -m raycompo.run --list`), 'path/to/file.py:ClassName' or
    'package.module:ClassName' (raycompo/plugins.py)."""
    algo: str = "comfedl"
    """Algorithm: a name, 'path/to/file.py:ClassName' or 'package.module:ClassName'."""
    rounds: int = 100
    """Communication rounds S."""
    seed: int = 0
    """Seed of every random draw: data partition, initial model, cohorts, mini-batches."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Overrides of task and algorithm settings by flat key (lr, tau, gamma, ...)."""
    backend: str = "ray"
    """'ray' (client-host actors and a driver actor) or 'inline' (one process, the reference)."""
    clients_per_actor: int | None = None
    """Clients hosted by one Ray actor (None: spread the clients over the cluster's CPUs/GPUs)."""
    cpus_per_actor: float = 1.0
    """CPUs reserved by each client-host actor."""
    gpus_per_actor: float = 0.0
    """GPU fraction reserved by each client-host actor (e.g. 0.25: four hosts share a GPU)."""
    eval_every: int = 1
    """Evaluate the global model on every client every this many rounds."""
    data_dir: str | None = None
    """Where data sets are (or are downloaded to); default $RAYCOMPO_DATA or ~/.cache/raycompo/data."""
    host_timeout_s: float = 1800.0
    """Seconds a client-host actor may take to answer one call before it is reported by name
    and treated as dead (the run restarts its actors from the last checkpoint)."""
    eval_clients: int | None = None
    """Evaluate a seeded sample of this many clients each evaluation round (None: all)."""
    state_memory_gb: float | None = None
    """Memory for idle clients' persistent state over all hosts; past it, states spill to
    disk ($RAYCOMPO_SPILL_DIR or the temp folder) and come back when sampled. None: no limit."""
    vectorize: str = "auto"
    """Run a host's clients as one batched computation: 'auto' where the algorithm, task and
    model allow it, 'on' (an error where they do not), 'off' (per client, the reference).
    See raycompo/vectorize.py."""
    vectorize_memory_mb: float = 512.0
    """Memory one host's batched chunk of clients may use; a larger share of a cohort runs
    as several chunks."""
    system: str | None = None
    """A simulated system (raycompo/system/, docs/system.md): a built-in profile name
    ('uniform', 'mobile', 'mobile-sync', 'mobile-fastest') or a YAML file path. It adds
    the columns sim_time, dropped and wasted_s, and draws cohorts among online clients.
    None: no system, no such columns."""
    threads: int | None = None
    """Torch threads of the process that runs the rounds (the inline backend, a local
    driver). Sums of floats depend on how they are split over threads, so a resumed run uses
    the threads of the run it continues: the engine records the number used (this
    process's when None) and `--resume` sets it again."""
    budget: dict[str, float] = field(default_factory=dict)
    """End the run (status 'completed') at the first round whose cumulative cost column
    reaches its limit, e.g. {'samples': 1e6, 'bytes_up': 2e9} (raycompo/budget.py). Empty:
    run all `rounds`."""

    def __post_init__(self) -> None:
        # A class (Python API) is recorded by the spec that finds it again.
        from raycompo.plugins import spec_of

        if isinstance(self.task, type):
            self.task = spec_of(self.task, "task")
        if isinstance(self.algo, type):
            self.algo = spec_of(self.algo, "algorithm")

    def canonical(self) -> RunConfig:
        """This config with `task` and `algo` as the specs that find them again from any
        folder (a relative 'file.py:Class' becomes an absolute path)."""
        from raycompo.plugins import canonical
        from raycompo.system import canonical_system

        return dataclasses.replace(self, task=canonical("task", self.task), algo=canonical("algorithm", self.algo),
                                   system=canonical_system(self.system))

    def state_budget_bytes(self, hosts: int = 1) -> int | None:
        """Each of `hosts` hosts' share of `state_memory_gb`, in bytes."""
        return None if self.state_memory_gb is None else int(self.state_memory_gb * 1e9 / max(1, hosts))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class Resolved:
    """A config with its classes looked up and its settings built and validated."""

    config: RunConfig
    task_cls: type
    algo_cls: type
    task_settings: Any
    algo_settings: Any
    n_clients: int
    """The task's number of clients, found once at resolution."""
    vectorized: Any = None
    """Which client phases run batched (`raycompo.vectorize.Plan`), decided once at
    resolution (None where it was not: `resolve(check_clients=False)`)."""
    system_profile: Any = None
    """The simulated system's validated `raycompo.system.Profile` (None: no --system)."""
    system_tables: Any = None
    """Its files' content (`raycompo.system.simulator.Tables`), read once here: the driver,
    wherever it runs, needs no access to them."""

    def make_task(self):
        return self.task_cls(self.task_settings, self.config.seed, self.config.data_dir)

    def effective_settings(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self.task_settings), **dataclasses.asdict(self.algo_settings)}


def algorithm_overrides(task_cls: type, algo_cls: type, settings: dict[str, Any]) -> dict[str, Any]:
    """The values of `algo_cls.Settings` fields: the task's paper defaults (its entry named
    after the algorithm winning over the shared ones), then the user's `settings`."""
    algo = algo_cls.name
    keys = set(names(algo_cls.Settings))
    defaults = {k: v for k, v in task_cls.algo_defaults.items() if not isinstance(v, dict)}
    defaults.update(task_cls.algo_defaults.get(algo, {}))
    return {k: v for k, v in {**defaults, **settings}.items() if k in keys}


def setting_owners(*extra: tuple[str, str, type]) -> dict[str, str]:
    """Every settings key of every registered task and algorithm, and of the `extra`
    (kind 'task' or 'algo', spec, class) classes -> 'task' or 'algo'.

    The built-ins keep their task and algorithm keys apart (a key declared by a task and
    by an algorithm is an error here naming both owners), so that any pair of them runs.
    A run checks only its own pair (`split_settings`): a plugin may use a key that some
    other task uses."""
    from raycompo.plugins import list_algorithms, list_tasks

    owners: dict[str, str] = {}
    where: dict[str, str] = {}
    found = [(kind, name, cls) for kind, registry in (("task", list_tasks()), ("algo", list_algorithms()))
             for name, cls in sorted(registry.items())]
    known = {cls for _, _, cls in found}
    for kind, cls_name, cls in found + [e for e in extra if e[2] not in known]:
        for key in names(cls.Settings):
            if owners.get(key, kind) != kind:
                raise ConfigError(
                    f"setting {key!r} is declared by {where[key]} and by {kind} {cls_name}: "
                    "rename one of them (task and algorithm settings share the --set namespace)"
                )
            owners[key] = kind
            where.setdefault(key, f"{kind} {cls_name}")
    return owners


def split_settings(settings: dict[str, Any], task_cls: type, algo_cls: type, context: str) -> dict[str, Any]:
    """Flat keys from `task.KEY` / `algo.KEY` / `KEY`, checked against the pair; old keys
    in RENAMED are accepted (with a note on stderr) where the new name fits."""
    import sys

    from raycompo.plugins import spec_of

    task_keys, algo_keys = set(names(task_cls.Settings)), set(names(algo_cls.Settings))
    # A key of both the task and the algorithm of this run would make one `--set` change
    # both silently; a key that only other tasks or algorithms use is no collision.
    both = sorted(task_keys & algo_keys)
    if both:
        owner = {kind: cls.name if spec == cls.name else f"{cls.name} ({spec})"
                 for kind, cls, spec in (("task", task_cls, spec_of(task_cls, "task")),
                                         ("algo", algo_cls, spec_of(algo_cls, "algorithm")))}
        raise ConfigError(
            f"setting {both[0]!r} is declared by task {owner['task']} and by algo {owner['algo']}: rename one of "
            "them (the task's and the algorithm's settings share the --set namespace)"
        )
    out: dict[str, Any] = {}
    for key, value in settings.items():
        prefix, _, bare = key.rpartition(".")
        allowed = {"task": task_keys, "algo": algo_keys}.get(prefix, task_keys | algo_keys)
        if prefix not in ("", "task", "algo"):
            raise ConfigError(f"setting {key!r}: a prefix must be 'task.' or 'algo.'")
        if bare not in allowed and RENAMED.get(bare) in allowed:
            print(f"note: setting {bare!r} is now {RENAMED[bare]!r} for {context}; using it", file=sys.stderr)
            bare = RENAMED[bare]
        if prefix and bare not in allowed:
            raise ConfigError(f"{prefix} setting {bare!r} is not a setting of the {prefix} in {context}; valid: {', '.join(sorted(allowed))}")
        out[bare] = value
    check_known(out, task_cls.Settings, algo_cls.Settings, context=context)
    return out


def tasks_that_fit(algo_cls: type, task_cls: type) -> str:
    """'. Tasks that fit: ...' (the registered tasks with every capability `algo_cls`
    requires) when `task_cls` lacks one of them, else ''."""
    from raycompo.plugins import list_tasks

    if algo_cls.requires <= task_cls.capabilities:
        return ""
    fits = sorted(n for n, t in list_tasks().items() if algo_cls.requires <= t.capabilities)
    return f". Tasks that fit: {', '.join(fits)}"


_INT, _NUMBER = Arg(("int",)), Arg(("number",))
FIELD_TYPES = {
    "task": Arg(("str",)), "algo": Arg(("str",)), "rounds": _INT, "seed": _INT, "settings": Arg(("mapping",)),
    "backend": Arg(("str",)), "clients_per_actor": Arg(("int",), none=True), "cpus_per_actor": _NUMBER,
    "gpus_per_actor": _NUMBER, "eval_every": _INT, "data_dir": Arg(("str",), none=True), "host_timeout_s": _NUMBER,
    "eval_clients": Arg(("int",), none=True), "state_memory_gb": Arg(("number",), none=True),
    "vectorize": Arg(("str",)), "vectorize_memory_mb": _NUMBER, "threads": Arg(("int",), none=True),
}
"""The type of each RunConfig field (raycompo.arguments), checked by `resolve`."""


def resolve(cfg: RunConfig, check_clients: bool = True) -> Resolved:
    """Look up the task and algorithm, check that they fit, and build their settings: the
    task's paper defaults for algorithm settings first, then the user's overrides.
    Raises ConfigError.

    `check_clients=False` skips the checks that need the task's number of clients (which
    some tasks only know from their data), e.g. to validate a sweep before any data loads."""
    from raycompo.plugins import load

    # Types first (a config.json read from disk is untrusted); the ranges below say the same
    # as the command line's checks.
    check("the run's configuration", dataclasses.asdict(cfg), FIELD_TYPES)
    require(cfg.rounds >= 1, f"rounds must be >= 1, got {cfg.rounds}")
    require(cfg.backend in BACKENDS, f"unknown backend {cfg.backend!r}; choose one of: {', '.join(BACKENDS)}")
    require(cfg.clients_per_actor is None or cfg.clients_per_actor >= 1, f"clients_per_actor must be >= 1, got {cfg.clients_per_actor}")
    require(cfg.cpus_per_actor > 0, f"cpus_per_actor must be > 0, got {cfg.cpus_per_actor}")
    require(cfg.gpus_per_actor >= 0, f"gpus_per_actor must be >= 0, got {cfg.gpus_per_actor}")
    require(cfg.eval_every >= 1, f"eval_every must be >= 1, got {cfg.eval_every}")
    require(cfg.seed >= 0, f"seed must be >= 0, got {cfg.seed}")
    require(cfg.host_timeout_s > 0, f"host_timeout_s must be > 0, got {cfg.host_timeout_s}")
    require(cfg.eval_clients is None or cfg.eval_clients >= 1, f"eval_clients must be >= 1, got {cfg.eval_clients}")
    require(cfg.state_memory_gb is None or cfg.state_memory_gb > 0, f"state_memory_gb must be > 0, got {cfg.state_memory_gb}")
    require(cfg.vectorize_memory_mb > 0, f"vectorize_memory_mb must be > 0, got {cfg.vectorize_memory_mb}")
    require(cfg.threads is None or cfg.threads >= 1, f"threads must be >= 1, got {cfg.threads}")
    check_budget(cfg.budget, getattr(cfg, "system", None))
    from raycompo.plugins import load as load_plugin
    from raycompo.system import check_profile, load_profile

    # a profile's availability model and selection policy may be plugins: found as tasks are
    profile = load_profile(cfg.system, resolve=load_plugin) if cfg.system is not None else None
    task_cls = load("task", cfg.task)
    algo_cls = load("algorithm", cfg.algo)
    context = f"task {task_cls.name} with algorithm {algo_cls.name}"
    settings = split_settings(cfg.settings, task_cls, algo_cls, context=context)
    task_settings = build(task_cls.Settings, settings)
    task_settings.validate()
    algo_settings = build(algo_cls.Settings, algorithm_overrides(task_cls, algo_cls, settings))
    try:
        algo_cls.check_task(task_cls, algo_settings)
    except ConfigError as exc:
        hint = tasks_that_fit(algo_cls, task_cls)
        if not hint:
            raise
        raise ConfigError(f"{exc}{hint}") from None
    task = task_cls(task_settings, cfg.seed, cfg.data_dir) if check_clients else None
    n_clients = task.n_clients if task is not None else 10**9
    algo_settings.validate(n_clients)
    from raycompo.vectorize import plan

    vectorized = plan(cfg.vectorize, algo_cls, algo_settings, task_cls, task)  # 'on' where it cannot: an error now
    tables = None
    if profile is not None and task is not None:
        m = getattr(algo_settings, "clients_per_round", None)  # a cohort the availability must be able to fill
        tables = check_profile(profile, cfg.seed, n_clients,  # its files against the clients: an error now, not mid-run
                               m if isinstance(m, int) and not isinstance(m, bool) else None)
    return Resolved(cfg, task_cls, algo_cls, task_settings, algo_settings, n_clients,
                    vectorized if task is not None else None, profile, tables)
