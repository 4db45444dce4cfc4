"""ASHA per member of a population (raycompo/tune/member_asha.py, `--scheduler asha
--population P`): the rule against a hand-computed example and against Ray Tune's own
AsyncHyperBandScheduler, a stopped member's rows ending at its rung while the others keep
their rows as alone and the population's chunks lose the stopped member's rows, and a grid
sweep that records each member once with its status."""

from __future__ import annotations

import dataclasses
import random
import threading
import time
import types

import pytest

from raycompo.engine import population as population_module
from raycompo.engine import runner
from raycompo.engine.population import run_population
from raycompo.tune.member_asha import MemberStop, Rungs, RungTurns, asha_settings, earlier_rewards
from raycompo.tune.trainable import TuneReporter
from tests.test_population import assert_same_rows, config

# --- the rule ----------------------------------------------------------------------------------


def test_rungs_and_cutoffs_of_a_hand_computed_example():
    rungs = Rungs(max_t=10, grace_period=1, reduction_factor=2)
    assert rungs.milestones == [1, 2, 4, 8]  # grace * rf^k <= max_t
    # rung t=1: the first is never stopped; then the median (rf = 2) of those before
    assert rungs.on_result("a", 1, 2.0) is False
    assert rungs.on_result("b", 1, 4.0) is False  # cutoff 2
    assert rungs.on_result("c", 1, 1.0) is True  # cutoff median(2, 4) = 3
    assert rungs.on_result("d", 1, 3.5) is False  # cutoff median(2, 4, 1) = 2
    assert rungs.on_result("a", 1, -9.0) is False  # recorded at that rung already: no new decision
    assert rungs.recorded[1] == {
        "a": 2.0,
        "b": 4.0,
        "c": 1.0,
        "d": 3.5,
    }  # stopped ones recorded too
    assert (
        rungs.on_result("a", 2, 5.0) is False and rungs.on_result("b", 3, 3.0) is True
    )  # t=3: rung 2
    assert rungs.on_result("b", 3, 9.0) is False  # rung 2 holds b; rung 4 not reached


def test_the_cutoff_is_the_top_third_with_reduction_factor_three():
    rungs = Rungs(**asha_settings(20))  # the sweep's: max_t 21, grace 4, rf 3
    assert rungs.milestones == [4, 12]
    for key, reward in zip("abcd", (1.0, 2.0, 3.0, 4.0)):
        rungs.on_result(key, 4, reward)
    # the 2/3 quantile of 1, 2, 3, 4 (linear, numpy's) is 3: below it stops, at it goes on
    assert rungs.on_result("e", 4, 2.99) is True
    assert rungs.on_result("f", 4, 3.5) is False


def ray_decisions(stream, settings, mode):
    from ray.tune.schedulers import AsyncHyperBandScheduler

    sched = AsyncHyperBandScheduler(
        time_attr="training_iteration", metric="m", mode=mode, **settings
    )
    trials = {}
    out = []
    for key, t, value in stream:
        if key not in trials:
            trials[key] = types.SimpleNamespace(trial_id=key)
            sched.on_trial_add(None, trials[key])
        out.append(
            sched.on_trial_result(None, trials[key], {"training_iteration": t, "m": value})
            == "STOP"
        )
    return out


@pytest.mark.parametrize("mode, seed", [("max", 0), ("min", 1), ("max", 2)])
def test_member_stops_are_ray_tunes_asha_decisions_on_the_same_reports(mode, seed):
    """Members report rounds in a random interleaving; each report's decision is Ray Tune's
    (a stopped member reports no more; the last report, where Ray stops every trial, is left
    out: it ends the run anyway)."""
    rng = random.Random(seed)
    settings = asha_settings(26)  # rungs at t = 5, 15
    rungs = Rungs(**settings)
    seen: list[dict] = []
    members = {f"m{i}": MemberStop(rungs, f"m{i}", "m", mode, seen.append) for i in range(12)}
    quality = {key: rng.uniform(-1, 1) for key in members}
    t = {key: 0 for key in members}
    stream, ours = [], []
    while members:
        key = rng.choice(sorted(members))
        t[key] += 1
        value = quality[key] + rng.gauss(0, 0.3)
        members[key].report({"m": value, "status": "running", "round": t[key] - 1})
        stream.append((key, t[key], value))
        ours.append(seen[-1]["status"] == "stopped")
        if ours[-1] or t[key] == settings["max_t"] - 1:
            del members[key]
    assert ours == ray_decisions(stream, settings, mode)
    assert 0 < sum(ours) < 12


