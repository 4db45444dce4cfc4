"""The Tune trainable of a population trial (`--population P`, tune/population_search.py):
its members' runs as one population (raycompo/engine/population.py), in this trial's
process, each member's rows reported to Tune with its index (`member`), as `run_trial`
reports a trial's (`TuneReporter`: status, best value, trial time). With `--scheduler asha`
each member is stopped at a rung on its own (tune/member_asha.py)."""

from __future__ import annotations

import queue
import threading
from typing import Any

from raycompo.tune.member_asha import MemberStop, RemoteRungs, RungTurns
from raycompo.tune.population_search import MEMBER, MEMBERS
from raycompo.tune.trainable import TrialSpec, TuneReporter, trial_config, worst
from raycompo.tune.trial_checkpoints import Replay, run_kept

POLL_S = 0.2
"""How often the trainable looks for its members' rows while they run."""


def run_population_trial(config: dict[str, Any], spec: TrialSpec, rungs: str | None = None) -> None:
    """The Tune function trainable of a population (bind `spec` with tune.with_parameters).
    A member whose run fails is reported once with status 'error' and its message; the
    others go on. An interruption (Tune stopping the trial) cancels every member. `rungs`:
    the sweep's ASHA rungs actor (`--scheduler asha`), which stops members one by one."""
    from ray import tune

    from raycompo.configuration.plugins import remember
    from raycompo.engine import run
    from raycompo.engine.population import Population, run_population

    remember(spec.classes)
    algo = config["algorithm"]
    cfgs = [trial_config(spec, algo, point) for point in config[MEMBERS]]
    rows: queue.Queue = queue.Queue()
    asha = RemoteRungs(rungs) if rungs else None
    trial = tune.get_context().get_trial_id() if asha else None
    population = Population(len(cfgs))
    turns = RungTurns(len(cfgs), rendezvous=population.rendezvous)  # members ask at a rung in member order

    def member(i: int, cfg: Any) -> Any:
        stop = MemberStop(asha, f"{trial}/{i}", spec.metric, spec.mode, rows.put, turns, i) if asha else None
        reporter = TuneReporter(spec.metric, spec.mode, cfg.rounds, report=stop.report if stop else rows.put,
                                extra={MEMBER: i})

        def go(seat: Any) -> Any:
            try:
                replay = Replay(reporter, direct=rows.put)
                return run_kept(spec.checkpoints, run, cfg, observers=[replay, reporter, *([stop] if stop else [])],
                                driver="local", hosts=seat)
            except Exception as exc:
                rows.put({MEMBER: i, "status": "error", "error": str(exc).strip()[:500], spec.metric: worst(spec.mode)})
                raise
            finally:
                turns.leave(i)
        return go

    done: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: done.update(out=run_population(
        [member(i, c) for i, c in enumerate(cfgs)], population=population)), name="raycompo-population", daemon=True)
    runner.start()
    try:
        while runner.is_alive() or not rows.empty():
            try:
                tune.report(rows.get(timeout=POLL_S))
            except queue.Empty:
                continue
    except BaseException as exc:  # Tune stops the trial (or an interrupt): every member ends
        population.rendezvous.cancel(exc)
        runner.join(POLL_S * 50)
        raise
