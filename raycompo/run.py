"""Run one experiment.

    python -m raycompo.run --task dro-mnist5k --algo comfedl --rounds 200 \\
        --set lr=0.01 gamma=0.2 tau=5 --out runs/x

Writes runs/x/config.json (every setting, the seed, the status) and runs/x/metrics.csv
(one row per round). Exit codes: 0 completed, 2 bad input or missing data, 3 diverged.

`--task` and `--algo` also take your own classes: 'path/to/file.py:ClassName' or
'package.module:ClassName' (raycompo/configuration/plugins.py).

From Python, this module is callable: `raycompo.run(task, algo, rounds=...)` is
`raycompo.api.run` (see its docstring).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from raycompo.configuration.config import BACKENDS, RunConfig, check_types, resolve
from raycompo.costs.budget import BUDGET_KEYS, parse_budget
from raycompo.errors import ConfigError, RaycompoError
from raycompo.settings import parse_sets
from raycompo.watch.trackers import TRACKERS

EXIT_BAD_INPUT = 2
EXIT_DIVERGED = 3


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments shared by `run` and `bench`: what to run and where."""
    p.add_argument("--task", default="dro-mnist5k", help="task name (default: dro-mnist5k, needs no download)")
    p.add_argument("--algo", default="comfedl", help="algorithm name")
    p.add_argument("--rounds", type=int, default=100, help="communication rounds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--set", dest="sets", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                   help="task/algorithm settings, e.g. lr=0.01 gamma=0.2 tau=5 (see --list)")
    p.add_argument("--backend", choices=BACKENDS, default="ray",
                   help="ray (default here: client hosts as Ray actors) or inline (one process, the reference; the "
                        "default of raycompo.run() in Python, which starts no cluster; same rows to 1e-6)")
    p.add_argument("--clients-per-actor", type=int, default=None, help="clients hosted by one Ray actor (default: spread over the CPUs)")
    p.add_argument("--cpus-per-actor", type=float, default=1.0)
    p.add_argument("--gpus-per-actor", type=float, default=0.0, help="GPU fraction per host actor, e.g. 0.25")
    p.add_argument("--eval-every", type=int, default=1)
    p.add_argument("--data-dir", default=None, help="folder holding (or receiving) data sets")
    p.add_argument("--address", default=None, help="Ray cluster address (e.g. 'auto' on a `ray up` cluster)")
    p.add_argument("--eval-clients", type=int, default=None, metavar="K",
                   help="evaluate a seeded sample of K clients each evaluation round (default: all)")
    p.add_argument("--state-memory", type=float, default=None, metavar="GB",
                   help="memory for idle clients' state over all hosts; past it, states spill to disk")
    p.add_argument("--host-timeout", type=float, default=1800.0, metavar="S",
                   help="seconds a host actor may take to answer; then it is reported and restarted")
    p.add_argument("--vectorize", choices=("auto", "on", "off"), default="auto",
                   help="run each host's clients as one batched computation: auto (where supported), on, off (per client)")
    p.add_argument("--vectorize-memory", type=float, default=512.0, metavar="MB",
                   help="memory a host's batched chunk of clients may use (default 512)")
    p.add_argument("--sampler", choices=("randperm", "keyed"), default="keyed",
                   help="how clients' mini-batches are drawn: keyed (default: counter-based hashes, a chunk's clients "
                        "drawn at once, the same on CPU and CUDA; --compress's QSGD and rand-k draws keyed too) or randperm (the draws of "
                        "releases up to 0.1.1)")
    p.add_argument("--system", default=None, metavar="PROFILE",
                   help="simulate devices, availability and a clock: a built-in profile (uniform, mobile, mobile-sync, mobile-fastest) or a YAML "
                        "file; adds the columns sim_time, dropped, wasted_s, dropped_* (docs/system.md)")
    p.add_argument("--aggregation", choices=("sync", "buffered", "async"), default="sync",
                   help="sync (rounds of barriers, default), buffered (FedBuff: C clients in flight, K arrivals per "
                        "server step) or async (FedAsync: one arrival per server step); buffered/async need --system, "
                        "and --rounds counts server steps; settings: --set staleness=... server_lr=... (docs/system.md)")
    p.add_argument("--concurrency", type=int, default=None, metavar="C",
                   help="clients in flight at all times (buffered/async; default: the algorithm's cohort size)")
    p.add_argument("--buffer", type=int, default=None, metavar="K",
                   help="arrivals applied per server step (buffered; default min(10, C))")
    p.add_argument("--budget", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                   help="end the run (completed) at the first round whose cumulative cost reaches VALUE; "
                        "keys: " + ", ".join(BUDGET_KEYS) + " (sim_time with --system, epsilon with --dp-clip)")
    add_transform_arguments(p)
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads in this process (inline backend / driver); 1 is fastest for small models on a busy "
                        "machine. Recorded in config.json (this process's number when not given): --resume uses it again")
    p.add_argument("--log-events", action="store_true",
                   help="write events.csv in the run folder: one row per dispatch (client, model version, dispatch "
                        "and finish times in simulated seconds, fate: applied with its staleness, stale, dropped, "
                        "lost); docs/system.md")