def test_a_resumed_sweeps_rungs_hold_its_recorded_trials_and_decide_as_before():
    """The rewards recorded at each rung by the trials a sweep finished (metrics.jsonl's rows,
    `earlier_rewards`) seed a fresh Rungs: a trial left decides as it would have after them."""
    settings = asha_settings(20)  # rungs at t = 4, 12: rounds 3, 11
    rows = [{"trial_id": k, "round": r, "m": v + r / 100} for k, v in zip("abcd", (1.0, 2.0, 3.0, 4.0))
            for r in range(21)]
    rows.append({"trial_id": "e", "round": 3, "m": "-inf"})  # diverged: its worst value, as metrics.jsonl holds it
    earlier = earlier_rewards(rows, "m", "max", 20)
    assert [(k, t) for k, t, _ in earlier] == [(k, t) for k in "abcd" for t in (4, 12)] + [("e", 4)]
    assert earlier[0][2] == pytest.approx(1.03) and earlier_rewards(rows, "m", "min", 20)[0][2] == pytest.approx(-1.03)
    whole, seeded = Rungs(**settings), Rungs(**settings)
    for key, t, reward in earlier:
        whole.on_result(key, t, reward)
    seeded.seed(earlier)
    assert seeded.recorded == whole.recorded
    for key, t, reward in (("f", 4, 2.5), ("g", 4, 3.9), ("g", 12, 4.5)):
        assert seeded.on_result(key, t, reward) == whole.on_result(key, t, reward)


def test_a_member_resumed_from_its_checkpoint_counts_its_reports_on():
    """Resumed at round 9 (rounds 0..9 reported before, replayed past the rule), its next
    report is t = 11: the rung at t = 12 is reached at round 11, as without the kill."""
    asked = []

    class Record:
        milestones = [4, 12]

        def on_result(self, key, t, reward):
            asked.append(t)
            return False

    turns = RungTurns(2, timeout=0.5)
    stop = MemberStop(Record(), "m0", "m", "max", lambda out: None, turns=turns, index=0)
    stop.on_start(types.SimpleNamespace(start_round=9, resumed=True))
    turns.wait(1, 4)  # member 1 (restarted at round 0) does not wait at a rung member 0 has passed
    for r in (10, 11, 12):
        stop.report({"m": 1.0, "status": "running", "round": r})
    assert asked == [12] and stop.t == 13
    fresh = MemberStop(Record(), "m1", "m", "max", lambda out: None)
    fresh.on_start(types.SimpleNamespace(start_round=0, resumed=False))
    assert fresh.t == 0
    at_zero = MemberStop(Record(), "m2", "m", "max", lambda out: None)
    at_zero.on_start(types.SimpleNamespace(start_round=0, resumed=True))  # row 0 reported before
    assert at_zero.t == 1


# --- a population: a stopped member leaves the computation -----------------------------------


class StopAt:
    """Rungs that stop one member at its first rung (the rule is tested above)."""

    def __init__(self, milestone: int, key: str):
        self.milestones, self.key = [milestone], key

    def on_result(self, key: str, t: int, reward: float) -> bool:
        return key == self.key


def test_a_member_diverging_at_a_rung_does_not_hold_the_members_before_it():
    """Member 1 diverges in the round of rung t = 2: its row comes without an evaluation
    exchange, and it waits for member 0's turn, who needs that exchange answered. Standing
    aside at the rendezvous while it waits, it holds nobody: both end at once (before the
    fix, both waited for the timeout and member 0 failed)."""
    from raycompo.engine.population import Population

    cfgs = [dataclasses.replace(config("fedavg", lr=lr), rounds=4) for lr in (0.02, 1e38)]
    rungs = Rungs(max_t=5, grace_period=2, reduction_factor=3)
    population = Population(2, timeout=20)
    turns = RungTurns(2, timeout=20, rendezvous=population.rendezvous)

    def member(i, cfg):
        stop = MemberStop(rungs, f"m{i}", "val_loss", "min", lambda out: None, turns, i)
        reporter = TuneReporter("val_loss", "min", cfg.rounds, report=stop.report)

        def go(seat):
            try:
                return runner.run(cfg, hosts=seat, observers=[reporter, stop])
            finally:
                turns.leave(i)
        return go

    t0 = time.monotonic()
    results, _ = run_population([member(i, c) for i, c in enumerate(cfgs)], population=population)
    assert [getattr(r, "status", r) for r in results] == ["completed", "diverged"]
    assert time.monotonic() - t0 < 15  # no timeout waited out
    assert_same_rows(runner.run(cfgs[0]), results[0])


