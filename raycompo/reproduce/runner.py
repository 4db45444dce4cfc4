"""Plan a claim's runs (variant x seed), skip the finished ones, run the rest sequentially
or as Ray tasks (one CPU each, inline backend, one torch thread)."""

from __future__ import annotations

import json
import shlex
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raycompo.configuration.config import RunConfig, resolve
from raycompo.errors import ConfigError
from raycompo.reproduce.spec import LABEL, Claim, Variant
from raycompo.tasks.sampler import DEFAULT_SAMPLER, sampler_of

FINISHED = ("completed", "diverged")
"""A run folder with this status (and the same config) is not run again: both are
outcomes (a diverged run diverges again with the same seed)."""
SAME = ("task", "algo", "rounds", "seed", "settings", "eval_every", "data_dir")


@dataclass
class Job:
    variant: Variant
    seed: int
    cfg: RunConfig
    out: Path

    @property
    def name(self) -> str:
        return self.out.name


def scaled(value: int, factor: float) -> int:
    return max(1, round(value * factor))


def applicable(extra: dict[str, Any], task: str, algo: str) -> dict[str, Any]:
    """The extra settings that the task or the algorithm knows (e.g. `gamma` applies to
    ComFedL variants, not to FedAvg's)."""
    from raycompo.configuration.plugins import load
    from raycompo.settings import names

    known = set(names(load("task", task).Settings)) | set(names(load("algorithm", algo).Settings))
    return {k: v for k, v in extra.items() if k in known}


def parse_with(item: str | type | tuple[str | type, str | None]) -> tuple[str | type, str | None]:
    """`--with SPEC[=LABEL]` -> (spec, label or None). The label is what follows the last '='
    when that is a label (a spec never ends in one: 'file.py:Class', 'module:Class', a name)."""
    if isinstance(item, tuple):
        return item[0], item[1]
    if isinstance(item, str) and "=" in item:
        spec, _, label = item.rpartition("=")
        if not any(ch in label for ch in ":/\\"):  # else the '=' belongs to a path
            return spec.strip(), label.strip()
    return item, None


def yours(claim: Claim, with_algorithms: list | None, settings: dict[str, Any] | None = None) -> list[Variant]:
    """The user's algorithms as extra variants of `claim` (`--with SPEC[=LABEL]`), each
    loaded now: a spec that names no algorithm is a ConfigError before anything runs.
    `settings` (`--with-set`) apply to these variants only, on top of the claim's and --set's.
    Their `algo` is the spec that finds the class from any folder (a file by its absolute
    path), so commands.sh re-runs them anywhere."""
    from raycompo.configuration.plugins import display_name, load, spec_of

    if isinstance(with_algorithms, (str, type, tuple)):
        with_algorithms = [with_algorithms]
    out: list[Variant] = []
    taken = {v.label for v in claim.variants}
    for item in with_algorithms or []:
        spec, label = parse_with(item)
        try:
            cls = load("algorithm", spec)
        except ConfigError as exc:
            raise ConfigError(f"--with {spec if isinstance(spec, str) else repr(spec)}: {exc}") from None
        label = label or "".join(ch if ch.isalnum() or ch in "._+-" else "-" for ch in display_name(cls)).strip("-")
        if not LABEL.match(label or ""):
            raise ConfigError(f"--with {spec}: label {label!r} must be file-name safe (letters, digits, . _ + = -); "
                              "give one as --with SPEC=LABEL")
        if label in taken:
            raise ConfigError(f"--with {spec}: label {label!r} is already a variant of {claim.name} (or another --with); "
                              "give another as --with SPEC=LABEL")
        taken.add(label)
        out.append(Variant(label, spec_of(cls, "algorithm"), dict(settings or {}), yours=True))
    if settings and not out:
        raise ConfigError("--with-set applies to --with algorithms only; give one with --with SPEC")
    return out


