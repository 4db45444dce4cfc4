"""Run one experiment end to end: resolve, start the driver where the backend says, run
the loop, and tell the observers (output files, progress, Tune, dashboard) what happened."""

from __future__ import annotations

import functools
import re
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from raycompo.configuration import plugins
from raycompo.configuration.backends import get_backend
from raycompo.configuration.config import RunConfig, resolve
from raycompo.configuration.vectorize import resolved_plan
from raycompo.engine import checkpoint, memory, signals
from raycompo.engine.actor_failures import ACTOR_FAILURES
from raycompo.engine.driver import RemoteDriver, start_driver
from raycompo.engine.ledger import BREAKDOWN_COLUMNS
from raycompo.engine.loop import run_rounds
from raycompo.engine.placement import plan_placement
from raycompo.engine.ray_metrics import RayMetrics
from raycompo.engine.ray_start import ensure_ray
from raycompo.engine.signals import interruptible
from raycompo.errors import ConfigError
from raycompo.runfolder import lockfile
from raycompo.runfolder.clients_file import read_clients
from raycompo.runfolder.costs_file import resume_rows
from raycompo.runfolder.events_file import check_resume as check_events
from raycompo.runfolder.events_file import read_events
from raycompo.runfolder.results import RunWriter, read_config, version_note, version_record
from raycompo.system.event_log import EVENT_COLUMNS
from raycompo.tasks.base import Task
from raycompo.watch.observers import Callback, Observer, Observers, Row, RunInfo
from raycompo.watch.per_client import ClientMetrics


@dataclass
class RunResult:
    """What a run returns (also `raycompo.run`'s result)."""

    status: str
    """'completed' or 'diverged'."""
    rows: list[Row] = field(default_factory=list)
    """One dict per row of metrics.csv (round 0 is the initial model)."""
    config: dict[str, Any] = field(default_factory=dict)
    """What config.json holds: the RunConfig, the effective settings, the status, the
    placement, the user's code (spec and source digest) and the task's partition."""
    out: str | None = None
    """The run folder (None: nothing was written)."""
    cost_rows: list[Row] = field(default_factory=list)
    """The ledger's per-key costs by round (engine/ledger.py): one dict per (round,
    direction, key) with its values and bytes, as the run folder's costs.csv holds them."""
    client_records: list[ClientMetrics] = field(default_factory=list, repr=False)
    """The evaluations' per-client values, kept here only for a run without a folder
    (with one they are in out/clients.csv)."""
    event_rows: list[Row] = field(default_factory=list, repr=False)
    """The events of a run that logs them (`log_events`) and has no folder (with one they
    are in out/events.csv): one dict per dispatch, events.csv's columns."""

    @property
    def events(self) -> pd.DataFrame:
        """One row per dispatch of a run with `log_events` (columns step, dispatch, client,
        version, dispatched_s, finished_s, fate, staleness; raycompo/system/event_log.py);
        what out/events.csv holds (read from it when the run has a folder). Empty without
        `log_events`."""
        rows = read_events(self.out) if self.out is not None else self.event_rows
        return pd.DataFrame(rows, columns=list(EVENT_COLUMNS))

    @property
    def clients(self) -> pd.DataFrame:
        """Every evaluated client's metrics, one row per (round, client, metric): columns
        round, client, metric, value, n_samples (and a simulated system's per-client
        columns); what out/clients.csv holds (read from it when the run has a folder)."""
        if self.out is not None:
            return read_clients(self.out)
        if not self.client_records:
            return pd.DataFrame(columns=["round", "client", "metric", "value", "n_samples"])
        return pd.concat([c.frame() for c in self.client_records], ignore_index=True)

    @property
    def metrics(self) -> pd.DataFrame:
        """The rows as a DataFrame with exactly the columns of metrics.csv (those of the
        first row, in its order; later rows' extra keys are not columns there either)."""
        return metrics_frame(self.rows)

    @property
    def costs(self) -> pd.DataFrame:
        """`cost_rows` as a DataFrame (columns round, direction, key, values, bytes)."""
        return pd.DataFrame(self.cost_rows, columns=list(BREAKDOWN_COLUMNS))

    @property
    def final(self) -> Row:
        return self.rows[-1] if self.rows else {}