def test_a_stopped_members_rows_end_at_its_rung_and_leave_the_populations_chunks(monkeypatch):
    rounds = 4
    cfgs = [dataclasses.replace(config("fedavg", lr=lr), rounds=rounds) for lr in (0.02, 0.05, 0.1)]
    chunks: list[tuple[int, list[int]]] = []
    real = population_module.run_chunk

    def counting(hosts, requests, parts, *args):  # (round, each chunk's rows per member)
        chunks.append((requests[0].round_, [len(part[1]) for part in parts]))
        return real(hosts, requests, parts, *args)

    monkeypatch.setattr(population_module, "run_chunk", counting)
    reports: list[list[dict]] = [[] for _ in cfgs]
    rungs = StopAt(3, "m1")  # t = 3: member 1 stops after its row of round 2

    def member(i, cfg):
        stop = MemberStop(rungs, f"m{i}", "val_loss", "min", reports[i].append)
        reporter = TuneReporter("val_loss", "min", cfg.rounds, report=stop.report)
        return lambda seat: runner.run(cfg, hosts=seat, observers=[reporter, stop])

    results, _ = run_population([member(i, c) for i, c in enumerate(cfgs)])
    assert [r.status for r in results] == ["completed"] * 3
    assert [len(r.rows) for r in results] == [rounds + 1, 3, rounds + 1]
    assert [out["status"] for out in reports[1]] == ["running", "running", "stopped"]
    assert reports[0][-1]["status"] == reports[2][-1]["status"] == "completed"
    for cfg, pop in zip(cfgs, results):
        alone = runner.run(cfg)
        if len(pop.rows) < len(alone.rows):
            alone.rows[:] = alone.rows[: len(pop.rows)]
            alone.status = pop.status
        assert_same_rows(alone, pop)
    rounds_seen = sorted({r for r, _ in chunks})
    assert len(rounds_seen) == rounds
    for r, rows in chunks:  # member 1's rows are in the chunks of its 2 rounds only
        if r < rounds_seen[2]:
            assert len(rows) == 3 and rows[0] == rows[1] == rows[2]
        else:
            assert len(rows) == 2
    before = sum(sum(rows) for r, rows in chunks if r == rounds_seen[0])
    after = sum(sum(rows) for r, rows in chunks if r == rounds_seen[-1])
    assert after * 3 == before * 2  # the same cohorts (one seed): 2 members' rows of 3


# --- a sweep -------------------------------------------------------------------------------------


def rule_in_order(rewards: dict[str, float], stopped: set[str], order: list[str], milestone: int) -> bool:
    """Whether arrivals at the rung `milestone` in `order` (the populations in turn, each in
    member order: `RungTurns`) give exactly the `stopped` members by the rule."""
    rungs = Rungs(**asha_settings(9))
    return all(rungs.on_result(k, milestone, rewards[k]) == (k in stopped) for k in order)