def add_transform_arguments(p: argparse.ArgumentParser) -> None:
    """What happens to what travels: compression, client-level DP, the user's uplink steps."""
    p.add_argument("--compress", nargs="+", action="extend", default=[], metavar="KEY=METHOD[:PARAM]",
                   help="compress what clients send up, by contribution key (see --list) or *: qsgd:S, topk:K, randk:K, "
                        "sign (K < 1 a fraction); bytes_up counts the encoded size (docs/compression.md)")
    p.add_argument("--compress-down", nargs="+", action="extend", default=[], metavar="KEY=METHOD[:PARAM]",
                   help="compress what the server sends down, by payload key or *")
    p.add_argument("--dp-clip", type=float, default=None, metavar="C",
                   help="client-level DP (DP-FedAvg): clip each client's contribution, all keys sent up, to L2 norm C")
    p.add_argument("--dp-noise", type=float, default=None, metavar="Z",
                   help="DP noise multiplier z: N(0, z^2 C^2) added to the server's sums; adds the column epsilon")
    p.add_argument("--dp-delta", type=float, default=1e-5, metavar="DELTA", help="delta of the reported epsilon (default 1e-5)")
    p.add_argument("--uplink", action="append", default=[], metavar="SPEC",
                   help="a step of your own applied to what clients send up, after --compress and --dp-clip: "
                        "'path/to/file.py:ClassName' or 'package.module:ClassName' of an UplinkStep subclass; "
                        "repeatable, applied in order (docs/compression.md)")


def config_from_args(args: argparse.Namespace) -> RunConfig:
    return RunConfig(
        task=args.task, algo=args.algo, rounds=args.rounds, seed=args.seed, settings=parse_sets(args.sets),
        backend=args.backend, clients_per_actor=args.clients_per_actor, cpus_per_actor=args.cpus_per_actor,
        gpus_per_actor=args.gpus_per_actor, eval_every=args.eval_every, data_dir=args.data_dir,
        eval_clients=args.eval_clients, state_memory_gb=args.state_memory, host_timeout_s=args.host_timeout,
        vectorize=args.vectorize, vectorize_memory_mb=args.vectorize_memory, sampler=args.sampler,
        budget=parse_budget(args.budget),
        system=args.system, threads=args.threads, aggregation=args.aggregation, concurrency=args.concurrency,
        buffer=args.buffer, compress=parse_compress(args.compress, "--compress"),
        compress_down=parse_compress(args.compress_down, "--compress-down"), dp_clip=args.dp_clip,
        dp_noise=args.dp_noise, dp_delta=args.dp_delta, log_events=args.log_events, uplink=list(args.uplink),
    )


def parse_compress(items: list[str], option: str) -> dict[str, str]:
    """`['nw=topk:0.01', 'u=qsgd:4']` -> {'nw': 'topk:0.01', 'u': 'qsgd:4'} (checked further by
    `config.check_transforms`); ConfigError for an item that is not KEY=METHOD."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, method = item.partition("=")
        if not sep or not key.strip() or not method.strip():
            raise ConfigError(f"{option} expects KEY=METHOD[:PARAM] (e.g. '*=topk:0.01', 'u=qsgd:4'), got {item!r}")
        out[key.strip()] = method.strip()
    return out


def headline(metric: str, row: dict[str, Any]) -> str:
    """'val_acc 0.8123 (worst client 0.7000)': the task's main metric and its worst client."""
    from raycompo.watch.progress import headline as h

    return h(metric, row)