def _one_process_per_folder(fn):
    """`run` holds the lock of its output folder from before it reads anything there to
    after its last write (raycompo/runfolder/lockfile.py): a second process is refused."""

    @functools.wraps(fn)
    def locked(cfg: RunConfig, out: str | None = None, *args: Any, **kwargs: Any) -> RunResult:
        if not out:
            return fn(cfg, out, *args, **kwargs)
        with lockfile.hold(out, "resume" if kwargs.get("resume") else "run"):
            return fn(cfg, out, *args, **kwargs)

    return locked


@_one_process_per_folder
def run(
    cfg: RunConfig,
    out: str | None = None,
    progress: Callable[[Row], None] | None = None,
    overwrite: bool = False,
    driver: str = "actor",
    address: str | None = None,
    include_dashboard: bool | None = None,
    placement_group: Any = None,
    namespace: str | None = None,
    observers: Sequence[Observer] = (),
    checkpoint_every: int | None = None,
    max_failures: int = 3,
    resume: bool = False,
    log: Callable[[str], None] | None = None,
    hosts: Any = None,
) -> RunResult:
    """Run `cfg`. With the Ray backend the driver is an actor (`driver="actor"`) or lives in
    this process (`driver="local"`, as inside a Tune trial). Its actors live in Ray
    namespace `namespace` (default: a fresh `raycompo-<id>`). `progress(row)` and the
    `observers` see every row.

    Durability: with `out` (or the Ray backend) a checkpoint is taken every
    `checkpoint_every` rounds (default 10) and at the end, into `out/checkpoint.pt`. When a
    Ray actor dies (a host or the driver), the run restarts its actors, restores the last
    checkpoint (read back from `out`; kept in memory only when there is no `out`) and
    replays from there, at most `max_failures` times. `resume=True` continues the run in
    `out` from its checkpoint, which must be this run's (same task, algorithm, settings,
    seed, clients and model shape) and at most at round `cfg.rounds`, with metrics.csv
    holding every row up to it; `overwrite=True` first removes every file of the run that
    was in `out`. One process at a time writes `out` (it holds the folder's lock).

    `hosts` (Ray backend, `driver="local"`): where the host actors come from, e.g. a
    `host_actors.ReusedHosts` that keeps them for the next run (a sweep's trials); by
    default they are started for this run and killed at its end.

    Raises ConfigError / DataUnavailableError on bad input, `Interrupted` on SIGINT /
    SIGTERM (status 'interrupted'); any other error marks the run 'failed' and is re-raised.
    A diverged run returns status 'diverged'."""
    signals.forget()  # a signal from before this run (e.g. an earlier run in a notebook) is not ours
    cfg = use_threads(cfg.canonical())  # canonical: recorded so that any folder (and --resume) finds the classes again
    resolved = resolve(cfg)  # fail fast, before any actor starts
    backend = get_backend(cfg.backend)
    if not (backend.uses_ray and address):  # a population this machine cannot hold: exit 2, no folder
        memory.check(resolved, backend.uses_ray)  # (joining a cluster: checked against it below)
    say = log or _say_on_stderr
    _check_durability(max_failures, checkpoint_every, resume, out, overwrite)
    fingerprint = checkpoint.fingerprint(resolved)
    start_ckpt, rows, cost_rows, stored = _resume_point(out if resume else None, fingerprint, cfg.rounds, resolved, say)
    start_round = int(start_ckpt["round"]) if start_ckpt is not None else 0
    config = _config_record(cfg, resolved, stored, start_round)
    # Ray before the run folder exists: a cluster that never answers (or SIGTERM while waiting
    # for it) leaves nothing that blocks the same `out` next time.
    namespace, label = _join_ray(address, include_dashboard, namespace, out) if backend.uses_ray else (namespace, None)
    ckpt = _checkpointer(checkpoint_every, out, fingerprint, start_ckpt) if out or backend.uses_ray else None
    live = RayMetrics() if backend.uses_ray else None  # the dashboard's metrics
    restarts = _Restarts(functools.partial(_start, resolved, backend, driver, namespace, placement_group, (ckpt, live),
                                           label=label, hosts=hosts), start_ckpt, max_failures, say)
    del start_ckpt  # `restarts` holds it until it is restored: its client states need not stay in memory
    costs = KeptCosts(cost_rows)  # RunResult.costs (costs.csv holds the same rows)
    kept = KeptInMemory() if not out else None  # without a folder, RunResult.clients and .events come from memory
    marks: Observers | None = None  # once set, an interruption or failure is recorded in the folder
    try:
        with signals.deferred():  # a signal while the folder is made is raised once it can be marked
            writer = RunWriter(out, config, overwrite=overwrite, resume_rows=rows if resume else None,
                               resume_costs=cost_rows if resume else None) if out else None
            watch = marks = Observers([writer, kept, costs, ckpt, live, Callback(progress) if progress else None, *observers])
        if backend.uses_ray:  # checked against the cluster before any actor starts (a ConfigError, not a wait)
            _record_placement(cfg, resolved, placement_group, address, config, writer)
        with interruptible():
            info = RunInfo(cfg.to_dict(), resolved.n_clients, out=out, namespace=namespace, start_round=start_round,
                           resumed=bool(resume))
            status = restarts.run_rounds(cfg.rounds, watch, rows, ckpt, info,
                                         roll_back=functools.partial(_roll_back, rows, writer, kept, costs))
            if writer is not None and status == "completed":
                writer.write_frames(restarts.fed.artifacts())
            watch.on_end(status, rows[-1] if rows else {})
    except BaseException as exc:  # (no folder yet: e.g. --out holds another run; nothing to mark)
        if marks is not None:
            _mark_end(marks, exc, rows)
        raise
    finally:
        restarts.close()
    return _result(status, rows, config, out, writer, costs, kept)


