"""ASHA per trial and per member of a population (`--scheduler asha`, issue 42).

Tune's ASHA stops a whole Tune trial, and with `--population P` a Tune trial is P members
(tune/population_trial.py), so the sweep gives Tune no scheduler and stops members itself,
by the same rule as Ray Tune's `AsyncHyperBandScheduler` (one bracket, `stop_last_trials`).
A trial alone is stopped the same way (tune/trainable.py: `run_trial`), so that the rungs
are the sweep's own and a resumed sweep starts them with the values it had recorded
(`earlier_rewards`), which Tune's scheduler cannot be given:

* rungs at t = grace_period * rf^k (k = 0, 1, ... while t <= max_t), where t is the member's
  count of reports (Tune's `training_iteration`: round 0 is t = 1);
* a member whose report reaches a rung it is not recorded at is compared with the values
  recorded there before it: it stops if its reward (the metric, negated for mode min) is
  below their (1 - 1/rf) quantile (`numpy.nanpercentile`), i.e. not in their top 1/rf; its
  value is recorded there either way. Ray's extra stop at max_t (the last report) changes
  nothing here: a run's last row ends it anyway.

`Rungs` holds the records. The population trials of one sweep run in different Ray worker
processes (Tune's trial actors), so the sweep starts one small named actor holding them
(`start_rungs`) and each member asks it (`RemoteRungs`, every call with a time limit), only
when its report reaches a rung. `MemberStop` is the member's side: the report function of
its `TuneReporter` (a stopped member's last report has status 'stopped', what the sweep
records for a trial Tune's ASHA stopped) and an observer whose `stop_reason` ends the run
after that row, as a budget does: the run returns 'completed', its pool leaves the
population's rendezvous, and the others' chunks no longer hold its rows.

As with Tune's ASHA the order in which members reach a rung decides: the first ones at a
rung are never stopped there. A population's members reach a rung in the same round; their
`RungTurns` makes them ask in member order (member i asks once every running member before
it has asked at that rung, standing aside at the population's rendezvous meanwhile), so which
of them stop does not depend on their threads' timing.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from raycompo.watch.observers import Observer

NAMESPACE = "raycompo-tune"
"""The Ray namespace of the sweep's rungs actor."""

CALL_TIMEOUT_S = 60.0
"""The longest a member waits for the rungs actor's answer."""

TURN_TIMEOUT_S = 3600.0
"""The longest a member waits for the members before it to reach a rung (as the population's
rendezvous waits for a member at an exchange)."""