def progress_printer(total: int, metric: str, stream=None, mode: str = "auto"):
    """The progress observer of a run (raycompo/watch/progress.py): a tqdm bar on a terminal,
    at most ~100 plain lines otherwise."""
    from raycompo.watch.progress import RunProgress

    return RunProgress(total, metric, mode=mode, stream=stream)


def list_choices(task: str | None = None, algo: str | None = None) -> str:
    """The registered tasks and algorithms (built-in, and installed packages' entry points)
    with their settings; `task` / `algo` given as 'file.py:Class' or 'module:Class' specs
    are listed too. An algorithm's setting that a task sets otherwise (`Task.algo_defaults`)
    is marked: with `task`, by the value a run on it uses; without, by the tasks that set
    their own."""
    import dataclasses

    from raycompo.configuration.config import algorithm_overrides
    from raycompo.configuration.plugins import (
        builtins,
        entry_points,
        is_spec_string,
        list_algorithms,
        list_tasks,
        load,
    )
    from raycompo.settings import field_docs

    lines = []
    tasks = dict(sorted(list_tasks().items()))
    if task:
        tasks = {task: load("task", task)}
    for title, kind, reg, spec in (("tasks", "task", list_tasks(), task), ("algorithms", "algorithm", list_algorithms(), algo)):
        lines.append(f"{title}:")
        origin = {ep.name: f"  (package {ep.dist})" for ep in entry_points(kind) if ep.name not in builtins(kind)}
        entries = sorted(reg.items())
        if spec and is_spec_string(spec):
            entries.append((spec, load(kind, spec)))
            origin[spec] = "  (your own)"
        for name, cls in entries:
            lines.append(f"  {name}{origin.get(name, '')}")
            docs = field_docs(cls.Settings)
            used = {t: algorithm_overrides(t_cls, cls, {}) for t, t_cls in tasks.items()} if kind == "algorithm" else {}
            for f in dataclasses.fields(cls.Settings):
                default = f.default if f.default is not dataclasses.MISSING else "(required)"
                own = {t: v[f.name] for t, v in used.items() if f.name in v and v[f.name] != default}
                if task and own:
                    shown = f"{own[task]!r}  (task {task}'s; the algorithm's default: {default!r})"
                elif own:
                    shown = f"{default!r}  (tasks that set their own: {', '.join(f'{t} {v!r}' for t, v in own.items())})"
                else:
                    shown = repr(default)
                lines.append(f"      {f.name} = {shown}  {docs.get(f.name, '')}")
            sent = getattr(cls, "contributions", None)
            if kind == "algorithm" and sent:  # what --compress and --dp-clip act on
                lines.append("      sends up (--compress KEY): " + "; ".join(
                    f"{phase}: " + ", ".join(f"{key} ({s.describe()})" for key, s in keys.items())
                    for phase, keys in sent.items()))
    from raycompo.system import PROFILES

    lines.append("system profiles (--system NAME, or a YAML file; docs/system.md):")
    lines += [f"  {name}  {p.description}" for name, p in PROFILES.items()]
    from raycompo.system.aggregation import AggregationSettings

    lines.append("aggregation settings (--aggregation buffered|async, --set KEY=VALUE; docs/system.md):")
    docs = field_docs(AggregationSettings)
    lines += [f"      {f.name} = {f.default!r}  {docs.get(f.name, '')}" for f in dataclasses.fields(AggregationSettings)]
    return "\n".join(lines)


