"""A run's configuration, and its resolution into validated task and algorithm settings."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from raycompo.configuration.arguments import Arg, check
from raycompo.configuration.backends import backend_names
from raycompo.costs.budget import check_budget
from raycompo.errors import ConfigError
from raycompo.settings import build, check_known, names, require
from raycompo.tasks.sampler import DEFAULT_SAMPLER, sampler_of

BACKENDS = backend_names()
"""The backends' names, from the one registry in raycompo/configuration/backends.py."""

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
    'package.module:ClassName' (raycompo/configuration/plugins.py)."""
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
    See raycompo/configuration/vectorize.py."""
    vectorize_memory_mb: float = 512.0
    """Memory one host's batched chunk of clients may use; a larger share of a cohort runs
    as several chunks."""
    sampler: str = DEFAULT_SAMPLER
    """How clients' mini-batch indices are drawn (`ClientData` batches; meta-learning tasks
    draw their own): 'keyed' (the default: the b smallest keyed hashes of the generator of
    (seed, client, round, step, stream) and i, raycompo/keyed.py: a chunk's clients
    and steps drawn in one call, the same indices on the CPU and on CUDA) or 'randperm'
    (`randperm(n_i)[:b]` from that generator: the draws of releases up to 0.1.1, which a
    record without this field ran with). It picks the uplink compression's draws alike
    (`--compress` qsgd's levels, randk's entries): keyed by each member's seed, or from a
    generator per member."""
    system: str | None = None
    """A simulated system (raycompo/system/, docs/system.md): a built-in profile name
    ('uniform', 'mobile', 'mobile-sync', 'mobile-fastest') or a YAML file path. It adds
    the columns sim_time, dropped, wasted_s and the dropped_* costs, and draws cohorts among
    online clients. None: no system, no such columns."""
    aggregation: str = "sync"
    """How the server aggregates (raycompo/system/aggregation.py, docs/system.md): 'sync'
    (rounds whose exchanges are barriers), 'buffered' (FedBuff: `concurrency` clients in
    flight, every `buffer` arrivals applied as one server step) or 'async' (FedAsync: every
    arrival is a server step). The asynchronous ones need a `system` (a clock); `rounds`
    then counts server steps. Their settings (staleness, server_lr, max_staleness,
    async_alpha, async_rho, ...) are flat keys of `settings`."""
    concurrency: int | None = None
    """C, clients in flight at all times (buffered / async; None: the algorithm's cohort size m)."""
    buffer: int | None = None
    """K, arrivals per server step (buffered; None: min(10, C); async: 1)."""
    threads: int | None = None
    """Torch threads of the process that runs the rounds (the inline backend, a local
    driver). Sums of floats depend on how they are split over threads, so a resumed run uses
    the threads of the run it continues: the engine records the number used (this
    process's when None) and `--resume` sets it again."""
    budget: dict[str, float] = field(default_factory=dict)
    """End the run (status 'completed') at the first round whose cumulative cost column
    reaches its limit, e.g. {'samples': 1e6, 'bytes_up': 2e9} (raycompo/costs/budget.py). Empty:
    run all `rounds`."""
    compress: dict[str, str] = field(default_factory=dict)
    """Compression of what clients send up, by contribution key ('*': every key but the
    weights): {'nw': 'topk:0.01', 'u': 'qsgd:4'}; methods qsgd:S, topk:K, randk:K, sign
    (raycompo/compression/, docs/compression.md). Empty: sent as they are."""
    compress_down: dict[str, str] = field(default_factory=dict)
    """Compression of what the server sends down, by payload key ('*': every tensor key)."""
    dp_clip: float | None = None
    """Client-level DP (DP-FedAvg): each client's contribution, all keys sent up together,
    clipped to this L2 norm C (None: no DP)."""
    dp_noise: float | None = None
    """The noise multiplier z: N(0, z^2 C^2 I) added to the server's sums (None: 0)."""
    dp_delta: float = 1e-5
    """The delta at which the accountant reports epsilon (the column `epsilon`)."""
    uplink: list[str] = field(default_factory=list)
    """The user's own steps of what clients send up, run after `compress` and `dp_clip`'s, in
    order: specs 'path/to/file.py:ClassName' or 'package.module:ClassName' of
    `raycompo.compression.uplink.UplinkStep` subclasses (`--uplink`, docs/compression.md)."""
    log_events: bool = False
    """Write the run folder's events.csv (`--log-events`): one row per dispatch, its client,
    the model version it downloaded, its dispatch and finish times in simulated seconds and
    its fate (applied at server step s with staleness tau, dropped, too stale, lost);
    raycompo/runfolder/events_file.py, docs/system.md. It changes no number of the run."""

    def __post_init__(self) -> None:
        # A class (Python API) is recorded by the spec that finds it again.
        from raycompo.configuration.plugins import spec_of

        if isinstance(self.task, type):
            self.task = spec_of(self.task, "task")
        if isinstance(self.algo, type):
            self.algo = spec_of(self.algo, "algorithm")
        if isinstance(self.uplink, (list, tuple)):
            self.uplink = [spec_of(s, "uplink") if isinstance(s, type) else s for s in self.uplink]

    def canonical(self) -> RunConfig:
        """This config with `task` and `algo` as the specs that find them again from any
        folder (a relative 'file.py:Class' becomes an absolute path)."""
        from raycompo.configuration.plugins import canonical
        from raycompo.system import canonical_system

        return dataclasses.replace(self, task=canonical("task", self.task), algo=canonical("algorithm", self.algo),
                                   system=canonical_system(self.system),
                                   uplink=[canonical("uplink", s) for s in self.uplink])

    def state_budget_bytes(self, hosts: int = 1) -> int | None:
        """Each of `hosts` hosts' share of `state_memory_gb`, in bytes."""
        return None if self.state_memory_gb is None else int(self.state_memory_gb * 1e9 / max(1, hosts))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> RunConfig:
        """`from_dict` of a config a run recorded (config.json, sweep.json): a field it lacks
        was not there when it ran, and takes the value that release ran with, not today's
        default (`sampler`: 'randperm', tasks/sampler.py's RECORDED_BEFORE)."""
        return cls.from_dict({**d, "sampler": sampler_of(d)})


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
    """Which client phases run batched (`raycompo.configuration.vectorize.Plan`), decided once at
    resolution (None where it was not: `resolve(check_clients=False)`)."""
    system_profile: Any = None
    """The simulated system's validated `raycompo.system.Profile` (None: no --system)."""
    system_tables: Any = None
    """Its files' content (`raycompo.system.simulator.Tables`), read once here: the driver,
    wherever it runs, needs no access to them."""
    aggregation: Any = None
    """The asynchronous aggregation's `raycompo.system.aggregation.Plan` (aggregation, C, K
    and validated settings); None for 'sync'."""
    uplink_steps: tuple[type, ...] = ()
    """The classes of `config.uplink`, found once here (the hosts make one of each)."""

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
    """Every settings key of every registered task and algorithm, of the asynchronous
    aggregations ('aggregation': raycompo/system/aggregation.py) and of the `extra`
    (kind 'task' or 'algo', spec, class) classes -> 'task', 'algo' or 'aggregation'.

    The built-ins keep their task and algorithm keys apart (a key declared by a task and
    by an algorithm is an error here naming both owners), so that any pair of them runs.
    A run checks only its own pair (`split_settings`): a plugin may use a key that some
    other task uses."""
    from raycompo.configuration.plugins import list_algorithms, list_tasks

    owners: dict[str, str] = {}
    where: dict[str, str] = {}
    found = [(kind, name, cls) for kind, registry in (("task", list_tasks()), ("algo", list_algorithms()))
             for name, cls in sorted(registry.items())]
    from raycompo.system.aggregation import AggregationSettings

    found.append(("aggregation", "settings", type("Aggregation", (), {"Settings": AggregationSettings})))
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

    from raycompo.configuration.plugins import spec_of

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
    from raycompo.system.aggregation import AggregationSettings, aggregation_keys

    agg_keys = set(aggregation_keys())
    out: dict[str, Any] = {}
    for key, value in settings.items():
        prefix, _, bare = key.rpartition(".")
        if bare in agg_keys and prefix in ("", "aggregation"):  # the aggregation's own (issue 31)
            out[bare] = value
            continue
        allowed = {"task": task_keys, "algo": algo_keys}.get(prefix, task_keys | algo_keys)
        if prefix not in ("", "task", "algo"):
            raise ConfigError(f"setting {key!r}: a prefix must be 'task.', 'algo.' or 'aggregation.'")
        if bare not in allowed and RENAMED.get(bare) in allowed:
            print(f"note: setting {bare!r} is now {RENAMED[bare]!r} for {context}; using it", file=sys.stderr)
            bare = RENAMED[bare]
        if prefix and bare not in allowed:
            raise ConfigError(f"{prefix} setting {bare!r} is not a setting of the {prefix} in {context}; valid: {', '.join(sorted(allowed))}")
        out[bare] = value
    check_known(out, task_cls.Settings, algo_cls.Settings, AggregationSettings, context=context)
    return out