def plan(claim: Claim, out: Path, seeds: int | None = None, rounds: int | None = None, full: bool = False,
         data_dir: str | None = None, extra: dict[str, Any] | None = None, extras: list[Variant] | None = None) -> list[Job]:
    """Every run of the claim. `rounds` sets the claim's budget; variants with rounds of their
    own (e.g. rounds = 1000 / p) are scaled by the same factor, and so are evaluation periods.
    Settings: the claim's (or --full's), then `extra` where the task or algorithm knows the key,
    then the variant's own (what the variants vary is never overridden).

    `extras` (see `yours`): the user's variants, run after the claim's with the same seeds, on
    the claim's budget and evaluation period, with the claim's settings that their algorithm
    or the task knows, then `extra`'s, then their own."""
    if full and claim.full is None:
        print(f"note: {claim.name} already runs on the paper's task ({claim.task}); --full changes nothing")
    f = claim.full if full else None
    task = f.task if f else claim.task
    base_rounds = (f.rounds if f and f.rounds else None) or claim.rounds
    base_eval = (f.eval_every if f and f.eval_every else None) or claim.eval_every
    base_settings = dict(f.settings) if f else dict(claim.settings)
    target = rounds or base_rounds
    extras = list(extras or [])
    unused = set(extra or {}) - {k for v in (*claim.variants, *extras) for k in applicable(extra or {}, task, v.algo)}
    if unused:
        raise ConfigError(f"--set {', '.join(sorted(unused))}: no run of claim {claim.name} on {task} has this setting")
    jobs = []
    sampled = {"sampler": claim.sampler} if claim.sampler else {}  # the claim's, where its report was made with another
    for v in claim.variants:
        r = scaled(v.rounds or claim.rounds, target / claim.rounds)
        if v.eval_every:
            ev = scaled(v.eval_every, target / claim.rounds)
        else:
            ev = scaled(base_eval, target / base_rounds)
        ev = min(ev, r)
        settings = {**base_settings, **applicable(extra or {}, task, v.algo), **v.settings}
        for seed in range(seeds if seeds is not None else claim.seeds):
            cfg = RunConfig(task=task, algo=v.algo, rounds=r, seed=seed, settings=settings, backend="inline",
                            eval_every=ev, data_dir=data_dir, system=v.system, budget=dict(v.budget), threads=1,
                            **{**sampled, **v.run}, **v.transforms)
            jobs.append(Job(v, seed, cfg, out / "runs" / f"{v.label}-s{seed}"))
    for v in extras:
        unknown = set(v.settings) - set(applicable(v.settings, task, v.algo))
        if unknown:
            raise ConfigError(f"--with-set {', '.join(sorted(unknown))}: neither {task} nor {v.algo} has this setting")
        ev = min(scaled(base_eval, target / base_rounds), target)
        settings = {**applicable(base_settings, task, v.algo), **applicable(extra or {}, task, v.algo), **v.settings}
        for seed in range(seeds if seeds is not None else claim.seeds):
            cfg = RunConfig(task=task, algo=v.algo, rounds=target, seed=seed, settings=settings, backend="inline",
                            eval_every=ev, data_dir=data_dir, threads=1, **sampled)
            jobs.append(Job(v, seed, cfg, out / "runs" / f"{v.label}-s{seed}"))
    return jobs


def validate(jobs: list[Job]) -> None:
    """Refuse unknown or out-of-range settings before anything runs (ConfigError)."""
    seen = set()
    for j in jobs:
        key = json.dumps({**j.cfg.to_dict(), "seed": 0}, sort_keys=True, default=str)  # system, aggregation too
        if key not in seen:
            seen.add(key)
            resolve(j.cfg, check_clients=False)


def command(job: Job) -> str:
    """The `python -m raycompo.run` line that repeats this run into its folder."""
    c = job.cfg
    parts = ["python", "-m", "raycompo.run", "--task", c.task, "--algo", c.algo, "--rounds", str(c.rounds),
             "--seed", str(c.seed), "--backend", c.backend, "--threads", str(c.threads or 1), "--quiet"]
    if c.eval_every != 1:
        parts += ["--eval-every", str(c.eval_every)]
    if c.data_dir:
        parts += ["--data-dir", c.data_dir]
    if c.system:
        parts += ["--system", c.system]
    if c.budget:
        parts += ["--budget"] + [f"{k}={x:g}" for k, x in c.budget.items()]
    if c.sampler != DEFAULT_SAMPLER:
        parts += ["--sampler", c.sampler]
    for key, value in job.variant.run.items():  # --aggregation buffered --concurrency 10 --buffer 5, --log-events
        flag = f"--{key.replace('_', '-')}"
        parts += ([flag] if value else []) if isinstance(value, bool) else [flag, str(value)]
    for option, spec in (("--compress", c.compress), ("--compress-down", c.compress_down)):
        if spec:
            parts += [option] + [f"{k}={m}" for k, m in spec.items()]
    if c.dp_clip is not None:
        parts += ["--dp-clip", f"{c.dp_clip:g}", "--dp-delta", f"{c.dp_delta:g}"]
        if c.dp_noise is not None:
            parts += ["--dp-noise", f"{c.dp_noise:g}"]
    if c.settings:
        parts += ["--set"] + [f"{k}={'none' if v is None else v}" for k, v in c.settings.items()]
    parts += ["--out", str(job.out), "--overwrite"]
    return " ".join(shlex.quote(p) for p in parts)