EXIT_FAILED = 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m raycompo.run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(p)
    p.add_argument("--out", default=None, help="output folder for config.json, metrics.csv and checkpoint.pt")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a run already in --out (its files are removed first; a folder holding other files is refused)")
    p.add_argument("--resume", metavar="DIR", default=None,
                   help="continue the run in DIR (interrupted, failed or killed) from its last checkpoint; "
                        "its settings come from DIR/config.json: --rounds may change the total (not below the "
                        "checkpoint), placement options apply, options that define the run must repeat its values; "
                        "a completed run with no more rounds asked for has nothing left to do (exit 0)")
    p.add_argument("--checkpoint-every", type=int, default=None, metavar="K",
                   help="checkpoint every K rounds and at the end (default 10)")
    p.add_argument("--max-failures", type=int, default=3,
                   help="actor failures (a host or the driver died) recovered from the last checkpoint before the run fails")
    p.add_argument("--quiet", action="store_true", help="no progress bar or lines")
    p.add_argument("--tracker", action="append", choices=TRACKERS, default=[],
                   help="also log to an experiment tracker: mlflow (MLFLOW_TRACKING_URI, else <out>/mlruns) or "
                        "wandb (WANDB_MODE=offline works without a network); repeatable")
    p.add_argument("--no-dashboard", action="store_true", help="start Ray without its dashboard")
    p.add_argument("--list", action="store_true", help="list tasks, algorithms and their settings")
    return p


def given_options(argv: list[str]) -> set[str]:
    """The options (argparse dests) the command line gives, whatever their spelling
    (--flag=value, an abbreviation), told apart from defaults."""
    p = build_parser()
    for action in p._actions:
        action.default = argparse.SUPPRESS
    return set(vars(p.parse_args(argv)))


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    if args.list:
        return _print_choices(args, argv)
    from raycompo.engine import run
    from raycompo.engine.signals import exit_code

    out = args.out
    try:
        _check_run_options(args)
        if args.resume:
            cfg, out = resume_config(args, sys.argv[1:] if argv is None else argv)
            if _already_completed(out, cfg):
                return 0
        else:
            cfg = config_from_args(args)
        check_types(cfg)  # a resumed config.json is untrusted: before its threads are set
        if cfg.threads:  # the run's own (a resume: the run's recorded number), before its data is built
            import torch

            torch.set_num_threads(cfg.threads)
        metric = resolve(cfg).task_cls.default_metric[0].removesuffix("_worst")
        from raycompo.watch.trackers import check_trackers, run_trackers

        watch = run_trackers(check_trackers(args.tracker), out)
        if not args.quiet:
            watch.insert(0, progress_printer(cfg.rounds, metric))
        result = run(
            cfg, out=out, overwrite=args.overwrite, observers=watch,
            address=args.address, include_dashboard=False if args.no_dashboard else None,
            checkpoint_every=args.checkpoint_every, max_failures=args.max_failures, resume=bool(args.resume),
        )
    except RaycompoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:
        code = exit_code(exc)  # 143 for SIGTERM, also where Ray re-raised it as a plain KeyboardInterrupt
        print(f"interrupted{_resume_hint(out)}", file=sys.stderr)
        return code
    except Exception as exc:  # a failure the run could not recover from
        from pathlib import Path

        from raycompo.runfolder.failure import ERROR_FILE, root_error, traceback_text, user_frames
        from raycompo.runfolder.results import error_line

        print(f"run failed: {type(root_error(exc)).__name__}: {error_line(exc)}{_resume_hint(out)}", file=sys.stderr)
        for frame in user_frames(traceback_text(exc)):  # where in the user's own code (a plugin's file)
            print(f"  at {frame}", file=sys.stderr)
        if out and (Path(out) / ERROR_FILE).exists():
            print(f"  the whole traceback: {Path(out) / ERROR_FILE}", file=sys.stderr)
        return EXIT_FAILED
    return _report(result, cfg, metric, out)


def _print_choices(args: argparse.Namespace, argv: list[str] | None) -> int:
    """`--list`: the tasks, algorithms and their settings (those of `--task` / `--algo` when
    given); the exit code."""
    try:
        print(list_choices(args.task if "--task" in _argv(argv) else None,
                           args.algo if "--algo" in _argv(argv) else None))
    except RaycompoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def _check_run_options(args: argparse.Namespace) -> None:
    """RaycompoError for --threads, --checkpoint-every or --max-failures out of range."""
    if args.threads is not None and args.threads < 1:
        raise RaycompoError(f"--threads must be >= 1, got {args.threads}")
    if args.checkpoint_every is not None and args.checkpoint_every < 1:
        raise RaycompoError(f"--checkpoint-every must be >= 1, got {args.checkpoint_every}")
    if args.max_failures < 0:
        raise RaycompoError(f"--max-failures must be >= 0, got {args.max_failures}")