def test_members_ask_at_a_rung_in_member_order_whatever_their_threads_timing():
    """Threads reaching a rung in reverse order ask in member order; a member that ended
    does not hold the others; a member that never comes is named after the timeout."""
    turns, asked = RungTurns(4), []

    def member(i: int) -> None:
        time.sleep(0.05 * (3 - i))  # member 3 first, member 0 last
        turns.wait(i, 2)
        asked.append(i)
        turns.asked(i, 2)

    turns.leave(1)  # ended before the rung
    threads = [threading.Thread(target=member, args=(i,)) for i in (0, 2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert asked == [0, 2, 3]
    late = RungTurns(2, timeout=0.2)
    with pytest.raises(RuntimeError, match=r"member 1 waited .* for member\(s\) \[0\]"):
        late.wait(1, 2)


@pytest.mark.slow
def test_a_grid_sweep_with_asha_and_populations_records_each_member_once(tmp_path, ray_session):
    """Two populations of 4, one at a time (rungs t = 2, 6: rounds 1, 5). Each trial once in
    trials.csv, its rows up to the round its status says; at each rung the stopped members
    are those the rule stops with arrivals in member order (the populations in turn); the second
    population's step sizes are far worse at round 1 than the first's, so all are stopped there."""
    import pandas as pd

    from raycompo.tune.cli import main

    space = tmp_path / "lr.yaml"
    lrs = [0.01, 0.015, 0.02, 0.03, 0.0001, 0.0002, 0.0003, 0.0004]
    space.write_text(
        "task: synthetic\nrounds: 9\nmetric: val_loss\nmode: min\n"
        "settings: {n_clients: 24, clients_per_round: 8, tau: 3}\nalgorithms:\n"
        f"  fedavg: {{lr: {lrs}}}\n"
    )
    out = tmp_path / "s"
    argv = [
        "--space",
        str(space),
        "--search",
        "grid",
        "--out",
        str(out),
        "--scheduler",
        "asha",
        "--population",
        "4",
        "--max-concurrent",
        "1",
        "--quiet",
    ]
    assert main(argv) == 0
    trials = pd.read_csv(out / "trials.csv").set_index("lr")
    assert len(trials) == 8 and trials["trial_id"].is_unique and sorted(trials.index) == sorted(lrs)
    assert set(trials["status"]) <= {"completed", "stopped"}
    done = trials["rounds_done"]
    assert set(done[trials["status"] == "completed"]) == {9} and set(
        done[trials["status"] == "stopped"]
    ) <= {1, 5}
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert metrics.groupby("trial_id")["round"].max().to_dict() == dict(
        zip(trials["trial_id"], done)
    )
    loss = metrics.pivot_table(index="round", columns="trial_id", values="val_loss")
    for milestone, rung_round in ((2, 1), (6, 5)):
        there = [lr for lr in lrs if done[lr] >= rung_round]
        rewards = {str(lr): -loss[trials.loc[lr, "trial_id"]][rung_round] for lr in there}
        stopped = {
            str(lr)
            for lr in there
            if done[lr] == rung_round and trials.loc[lr, "status"] == "stopped"
        }
        order = [str(lr) for lr in lrs if lr in there]  # grid order: population 1's, then 2's
        assert rule_in_order(rewards, stopped, order, milestone), (milestone, rewards, stopped)
    at_1 = {lr: -loss[trials.loc[lr, "trial_id"]][1] for lr in lrs}  # rewards at the first rung
    assert max(at_1[lr] for lr in lrs[4:]) < min(at_1[lr] for lr in lrs[:4]), at_1
    assert list(done[lrs[4:]]) == [1] * 4


def asha_space(tmp_path, lrs):
    space = tmp_path / "lr.yaml"
    space.write_text(
        "task: synthetic\nrounds: 9\nmetric: val_loss\nmode: min\n"
        "settings: {n_clients: 24, clients_per_round: 8, tau: 3}\nalgorithms:\n"
        f"  fedavg: {{lr: {lrs}}}\n"
    )
    return space


@pytest.mark.slow
def test_asha_stops_trials_alone_by_the_rule_and_a_resumed_sweep_decides_as_an_uninterrupted_one(
    tmp_path, ray_session
):
    """One trial at a time (rungs t = 2, 6: rounds 1, 5): the stopped trials are those the
    rule stops with arrivals in grid order. Stopped after 3 trials and resumed, the rungs
    start with the 3 recorded trials' values: every trial ends as in the uninterrupted sweep."""
    import pandas as pd

    from raycompo.tune.cli import main

    lrs = [0.01, 0.0001, 0.015, 0.0002, 0.02, 0.0003]
    space = asha_space(tmp_path, lrs)
    argv = ["--space", str(space), "--search", "grid", "--scheduler", "asha", "--population", "1",
            "--max-concurrent", "1", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "whole")]) == 0
    whole = pd.read_csv(tmp_path / "whole" / "trials.csv").set_index("lr")
    assert len(whole) == 6 and whole["trial_id"].is_unique and set(whole["status"]) == {"completed", "stopped"}
    done = whole["rounds_done"]
    metrics = pd.read_parquet(tmp_path / "whole" / "metrics.parquet")
    assert metrics.groupby("trial_id")["round"].max().to_dict() == dict(zip(whole["trial_id"], done))
    loss = metrics.pivot_table(index="round", columns="trial_id", values="val_loss")
    for milestone, rung_round in ((2, 1), (6, 5)):
        there = [lr for lr in lrs if done[lr] >= rung_round]
        rewards = {str(lr): -loss[whole.loc[lr, "trial_id"]][rung_round] for lr in there}
        stopped = {str(lr) for lr in there if done[lr] == rung_round and whole.loc[lr, "status"] == "stopped"}
        assert rule_in_order(rewards, stopped, [str(lr) for lr in there], milestone), (milestone, rewards, stopped)
    out = tmp_path / "resumed"
    assert main([*argv, "--out", str(out), "--stop-after", "3"]) == 130
    assert main(["--resume", str(out), "--quiet"]) == 0
    resumed = pd.read_csv(out / "trials.csv").set_index("lr")
    assert resumed["trial_id"].is_unique and len(resumed) == 6
    assert resumed.loc[lrs, ["status", "rounds_done"]].equals(whole.loc[lrs, ["status", "rounds_done"]])