def tasks_that_fit(algo_cls: type, task_cls: type) -> str:
    """'. Tasks that fit: ...' (the registered tasks with every capability `algo_cls`
    requires) when `task_cls` lacks one of them, else ''."""
    from raycompo.configuration.plugins import list_tasks

    if algo_cls.requires <= task_cls.provided():
        return ""
    fits = sorted(n for n, t in list_tasks().items() if algo_cls.requires <= t.provided())
    return f". Tasks that fit: {', '.join(fits)}"


_INT, _NUMBER = Arg(("int",)), Arg(("number",))
FIELD_TYPES = {
    "task": Arg(("str",)), "algo": Arg(("str",)), "rounds": _INT, "seed": _INT, "settings": Arg(("mapping",)),
    "backend": Arg(("str",)), "clients_per_actor": Arg(("int",), none=True), "cpus_per_actor": _NUMBER,
    "gpus_per_actor": _NUMBER, "eval_every": _INT, "data_dir": Arg(("str",), none=True), "host_timeout_s": _NUMBER,
    "eval_clients": Arg(("int",), none=True), "state_memory_gb": Arg(("number",), none=True),
    "vectorize": Arg(("str",)), "vectorize_memory_mb": _NUMBER, "sampler": Arg(("str",)), "threads": Arg(("int",), none=True),
    "aggregation": Arg(("str",)),
    "concurrency": Arg(("int",), none=True), "buffer": Arg(("int",), none=True),
    "compress": Arg(("mapping",)),
    "compress_down": Arg(("mapping",)), "dp_clip": Arg(("number",), none=True), "dp_noise": Arg(("number",), none=True),
    "dp_delta": _NUMBER, "log_events": Arg(("bool",)), "uplink": Arg(("specs",)),
}
"""The type of each RunConfig field (raycompo.configuration.arguments), checked by `resolve`."""