def _already_completed(out: str, cfg: RunConfig) -> bool:
    """Whether the run in `out` that --resume continues is completed with no more rounds
    (or budget) asked for; says so."""
    from raycompo.runfolder.results import budget_reached, finished

    done = finished(out, cfg.rounds, cfg.budget)
    if done is None:
        return False
    reached = budget_reached(done, cfg.budget)
    print(f"nothing left to do: {out} is already completed ({done.get('rounds_done')} rounds, {reached}); "
          "raise --budget to run more" if reached else
          f"nothing left to do: {out} is already completed ({cfg.rounds} rounds); "
          f"pass --rounds N with N > {cfg.rounds} to run more")
    return True


def _report(result: Any, cfg: RunConfig, metric: str, out: str | None) -> int:
    """The run's last line (diverged, or done with its headline metric); the exit code."""
    final = result.final
    where = f"; results in {out}" if out else ""
    if result.status == "diverged":
        print(f"run diverged at round {final.get('round')} (non-finite loss or model){where}", file=sys.stderr)
        return EXIT_DIVERGED
    rounds = f"{final.get('round')} rounds, {final['stopped']}" if final.get("stopped") else f"{cfg.rounds} rounds"
    print(f"done: {cfg.algo} on {cfg.task}, {rounds}: {headline(metric, final)}{where}")
    return 0


def _argv(argv: list[str] | None) -> list[str]:
    """The command's words, with --flag=value split (to tell what was given)."""
    words = sys.argv[1:] if argv is None else argv
    return [w.split("=", 1)[0] for w in words]


def _resume_hint(out: str | None) -> str:
    from pathlib import Path

    try:
        if out and (Path(out) / "checkpoint.pt").exists():
            return f"; continue with: python -m raycompo.run --resume {out}"
    except OSError:  # a path the system refuses (too long...): no hint
        pass
    return ""


RESUME_CHANGES = {
    "task": "task", "algo": "algo", "seed": "seed", "sets": "settings", "eval_every": "eval_every",
    "eval_clients": "eval_clients", "backend": "backend", "clients_per_actor": "clients_per_actor",
    "cpus_per_actor": "cpus_per_actor", "gpus_per_actor": "gpus_per_actor", "data_dir": "data_dir",
    "state_memory": "state_memory_gb", "host_timeout": "host_timeout_s", "vectorize": "vectorize",
    "vectorize_memory": "vectorize_memory_mb", "budget": "budget", "system": "system", "threads": "threads",
    "aggregation": "aggregation", "concurrency": "concurrency", "buffer": "buffer",
    "compress": "compress", "compress_down": "compress_down", "dp_clip": "dp_clip", "dp_noise": "dp_noise",
    "dp_delta": "dp_delta", "log_events": "log_events", "uplink": "uplink", "sampler": "sampler",
}
"""Options given with --resume -> RunConfig fields: those that define the run's results
(results.DEFINING) must repeat the run's values; the others apply to the rest of the run."""


def resume_config(args: argparse.Namespace, argv: list[str]) -> tuple[RunConfig, str]:
    """The config of the run in --resume DIR (results.resumed_config): --rounds may
    change the total; other options that define the run must repeat its values."""
    from raycompo.runfolder.results import resumed_config

    given = given_options(argv)
    if "overwrite" in given:
        raise RaycompoError("--resume continues a run; --overwrite starts one again: give one of them")
    if "out" in given and args.out != args.resume:
        raise RaycompoError(f"--resume {args.resume} writes into {args.resume}; to start a new run in {args.out}, "
                            "leave out --resume")
    parsers = {"sets": parse_sets, "budget": parse_budget, "compress": lambda v: parse_compress(v, "--compress"),
               "compress_down": lambda v: parse_compress(v, "--compress-down")}
    changes = {field: (parsers[dest](getattr(args, dest)) if dest in parsers else getattr(args, dest))
               for dest, field in RESUME_CHANGES.items() if dest in given}
    cfg = resumed_config(args.resume, rounds=args.rounds if "rounds" in given else None, changes=changes)
    return cfg, args.resume


if __name__ == "__main__":
    sys.exit(main())
else:
    from raycompo import api

    api.callable_module(__name__, api.run)