def read_config(out: Path) -> dict[str, Any] | None:
    try:
        return json.loads((out / "config.json").read_text())
    except (OSError, ValueError):
        return None


def is_done(job: Job) -> bool:
    cfg = read_config(job.out)
    if not cfg or cfg.get("status") not in FINISHED:
        return False
    want = job.cfg.to_dict()
    if not all(cfg.get(k) == want[k] for k in SAME):
        return False
    defaults = RunConfig().to_dict()  # a variant's system, budget, aggregation...: a config.json without the key had the default
    if not all(cfg.get(k, defaults[k]) == want[k] for k in ("system", "budget", *job.variant.run)):
        return False
    if sampler_of(cfg) != want["sampler"]:  # a folder from before the setting drew with randperm
        return False
    if cfg.get("code"):  # the user's own class: its source changed since, so the run is stale
        from raycompo.configuration.plugins import changed_code
        from raycompo.errors import RaycompoError

        try:
            r = resolve(job.cfg, check_clients=False)
        except RaycompoError:
            return False
        return not changed_code(cfg, r.task_cls, r.algo_cls)
    return True


def plugin_classes(jobs: list[Job]) -> dict[tuple[str, str], type]:
    """{(kind, spec): class} of the jobs' classes named by a spec string (the user's own):
    sent along with each run, so a worker on another node needs no copy of the file."""
    from raycompo.configuration.plugins import is_spec_string, loaded

    specs: dict[str, str] = {}
    for j in jobs:
        if is_spec_string(j.cfg.algo):
            specs[j.cfg.algo] = "algorithm"
        if is_spec_string(j.cfg.task):
            specs[j.cfg.task] = "task"
    return loaded(specs)


def execute(cfg_dict: dict[str, Any], out: str, classes: dict[tuple[str, str], type] | None = None,
            tracking: dict[str, Any] | None = None) -> dict[str, Any]:
    """One run, in this process (inline backend, one torch thread). Never raises. `classes`:
    the user's classes by (kind, spec) (`plugin_classes`), remembered before the config's
    specs are looked up, so a Ray worker finds them without the user's files.
    `tracking`: {"trackers": [...], "experiment": claim, "uri": MLflow store} (trackers.py)."""
    import torch

    from raycompo.configuration.plugins import remember
    from raycompo.engine import run
    from raycompo.errors import RaycompoError

    torch.set_num_threads(1)
    remember(classes or {})
    start = time.perf_counter()
    try:
        watch = []
        if tracking and tracking.get("trackers"):
            from raycompo.watch.trackers import run_trackers

            watch = run_trackers(tracking["trackers"], out, experiment=tracking.get("experiment"),
                                 group=tracking.get("experiment"), uri=tracking.get("uri"))
        result = run(RunConfig.from_dict(cfg_dict), out=out, overwrite=True, observers=watch)
        status, error, bad_input = result.status, "", False
    except RaycompoError as exc:  # missing data, bad settings: every run of the claim would fail so
        status, error, bad_input = "failed", str(exc), True
    except Exception as exc:  # one broken run must not stop the claim
        status, error, bad_input = "failed", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}", False
    return {"out": out, "status": status, "error": error, "bad_input": bad_input, "time_s": time.perf_counter() - start}