def check_types(cfg: RunConfig) -> None:
    """ConfigError unless every field has its type (`FIELD_TYPES`): a config.json edited by
    hand is refused before any of it is used (e.g. its `threads` set)."""
    check("the run's configuration", dataclasses.asdict(cfg), FIELD_TYPES)


def resolve(cfg: RunConfig, check_clients: bool = True) -> Resolved:
    """Look up the task and algorithm, check that they fit, and build their settings: the
    task's paper defaults for algorithm settings first, then the user's overrides.
    Raises ConfigError.

    `check_clients=False` skips the checks that need the task's number of clients (which
    some tasks only know from their data), e.g. to validate a sweep before any data loads."""
    from raycompo.configuration.plugins import load

    # Types first (a config.json read from disk is untrusted); the ranges below say the same
    # as the command line's checks.
    check_types(cfg)
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
    from raycompo.tasks.sampler import SAMPLERS

    require(cfg.sampler in SAMPLERS, f"unknown sampler {cfg.sampler!r}; choose one of: {', '.join(SAMPLERS)}")
    require(cfg.threads is None or cfg.threads >= 1, f"threads must be >= 1, got {cfg.threads}")
    check_budget(cfg.budget, getattr(cfg, "system", None))
    from raycompo.configuration.plugins import load as load_plugin
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
    from raycompo.configuration.vectorize import plan, run_device

    check_transforms(cfg, algo_cls)
    uplink_steps = tuple(load("uplink", spec) for spec in cfg.uplink)  # an unknown one: an error now
    vectorized = plan(cfg.vectorize, algo_cls, algo_settings, task_cls, task, run_device(cfg.gpus_per_actor))  # 'on' where it cannot: an error now
    tables = None
    if profile is not None and task is not None:
        m = getattr(algo_settings, "clients_per_round", None)  # a cohort the availability must be able to fill
        tables = check_profile(profile, cfg.seed, n_clients,  # its files against the clients: an error now, not mid-run
                               m if isinstance(m, int) and not isinstance(m, bool) else None)
    reason = getattr(algo_cls, "own_cohorts", None)
    if profile is not None and reason and not profile.plain_selection:
        raise ConfigError(
            f"--system {profile.name}: algorithm {algo_cls.name} cannot run on a system that chooses cohorts among "
            f"online clients: {reason}, so availability, over-selection and the deadline would not apply to it. "
            "Use a profile whose clients are always online and drawn as the engine draws them (uniform, mobile-sync)")
    aggregation = aggregation_plan(cfg, settings, algo_cls, algo_settings, n_clients, profile, tables)
    return Resolved(cfg, task_cls, algo_cls, task_settings, algo_settings, n_clients,
                    vectorized if task is not None else None, profile, tables, aggregation, uplink_steps)