def _say_on_stderr(msg: str) -> None:
    """A note of the run on stderr (`run` without `log`)."""
    print(msg, file=sys.stderr, flush=True)


def _check_durability(max_failures: int, checkpoint_every: int | None, resume: bool, out: str | None,
                      overwrite: bool) -> None:
    """ConfigError for `run`'s durability arguments that cannot work."""
    if max_failures < 0:
        raise ConfigError(f"max_failures (--max-failures) must be >= 0, got {max_failures}")
    if checkpoint_every is not None and checkpoint_every < 1:
        raise ConfigError(f"checkpoint_every (--checkpoint-every) must be >= 1, got {checkpoint_every}")
    if resume and (not out or overwrite):
        raise ConfigError("resume continues the run in its folder: give that folder (out), without overwrite")


def _resume_point(out: str | None, fingerprint: dict[str, Any], rounds: int, resolved: Any, say: Callable[[str], None]
                  ) -> tuple[dict[str, Any] | None, list[Row], list[Row], dict[str, Any] | None]:
    """(the checkpoint, the rows of metrics.csv and of costs.csv up to it, config.json as it
    was) of the run in `out` that resumes, and notes what changed since it started: the
    source of the user's classes, raycompo's version. (None, [], [], None) without `out`."""
    if not out:
        return None, [], [], None
    start_ckpt, rows = checkpoint.resume_point(out, fingerprint, rounds)
    start_round = int(start_ckpt["round"])
    # costs.csv's rows up to the checkpoint, as many as its ledger counted (else refused, like metrics.csv)
    cost_rows = resume_rows(out, start_round, start_ckpt.get("ledger"))
    check_events(out, start_round, resolved.config.log_events, start_ckpt.get("events"))  # there, readable, complete
    stored = read_config(out)  # the resumed run's config.json as it was
    changed = plugins.changed_code(stored, resolved.task_cls, resolved.algo_cls)
    if changed:
        say(f"raycompo: note: the source of {', '.join(changed)} changed since the run started; "
            f"rounds after {start_round} use the new code")
    if (note := version_note(stored, start_round)) is not None:
        say(f"raycompo: note: {note}")
    return start_ckpt, rows, cost_rows, stored


def _config_record(cfg: RunConfig, resolved: Any, stored: dict[str, Any] | None, start_round: int) -> dict[str, Any]:
    """What config.json records before the run starts: the RunConfig, raycompo's version (and
    those of the run's earlier parts, `stored` when it resumes), the effective settings, the
    vectorized plan, the system and aggregation, the user's code and the task's partition."""
    config = {**cfg.to_dict(), **version_record(stored, start_round), "effective_settings": resolved.effective_settings(),
              "vectorized": resolved_plan(resolved).record(),
              **({"system_profile": resolved.system_profile.record()} if resolved.system_profile else {}),
              **({"aggregation_plan": resolved.aggregation.record()} if resolved.aggregation else {}),
              **plugins.provenance(resolved.task_cls, resolved.algo_cls)}
    # Only a task that records its partition (e.g. task_from_arrays) is built once more here.
    overrides = getattr(resolved.task_cls, "partition_record", None) is not getattr(Task, "partition_record", None)
    partition = resolved.make_task().partition_record() if overrides else {}
    if partition:
        config["partition"] = partition
    return config