def execute_population(cfg_dicts: list[dict[str, Any]], outs: list[str], classes: dict[tuple[str, str], type] | None = None,
                       tracking: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """`execute` for a variant's seeds as one population (raycompo/engine/population.py: their
    local steps as rows of one batched computation, each run's rows as alone), in this
    process; each run's result as `execute` returns it (`time_s`: the population's).
    `tracking` must be None (the trackers log one run per process)."""
    import functools

    import torch

    from raycompo.configuration.plugins import remember
    from raycompo.engine.population import run_population
    from raycompo.errors import RaycompoError

    if tracking and tracking.get("trackers"):
        raise ConfigError("--population runs a variant's seeds in one process: it cannot log to a tracker (--tracker)")
    torch.set_num_threads(1)
    remember(classes or {})
    start = time.perf_counter()
    runs = [functools.partial(_population_member, cfg, out) for cfg, out in zip(cfg_dicts, outs)]
    outcomes, _ = run_population(runs)
    took = time.perf_counter() - start
    results = []
    for out, outcome in zip(outs, outcomes):
        res = {"out": out, "status": "", "error": "", "bad_input": False, "time_s": took}
        if isinstance(outcome, RaycompoError):
            res.update(status="failed", error=str(outcome), bad_input=True)
        elif isinstance(outcome, BaseException):
            res.update(status="failed", error=f"{type(outcome).__name__}: {outcome}")
        else:
            res["status"] = outcome.status
        results.append(res)
    return results


def _population_member(cfg_dict: dict[str, Any], out: str, seat: Any) -> Any:
    from raycompo.engine import run

    return run(RunConfig.from_dict(cfg_dict), out=out, overwrite=True, hosts=seat)


def variants(jobs: list[Job]) -> list[list[Job]]:
    """The jobs grouped by configuration but for the seed (a variant's seeds), in order."""
    groups: dict[str, list[Job]] = {}
    for j in jobs:
        d = j.cfg.to_dict()
        d.pop("seed", None)
        groups.setdefault(json.dumps(d, sort_keys=True, default=str), []).append(j)
    return list(groups.values())


def run_jobs(jobs: list[Job], workers: int = 1, address: str | None = None,
             log: Callable[[str], None] = print, progress: Any = None,
             tracking: dict[str, Any] | None = None, population: bool = False) -> list[dict[str, Any]]:
    """Run the jobs not yet done; `workers` at a time (Ray tasks), or here one by one (1).
    `progress`: a `raycompo.watch.progress.SweepProgress` given the total here and a line per
    finished run (instead of `log`); `tracking`: see `execute`. `population`: each variant's
    seeds run as one population (`execute_population`; a Ray task per variant)."""
    todo = [j for j in jobs if not is_done(j)]
    if len(todo) < len(jobs):
        log(f"{len(jobs) - len(todo)} of {len(jobs)} runs already finished; skipping them")
    results: list[dict[str, Any]] = []
    if progress is not None:
        progress.total = len(todo)
        if todo:
            progress.begin()

    def report(res: dict[str, Any]) -> None:
        if res.get("bad_input"):
            from raycompo.errors import RaycompoError

            raise RaycompoError(f"{Path(res['out']).name}: {res['error']}")
        results.append(res)
        msg = f"[{len(results)}/{len(todo)}] {Path(res['out']).name}: {res['status']} ({res['time_s']:.1f} s)"
        if res["error"]:
            msg += f"\n    {res['error'].strip().splitlines()[0]}"
        if progress is not None:
            progress.done(msg)
        else:
            log(msg)

    try:
        return _run_todo(todo, workers, address, report, results, tracking, population)
    finally:
        if progress is not None:
            progress.close()


def _run_todo(todo, workers, address, report, results, tracking, population=False):
    if not todo:
        return results
    classes = plugin_classes(todo)
    groups = variants(todo) if population else [[j] for j in todo]

    def call(group: list[Job], shipped: Any = None) -> tuple:
        """The arguments of one call of `execute` (a job) or `execute_population` (a group);
        `shipped`: the classes as a Ray object (default: the classes themselves)."""
        outs = [str(j.out.resolve()) for j in group]  # absolute: a Ray worker's folder is not this process's
        given = classes if shipped is None else shipped
        if population:
            return ([j.cfg.to_dict() for j in group], outs, given, tracking)
        return (group[0].cfg.to_dict(), outs[0], given, tracking)

    if workers <= 1 and address is None:
        for group in groups:
            answer = execute_population(*call(group)) if population else execute(*call(group))
            for res in answer if population else [answer]:
                report(res)
        return results
    import ray

    from raycompo.engine.ray_start import ensure_ray

    started = not ray.is_initialized()
    # --address: joined within RAYCOMPO_CONNECT_TIMEOUT; none: a private local Ray (never a
    # cluster `ray start` left on the machine), on loopback only. With Ray already up (a
    # notebook's ray.init()) it only has Ray's pickler ship the user's classes by value.
    ensure_ray(address, include_dashboard=False, num_cpus=None if address else workers, quiet=True)
    pending: list = []
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(execute_population if population else execute)
        shipped = ray.put(classes)  # the user's classes, pickled by value (plugins.ship), once
        queue = list(groups)
        while queue or pending:
            while queue and len(pending) < workers:
                pending.append(remote.remote(*call(queue.pop(0), shipped)))
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                answer = ray.get(ref)
                for res in answer if population else [answer]:
                    report(res)
    finally:
        for ref in pending:  # after an error: the claim stops
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()
    return results