def aggregation_plan(cfg: RunConfig, settings: dict[str, Any], algo_cls: type, algo_settings: Any, n_clients: int,
                     profile: Any, tables: Any) -> Any:
    """The run's asynchronous aggregation (`raycompo.system.aggregation.Plan`), or None for
    'sync'; a ConfigError before anything runs for a configuration that cannot run (K > C,
    no clock, an algorithm without an asynchronous form, FedAsync's rho where the
    algorithm has no proximal term, no client ever online, a payload transform the
    asynchronous path does not apply yet: `check_async_transforms`)."""
    from raycompo.system.aggregation import aggregation_keys, plan

    keys = set(aggregation_keys())
    given = {k: v for k, v in settings.items() if k in keys}
    cohort = algo_settings.cohort_size(n_clients) if hasattr(algo_settings, "cohort_size") else n_clients
    reachable = None  # the clients that can ever be online (a trace's), None: all
    if profile is not None and tables is not None and cfg.aggregation != "sync":
        a = profile.availability
        population = a.model.create(a.settings, cfg.seed, n_clients, tables.availability).population
        reachable = None if population is None else len(population)
    p = plan(cfg.aggregation, cfg.concurrency, cfg.buffer, given, min(cohort, n_clients), n_clients,
             profile is not None, reachable)
    if p is None:
        return None
    form = algo_cls.asynchronous(algo_settings)
    if isinstance(form, str):
        raise ConfigError(f"--aggregation {p.kind}: {form}")
    check_async_transforms(cfg, p.kind)
    if p.settings.async_rho > 0 and not form.proximal:
        raise ConfigError(f"setting async_rho (FedAsync's proximal term) needs an algorithm whose local phase reads "
                          f"it; {algo_cls.name}'s does not: leave async_rho at 0")
    return p


def check_async_transforms(cfg: RunConfig, kind: str) -> None:
    """The payload transform that asynchronous aggregation refuses before anything runs:
    client-level DP. A server step's sum of at most K clipped updates would be a Gaussian
    mechanism, but a client may arrive twice in one buffer (its sensitivity is then not C)
    and no amplification argument covers the asynchronous selection; rather than claim an
    epsilon, the run is refused (docs/compression.md). `--compress` and `--compress-down`
    run through the one exchange (engine/exchange.py)."""
    if cfg.dp_clip is not None:
        raise ConfigError(
            f"--dp-clip / --dp-noise (client-level DP) with --aggregation {kind}: not supported: a server step's "
            "sum of clipped updates may hold one client twice, and no privacy accounting covers the asynchronous "
            "selection of clients, so no epsilon could be stated. Client-level DP runs with synchronous rounds "
            "(leave out --aggregation, --concurrency and --buffer)")


def check_transforms(cfg: RunConfig, algo_cls: type) -> None:
    """`compress`, `compress_down` and the DP settings, before anything runs: known methods
    and parameters (raycompo/compression/methods.py), keys the algorithm sends up (its
    declared `contributions`; any key where it declares none) and DP values in range; DP
    only for an algorithm whose cohorts the accountant describes (one that declares
    `own_cohorts` is refused with it); `--budget epsilon` only with DP. ConfigError
    otherwise."""
    from raycompo.compression.keys import compressible
    from raycompo.compression.methods import parse_method
    from raycompo.compression.privacy import check_dp

    declared = getattr(algo_cls, "contributions", {}) or {}
    allowed = compressible(declared)
    for key, text in (cfg.compress or {}).items():
        parse_method(text, key)
        if declared and key != "*" and key not in allowed:
            raise ConfigError(f"--compress {key}={text}: algorithm {algo_cls.name} does not send {key!r} up; "
                              f"its keys: {', '.join(allowed + ['*'])}")
    for key, text in (cfg.compress_down or {}).items():
        parse_method(text, key)
    dp = check_dp(cfg.dp_clip, cfg.dp_noise, cfg.dp_delta)
    own = getattr(algo_cls, "own_cohorts", None)
    if dp is not None and own:
        raise ConfigError(
            f"--dp-clip / --dp-noise (client-level DP) with algorithm {algo_cls.name}: it draws its own cohorts "
            f"({own}), and the accountant assumes each round's members are m distinct clients drawn uniformly "
            "without replacement through the engine (ctx.sample; raycompo/compression/privacy.py): a client drawn "
            "several times adds its clipped contribution once per draw, so a round's sensitivity and sampling are "
            "not what epsilon accounts for. Client-level DP runs with an algorithm that draws its cohort through "
            "the engine (e.g. fedavg, comfedl)")
    if "epsilon" in (cfg.budget or {}) and dp is None:
        raise ConfigError("budget epsilon needs client-level DP (--dp-clip C --dp-noise z): without it a run has no "
                          "epsilon column")