def _join_ray(address: str | None, include_dashboard: bool | None, namespace: str | None,
              out: str | None) -> tuple[str, str]:
    """Start or join Ray; (the run's namespace there, the label its actors show)."""
    ensure_ray(address, include_dashboard)
    # A namespace per run: the actor names driver, clients-0, ... stay unique when
    # several runs (or Tune trials) share a cluster.
    namespace = namespace or f"raycompo-{uuid.uuid4().hex[:8]}"
    return namespace, f"{out} ({namespace})" if out else namespace  # the label: in the actors' repr (the dashboard)


def _checkpointer(every: int | None, out: str | None, fingerprint: dict[str, Any],
                  start_ckpt: dict[str, Any] | None) -> checkpoint.Checkpointer:
    """The run's checkpointer, every `every` rounds (default 10), continuing from
    `start_ckpt` when the run resumes."""
    ckpt = checkpoint.Checkpointer(every or checkpoint.DEFAULT_EVERY, out, fingerprint)
    if start_ckpt is not None:
        ckpt.resumed_from(start_ckpt)
    return ckpt


def _record_placement(cfg: RunConfig, resolved: Any, placement_group: Any, address: str | None,
                      config: dict[str, Any], writer: RunWriter | None) -> None:
    """Plan the hosts on the cluster (joining one: check its memory) and record the plan in
    `config` and the run folder."""
    plan = plan_placement(cfg, resolved.n_clients, extra_bundles=0 if placement_group is None else 1)
    if address:
        memory.check(resolved, True, placement=plan, available=memory.available_cluster(),
                     where="in the Ray cluster (its memory resource)")
    config["placement"] = plan.record()  # in the result with or without a folder
    if writer is not None:
        writer.record(placement=config["placement"])


class _Restarts:
    """The run's driver through actor failures. Every failure, wherever it happens (starting
    the driver and hosts, restoring the checkpoint, the rounds), counts once and restarts
    from the last checkpoint: a second death during recovery is retried like the first."""

    def __init__(self, start: Callable[[dict[str, Any] | None], Any], restore_from: dict[str, Any] | None,
                 max_failures: int, say: Callable[[str], None]) -> None:
        self.start = start
        """Starts a driver, restored from the checkpoint it is given (None: none)."""
        self.restore_from = restore_from
        self.max_failures = max_failures
        self.say = say
        self.fed: Any = None
        """The driver (None: not started yet, or closed after a failure)."""
        self.failures = 0

    def run_rounds(self, rounds: int, watch: Observers, rows: list[Row], ckpt: checkpoint.Checkpointer | None,
                   info: RunInfo, roll_back: Callable[[int], None]) -> str:
        """The run's status once its rounds up to `rounds` ran (engine/loop.py), the driver
        started first and, after each actor failure, again from the last checkpoint, once
        `roll_back(its round)` dropped what came after it."""
        started = False
        while True:
            try:
                if self.fed is None:
                    self.fed = self.start(self.restore_from)
                    self.restore_from = None  # restored: its client states need not stay in memory
                    if not started:
                        started = True
                        watch.on_start(info)
                return run_rounds(self.fed, rounds, watch, rows, boundary=ckpt.every if ckpt else None,
                                  call_seconds=ROUNDS_CALL_SECONDS if isinstance(self.fed, RemoteDriver) else 0.0)
            except ACTOR_FAILURES as exc:
                self.failures += 1
                last = ckpt.round if ckpt is not None else None
                if last is None or self.failures > self.max_failures:
                    raise
                where = f"at round {rows[-1]['round'] + 1 if rows else 0}" if self.fed is not None else \
                    f"while restarting from the checkpoint of round {last}"
                self.say(f"raycompo: {describe(exc)} {where}; restarting the actors from the checkpoint of round "
                         f"{last} (failure {self.failures} of at most {self.max_failures})")
                self.close()
                self.fed = None
                roll_back(last)
                # read back from disk when the run has a folder (see Checkpointer.latest)
                self.restore_from = ckpt.latest()

    def close(self) -> None:
        """Close the driver, if one was started."""
        _close(self.fed)