def asha_settings(rounds: int) -> dict[str, int]:
    """The sweep's ASHA (`--scheduler asha`) for trials of `rounds` rounds: reports are
    rounds 0 .. `rounds`, so max_t = rounds + 1; grace period max_t // 5 (at least 1);
    reduction factor 3."""
    max_t = rounds + 1
    return {"max_t": max_t, "grace_period": max(1, min(max_t, max_t // 5)), "reduction_factor": 3}


class Rungs:
    """The rungs of one ASHA bracket and the rewards recorded at each (see the module doc)."""

    def __init__(self, max_t: int, grace_period: int, reduction_factor: float):
        if not 0 < grace_period <= max_t or reduction_factor <= 1:
            raise ValueError(
                f"ASHA needs 0 < grace_period <= max_t and reduction_factor > 1, got "
                f"{grace_period}, {max_t}, {reduction_factor}"
            )
        self.rf = reduction_factor
        count = int(np.log(max_t / grace_period) / np.log(reduction_factor) + 1)  # Ray's MAX_RUNGS
        self.milestones = [grace_period * reduction_factor**k for k in range(count)]
        self.recorded: dict[Any, dict[str, float]] = {m: {} for m in self.milestones}

    def get_milestones(self) -> list[Any]:
        """The rungs' t, lowest first (for a caller holding an actor)."""
        return list(self.milestones)

    def on_result(self, key: str, t: int, reward: float) -> bool:
        """Whether member `key`, reporting `reward` at its report count `t`, stops: at the
        highest rung <= t it is not recorded at, `reward` below the (1 - 1/rf) quantile of
        the rewards recorded there before it; then recorded there. False past no new rung."""
        for milestone in reversed(self.milestones):
            recorded = self.recorded[milestone]
            if t < milestone or key in recorded:
                continue
            cutoff = (
                np.nanpercentile(list(recorded.values()), (1 - 1 / self.rf) * 100)
                if recorded
                else None
            )
            recorded[key] = reward
            return bool(cutoff is not None and reward < cutoff)
        return False


    def seed(self, records: Sequence[tuple[str, int, float]]) -> None:
        """Record (key, t, reward) where t is a rung, without a decision: the rewards of the
        trials a resumed sweep had finished (`earlier_rewards`), so that the trials it runs
        are compared with them as in the sweep that was not interrupted."""
        for key, t, reward in records:
            if t in self.recorded:
                self.recorded[t].setdefault(key, float(reward))


def earlier_rewards(rows: Any, metric: str, mode: str, rounds: int) -> list[tuple[str, int, float]]:
    """(trial_id, t, reward) of each recorded row (metrics.jsonl's: `trial_id`, `round`,
    the metric as reported) whose report count t = round + 1 is one of the rungs of
    `asha_settings(rounds)`, in the order of `rows`; a member's key is its trial_id."""
    milestones = set(Rungs(**asha_settings(rounds)).milestones)
    sign = 1.0 if mode == "max" else -1.0
    out = []
    for row in rows:
        t, value = row.get("round"), row.get(metric)
        if value in ("inf", "-inf"):  # as metrics.jsonl writes a diverged trial's worst value
            value = float(value)
        if isinstance(t, int) and t + 1 in milestones and isinstance(value, (int, float)):
            out.append((str(row["trial_id"]), t + 1, sign * float(value)))
    return out


class RungsLike(Protocol):
    """What `MemberStop` asks: `Rungs` here, or `RemoteRungs` for the sweep's actor."""

    milestones: list[Any]

    def on_result(self, key: str, t: int, reward: float) -> bool: ...


def start_rungs(rounds: int, earlier: Sequence[tuple[str, int, float]] = ()) -> tuple[str, Any]:
    """Start the sweep's rungs actor for trials of `rounds` rounds, holding the `earlier`
    records of a resumed sweep (`earlier_rewards`): (its name, its handle). It has no CPU of
    its own and lives while the handle does (keep it; `stop_rungs` ends it)."""
    import ray

    name = f"raycompo-asha-{uuid.uuid4().hex[:8]}"
    actor = ray.remote(Rungs).options(name=name, namespace=NAMESPACE, num_cpus=0)
    handle = actor.remote(**asha_settings(rounds))
    ray.get(handle.get_milestones.remote(), timeout=CALL_TIMEOUT_S)  # started (or a clear error here)
    if earlier:
        ray.get(handle.seed.remote(list(earlier)), timeout=CALL_TIMEOUT_S)
    return name, handle


def stop_rungs(handle: Any) -> None:
    """End the rungs actor of `handle`."""
    import ray

    ray.kill(handle)


class RemoteRungs:
    """The sweep's rungs actor `name`, asked from a trial's process."""

    def __init__(self, name: str):
        import ray

        self.name = name
        try:
            self.actor = ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            raise RuntimeError(
                f"--scheduler asha: the sweep's rungs actor {name!r} (namespace {NAMESPACE}) is "
                f"missing; it lives as long as the sweep's process"
            ) from None
        self.milestones = self._get(self.actor.get_milestones.remote(), "its rungs")

    def on_result(self, key: str, t: int, reward: float) -> bool:
        return bool(
            self._get(
                self.actor.on_result.remote(key, t, reward), f"the decision on {key} at t={t}"
            )
        )

    def _get(self, ref: Any, what: str) -> Any:
        import ray

        try:
            return ray.get(ref, timeout=CALL_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            raise RuntimeError(
                f"--scheduler asha: the rungs actor {self.name!r} did not answer {what} within "
                f"{CALL_TIMEOUT_S:.0f} s"
            ) from None
        except ray.exceptions.RayActorError as exc:
            raise RuntimeError(
                f"--scheduler asha: the rungs actor {self.name!r} is gone ({what} unanswered): "
                f"{str(exc).strip().splitlines()[0][:200]}"
            ) from None


class RungTurns:
    """The members of one population asking at a rung in member order: `wait(i, t)` returns
    once every member j < i has asked at t (`asked`) or ended (`leave`). While it waits, member
    i steps aside at the population's `rendezvous` (engine/rendezvous.py): a member before it
    may need exchanges of its own before its row of rung t (an evaluation that i, diverged,
    skips; an extra exchange), and they are answered without i. A cancelled rendezvous ends
    the wait with its exception."""

    def __init__(self, size: int, timeout: float = TURN_TIMEOUT_S, rendezvous: Any = None):
        self.reached = [0] * size
        self.ended = [False] * size
        self.timeout = timeout
        self.rendezvous = rendezvous
        self.cond = threading.Condition()

    def _ready(self, i: int, t: int) -> bool:
        return all(self.ended[j] or self.reached[j] >= t for j in range(i))

    def wait(self, i: int, t: int) -> None:
        if self.rendezvous is not None:
            self.rendezvous.step_aside(i)
        try:
            self._wait(i, t)
        finally:
            if self.rendezvous is not None:
                self.rendezvous.step_back(i)

    def _wait(self, i: int, t: int) -> None:
        deadline = time.monotonic() + self.timeout
        with self.cond:
            while not self._ready(i, t):
                cancelled = getattr(self.rendezvous, "cancelled", None)
                if cancelled is not None:
                    raise cancelled
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = [j for j in range(i) if not self.ended[j] and self.reached[j] < t]
                    raise RuntimeError(f"--scheduler asha: member {i} waited {self.timeout:.0f} s at rung t={t} "
                                       f"for member(s) {missing} of its population, which never reached it")
                self.cond.wait(min(left, 0.2))

    def asked(self, i: int, t: int) -> None:
        with self.cond:
            self.reached[i] = max(self.reached[i], t)
            self.cond.notify_all()

    def leave(self, i: int) -> None:
        with self.cond:
            self.ended[i] = True
            self.cond.notify_all()


class MemberStop(Observer):
    """One member's ASHA (see the module doc). `report(out)` (its TuneReporter's report
    function) asks `rungs` when the count of reports reaches a rung and passes `out` on to
    `forward`, with status 'stopped' when the rule stops a running member; `stop_reason`
    then ends the run after that row. `turns` (member `index`'s population): ask in member
    order."""

    def __init__(
        self,
        rungs: RungsLike,
        key: str,
        metric: str,
        mode: str,
        forward: Callable[[dict[str, Any]], None],
        turns: RungTurns | None = None,
        index: int = 0,
    ):
        self.rungs, self.key, self.metric, self.forward = rungs, key, metric, forward
        self.turns, self.index = turns, index
        self.sign = 1.0 if mode == "max" else -1.0
        self.milestones = set(rungs.milestones)
        self.t = 0
        self.reason: str | None = None

    def on_start(self, info: Any) -> None:
        """A member resumed from its checkpoint at round r has reported rounds 0..r already
        (tune/trial_checkpoints.py replays them past this rule): its count goes on from
        there, and the members after it in its population do not wait for it at the rungs
        it has passed."""
        if not getattr(info, "resumed", False):
            return
        self.t = int(info.start_round) + 1
        if self.turns is not None:
            self.turns.asked(self.index, self.t)

    def report(self, out: dict[str, Any]) -> None:
        self.t += 1  # Tune's training_iteration of this report
        value = out.get(self.metric)
        if self.t in self.milestones and isinstance(value, (int, float)):
            if self.turns is not None:
                self.turns.wait(self.index, self.t)
            try:
                stop = self.rungs.on_result(self.key, self.t, self.sign * value)
            finally:
                if self.turns is not None:
                    self.turns.asked(self.index, self.t)
            if stop and out.get("status") == "running":  # a last row ends its run anyway
                out = {**out, "status": "stopped"}
                self.reason = f"stopped by ASHA at round {out.get('round')} (rung t={self.t})"
        self.forward(out)

    def stop_reason(self) -> str | None:
        return self.reason