def _roll_back(rows: list[Row], writer: RunWriter | None, kept: KeptInMemory | None, costs: KeptCosts,
               last: int) -> None:
    """Drop what the rounds after `last` left (rows, the folder's files, the kept clients
    and costs): the replay from the checkpoint of round `last` makes them again."""
    rows[:] = [r for r in rows if r["round"] <= last]
    if writer is not None:
        writer.truncate(last)
    if kept is not None:
        kept.records[:] = [c for c in kept.records if c.round <= last]
        kept.events[:] = [e for e in kept.events if e["step"] <= last]
    costs.rows[:] = [r for r in costs.rows if r["round"] <= last]


def _mark_end(marks: Observers, exc: BaseException, rows: list[Row]) -> None:
    """Record how the run ended: 'interrupted' on Ctrl-C or SIGTERM (signals.Interrupted),
    else its failure `exc`."""
    if isinstance(exc, KeyboardInterrupt):
        marks.on_end("interrupted", rows[-1] if rows else {})
    else:
        marks.on_failure(exc, rows[-1] if rows else {})


def _result(status: str, rows: list[Row], config: dict[str, Any], out: str | None, writer: RunWriter | None,
            costs: KeptCosts, kept: KeptInMemory | None) -> RunResult:
    """What `run` returns: config.json as the folder holds it (without one: `config` with
    the status and the final row)."""
    if writer is not None:
        config = writer.config
    else:
        config.update(status=status, final=rows[-1] if rows else {}, rounds_done=int(rows[-1]["round"]) if rows else 0)
    return RunResult(status, rows, config, out, costs.rows, kept.records if kept is not None else [],
                     kept.events if kept is not None else [])


class KeptCosts(Observer):
    """The rows of costs.csv (those a resumed run kept, then each round's), for RunResult.costs."""

    def __init__(self, rows: list[Row]) -> None:
        self.rows = list(rows)

    def on_costs(self, rows: list[Row]) -> None:
        self.rows += rows


class KeptInMemory(Observer):
    """What a run without a folder keeps for its RunResult: the evaluations' per-client
    values (RunResult.clients) and the events (RunResult.events, `log_events`)."""

    def __init__(self) -> None:
        self.records: list[ClientMetrics] = []
        self.events: list[Row] = []

    def on_clients(self, clients: ClientMetrics) -> None:
        self.records.append(clients)

    def on_events(self, rows: list[Row]) -> None:
        self.events += rows


ROUNDS_CALL_SECONDS = 0.2
"""A driver actor runs several rounds per call, about this long (engine/loop.py): rows
reach the observers at least this often, and short rounds do not each pay a round trip."""


def use_threads(cfg: RunConfig) -> RunConfig:
    """`cfg` with the torch threads its rounds run with: its own `threads`, set in this
    process (it stays set), or this process's number, recorded in config.json so that a
    resume sets it again (sums of floats depend on how they are split over threads)."""
    import dataclasses

    import torch

    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
        return cfg
    return dataclasses.replace(cfg, threads=torch.get_num_threads())


def metrics_frame(rows: list[Row]) -> pd.DataFrame:
    """Rows as metrics.csv holds them: the first row's columns; None is a missing value."""
    if not rows:
        return pd.DataFrame()
    return pd.DataFrame(rows, columns=list(rows[0]))


def describe(exc: BaseException) -> str:
    """One line on a Ray failure: which actor, what happened."""
    name = getattr(exc, "actor_id", None)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()  # Ray colours its messages
    text = plain.splitlines()[0] if plain else ""
    return f"{type(exc).__name__}{f' (actor {name})' if name else ''}: {text[:200]}"


def _start(resolved, backend, driver, namespace, placement_group, watchers, restore_from, label=None, hosts=None):
    """A started driver, restored from `restore_from`, attached to the `watchers` that read
    it (the checkpointer, the pool's dashboard metrics)."""
    fed = start_driver(resolved, backend, driver, namespace, placement_group, run=label, hosts=hosts)
    try:
        if restore_from is not None:
            fed.restore(restore_from)
    except BaseException:
        _close(fed)
        raise
    for w in watchers:
        if w is not None:
            w.attach(fed)
    return fed


def _close(fed: Any) -> None:
    if fed is not None:
        try:
            fed.close()
        except Exception:
            pass  # a dead driver or host: its actors are killed with it
