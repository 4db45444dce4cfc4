"""Populations of trials (raycompo/tune/population.py) and Optuna asked a population at a
time (raycompo/tune/batched_search.py): the grouping's properties, the per-row rule, and
batched ask/tell equal to sequential ask/tell for the samplers that do not read results."""

from __future__ import annotations

import json
import math
import random

import optuna
import pytest

from raycompo.configuration.plugins import list_algorithms, load
from raycompo.errors import ConfigError
from raycompo.tune.batched_search import BatchedOptunaSearch
from raycompo.tune.population import (
    auto_population,
    check_population,
    describe_populations,
    group_populations,
    has_population_form,
    per_row_settings,
    population_key,
    without_population_form,
)
from raycompo.tune.searchers import UniqueSearcher

optuna.logging.set_verbosity(optuna.logging.WARNING)

SPACE = {"lr": [0.001, 0.01, 0.1, 1.0], "gamma": [0.1, 0.5, 1, 5], "tau": [1, 5, 10]}
DIST = {k: optuna.distributions.CategoricalDistribution(v) for k, v in SPACE.items()}
META = {"task": "dro-mnist5k", "rounds": 3, "seed": 0, "space": {"eval_every": 1, "path": None}}


def score(params) -> float:
    """A made-up objective with a known best (lr 0.1, gamma 1, tau 5)."""
    return (
        -abs(math.log10(params["lr"]) + 1) - abs(params["gamma"] - 1) - abs(params["tau"] - 5) / 5
    )


# --- the rule: float settings are per-row, all others structural ------------------------------


@pytest.mark.parametrize(
    "algo, expected",
    [
        ("comfedl", {"lr", "gamma"}),
        ("fedavg", {"lr"}),  # eval_lr is `float | None`: None picks another path
        ("local-scgdm", {"lr", "eta", "alpha", "gamma"}),
        ("feddro", {"lr", "lam", "kl_shift", "lr_decay", "beta"}),  # beta = 1 rows skip eq. (8)'s term per row
        (
            "fastdro",
            {"lr", "lam", "kl_shift", "lr_decay"},
        ),  # cvar_alpha sets how many losses are kept
        ("qfedavg", {"lr", "q"}),
    ],
)
def test_per_row_settings_are_the_float_fields(algo, expected):
    assert per_row_settings(load("algorithm", algo)) == expected


def test_no_integer_string_or_boolean_setting_is_per_row():
    import dataclasses
    import typing

    for name, cls in list_algorithms().items():
        hints = typing.get_type_hints(cls.Settings)
        fields = {f.name for f in dataclasses.fields(cls.Settings)}
        per_row = per_row_settings(cls)
        assert per_row <= fields and "lr" in per_row, name
        assert all(hints[k] is float for k in per_row), name


def test_what_a_sweep_groups_the_engine_runs_as_rows():
    """Every per-row setting of an algorithm with a population form is one its batched phases
    take per row (`row_settings`): trials a sweep groups by `population_key` never run apart
    in lockstep for a float the engine cannot hold per row (engine/population.py: batchable)."""
    for name, cls in list_algorithms().items():
        if cls.__dict__.get("population_phases"):
            assert per_row_settings(cls) <= cls.row_settings, name


def test_population_key_ignores_per_row_values_only():
    base = {"algorithm": "comfedl", "lr": 0.1, "gamma": 0.5, "tau": 5}
    key = population_key(base, META)
    assert population_key({**base, "lr": 1.0, "gamma": 5}, META) == key
    assert population_key({**base, "tau": 10}, META) != key
    assert population_key({"algorithm": "fedavg", "lr": 0.1, "tau": 5}, META) != key
    assert population_key(base, {**META, "seed": 1}) != key
    assert population_key(base, {**META, "rounds": 4}) != key
    assert (
        population_key({**base, "compress": "*=topk:0.1"}, META) != key
    )  # a RunConfig key: structural
    hash(key)


def test_population_key_reads_an_algorithm_once_per_sweep(monkeypatch):
    """With a sweep's `known` cache: the same keys, and each algorithm loaded once (loading a
    name reads the installed entry points' state, 2-3 ms, and a sweep asks for hundreds)."""
    import raycompo.configuration.plugins as plugins

    configs = [{"algorithm": a, "lr": lr, "tau": tau} for a in ("comfedl", "fedavg") for lr in (0.1, 1.0) for tau in (5, 10)]
    plain = [population_key(c, META) for c in configs]
    loads = []
    real = plugins.load
    monkeypatch.setattr(plugins, "load", lambda kind, spec, **kw: loads.append(spec) or real(kind, spec, **kw))
    known: dict = {}
    assert [population_key(c, META, known) for c in configs] == plain
    assert sorted(loads) == ["comfedl", "fedavg"] and set(known) == {"comfedl", "fedavg"}


# --- grouping ----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 3, 8, 100])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_group_populations_properties(size, seed):
    rng = random.Random(seed)
    points = [{"i": i, "k": rng.choice("abcd")} for i in range(40)]
    groups = group_populations(points, size, key=lambda p: p["k"])
    assert sorted(p["i"] for g in groups for p in g) == list(range(40))  # each point once
    for g in groups:
        assert 1 <= len(g) <= size and len({p["k"] for p in g}) == 1
        assert [p["i"] for p in g] == sorted(p["i"] for p in g)  # in input order
    assert [g[0]["i"] for g in groups] == sorted(g[0]["i"] for g in groups)  # by first point
    for k in "abcd":
        count = sum(p["k"] == k for p in points)
        assert sum(g[0]["k"] == k for g in groups) == math.ceil(count / size)  # as few as possible


def test_group_populations_of_the_dro_grid():
    points = [
        {"algorithm": "comfedl", "lr": lr, "gamma": g, "tau": t}
        for lr in SPACE["lr"]
        for g in SPACE["gamma"]
        for t in SPACE["tau"]
    ]
    groups = group_populations(points, 8, key=lambda p: population_key(p, META))
    # 16 points per tau, in populations of 8: 2 per tau value
    assert [len(g) for g in groups] == [8] * 6
    assert all(len({p["tau"] for p in g}) == 1 for g in groups)
    assert describe_populations(groups, 8) == "populations: 6 of up to 8 trials (comfedl: 6)"
    assert without_population_form(groups, META) == []  # ComFedL has its form
    with pytest.raises(ValueError):
        group_populations(points, 0, key=lambda p: 0)


def test_the_sweep_says_which_algorithms_have_no_population_form():
    """DRFL has no population form (its trials run in lockstep, each on its own): said once;
    a population of one trial is not a population, so nothing to say about it."""
    from raycompo.algorithms.drfl import DRFL
    from raycompo.algorithms.fedavg import FedAvg

    assert has_population_form(FedAvg) and not has_population_form(DRFL)
    groups = [[{"algorithm": "drfl", "lr": 0.1}, {"algorithm": "drfl", "lr": 0.2}],
              [{"algorithm": "fedavg", "lr": 0.1}, {"algorithm": "fedavg", "lr": 0.2}], [{"algorithm": "qfedavg"}]]
    apart = without_population_form(groups, META)
    assert apart == ["drfl"]
    assert describe_populations(groups, 2, apart).endswith(
        "; drfl has no population form: their trials ran side by side in one process, each computed on its own")


def test_population_argument_is_checked():
    assert check_population(None) is None and check_population("auto") == "auto"
    assert check_population(4) == 4 and check_population("3") == 3
    for bad in (0, -1, "x", 1.5, True, "0"):
        with pytest.raises(ConfigError, match="--population must be an integer >= 1 or 'auto'"):
            check_population(bad)
    assert auto_population({"comfedl": 8, "fedavg": 3}) == 8
    assert auto_population({"comfedl": 500}) == 32 and auto_population({}) == 1


# --- batched ask/tell -----------------------------------------------------------------------------


def run_batched(search: BatchedOptunaSearch, n: int, population: int) -> list[dict]:
    """Tune's order for a population: P suggestions, then their results."""
    out = []
    for start in range(0, n, population):
        ids = [f"t{i}" for i in range(start, min(n, start + population))]
        configs = [search.suggest(i) for i in ids]
        out += configs
        for i, c in zip(ids, configs):
            search.on_trial_complete(i, {"m": score(c)})
    return out


def run_sequential(sampler, n: int) -> list[dict]:
    study = optuna.create_study(direction="maximize", sampler=sampler)
    out = []
    for _ in range(n):
        trial = study.ask(fixed_distributions=DIST)
        out.append(dict(trial.params))
        try:
            study.tell(trial, score(trial.params))
        except RuntimeError:  # GridSampler's stop() at the end of the grid, outside optimize()
            pass
    return out


def test_a_population_is_asked_before_any_result_is_told():
    search = BatchedOptunaSearch(DIST, metric="m", mode="max", population=4, seed=0)
    search.suggest("a")
    assert [t.state for t in search.study.trials] == [optuna.trial.TrialState.RUNNING] * 4
    for i in "bcd":
        search.suggest(i)
    assert len(search.study.trials) == 4 and search.batch == 0
    search.suggest("e")
    assert len(search.study.trials) == 8 and search.batch == 1


@pytest.mark.parametrize("population", [1, 3, 4, 8])
def test_random_sampler_batched_equals_sequential(population):
    batched = BatchedOptunaSearch(
        DIST,
        metric="m",
        mode="max",
        population=population,
        sampler=optuna.samplers.RandomSampler(seed=7),
    )
    assert run_batched(batched, 16, population) == run_sequential(
        optuna.samplers.RandomSampler(seed=7), 16
    )


@pytest.mark.parametrize("population", [1, 4, 6])
def test_grid_sampler_batched_equals_sequential(population):
    n = math.prod(len(v) for v in SPACE.values())
    batched = BatchedOptunaSearch(
        DIST,
        metric="m",
        mode="max",
        population=population,
        sampler=optuna.samplers.GridSampler(SPACE, seed=3),
    )
    got = run_batched(batched, n, population)
    assert got == run_sequential(optuna.samplers.GridSampler(SPACE, seed=3), n)
    assert len({json.dumps(c, sort_keys=True) for c in got}) == n  # the whole grid, once each


def test_tpe_batched_gives_valid_points_and_the_same_number_of_trials():
    search = BatchedOptunaSearch(DIST, metric="m", mode="max", population=4, seed=0)
    got = run_batched(search, 24, 4)
    assert len(got) == 24 and all(c[k] in SPACE[k] for c in got for k in SPACE)
    trials = search.study.trials
    assert len(trials) == 24 and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    assert search.study.best_value == max(score(c) for c in got)


def test_one_at_a_time_equals_ray_tunes_optuna_search():
    """population = 1 asks and tells as Ray Tune's OptunaSearch (TPE, same seed, same warm start)."""
    from ray.tune.search.optuna import OptunaSearch

    finished = [
        ({"lr": 0.01, "gamma": 1, "tau": 5}, -1.0),
        ({"lr": 1.0, "gamma": 5, "tau": 1}, -math.inf),
    ]
    ours = BatchedOptunaSearch(
        DIST, metric="m", mode="max", population=1, seed=0, finished=finished
    )
    ray_tune = OptunaSearch(
        space=DIST,
        metric="m",
        mode="max",
        seed=0,
        points_to_evaluate=[p for p, _ in finished],
        evaluated_rewards=[v for _, v in finished],
    )
    assert run_batched(ours, 16, 1) == run_batched(ray_tune, 16, 1)


def test_results_are_told_by_mode_and_state():
    states = optuna.trial.TrialState
    search = BatchedOptunaSearch(DIST, metric="m", mode="min", population=5, seed=0)
    for i in range(5):
        search.suggest(str(i))
    search.on_trial_complete("0", {"m": 0.5})
    search.on_trial_complete("1", {"m": math.inf})  # diverged, for mode min: the worst value
    search.on_trial_complete("2", None, error=True)
    search.on_trial_complete("3", {"m": float("nan")})
    search.on_trial_complete("4", None)  # no result: pruned, as OptunaSearch does
    search.on_trial_complete("4", None)  # told once
    assert search.study.direction == optuna.study.StudyDirection.MINIMIZE
    assert [t.state for t in search.study.trials] == [
        states.COMPLETE,
        states.COMPLETE,
        states.FAIL,
        states.FAIL,
        states.PRUNED,
    ]
    assert search.study.best_value == 0.5


def test_unique_searcher_over_a_batched_one_runs_each_point_once():
    space = {"lr": [0.01, 0.1, 1.0], "tau": [1, 5]}
    dist = {k: optuna.distributions.CategoricalDistribution(v) for k, v in space.items()}
    search = UniqueSearcher(
        BatchedOptunaSearch(dist, metric="m", mode="max", population=4, seed=0),
        {},
        metric="m",
        mode="max",
    )
    got = [
        search.suggest(f"t{i}") for i in range(6)
    ]  # all in flight: duplicates within a population skipped
    assert len({json.dumps(c, sort_keys=True) for c in got}) == 6
    assert search.suggest("t6") == "FINISHED"


# --- the option: checked, recorded only when given ------------------------------------------------


@pytest.mark.parametrize("value", ["0", "x", "-2"])
def test_command_line_refuses_a_bad_population(value, tmp_path, capsys):
    from raycompo.tune.cli import main

    assert main(["--space", "dro", "--population", value, "--out", str(tmp_path / "s")]) == 2
    assert "--population must be an integer >= 1 or 'auto'" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("value", [0, "many", 2.5])
def test_python_refuses_a_bad_population(value, tmp_path):
    import raycompo

    with pytest.raises(ConfigError, match="population"):
        raycompo.tune("dro", population=value, out=tmp_path / "s")


def test_population_is_auto_by_default_and_recorded_as_asked_and_resolved(tmp_path, monkeypatch):
    from raycompo.tune.sweep import SweepOptions, prepare

    monkeypatch.setattr("raycompo.engine.memory.available_local", lambda: 2.0**40)  # auto: not memory-bound here

    _, meta, _ = prepare(SweepOptions(space="sinusoid", search="grid", out=str(tmp_path / "a")))
    assert meta["population_asked"] == "default" and meta["population"] == 32  # 'auto': 192 points, capped
    assert "population_off" not in meta and "population" not in meta["options"]
    _, meta, _ = prepare(SweepOptions(space="sinusoid", out=str(tmp_path / "one"), population=1))
    assert meta["population_asked"] == 1 and meta["population"] == 1 and "population_off" not in meta
    _, meta, _ = prepare(SweepOptions(space="sinusoid", out=str(tmp_path / "b"), population="auto", samples=8,
                                      algorithms=["local-scgd"]))
    assert (
        meta["population_asked"] == "auto" and meta["population"] == 8
    )  # the 8 samples asked, all of one structure (p = 5)
    _, meta, _ = prepare(
        SweepOptions(space="sinusoid", search="grid", out=str(tmp_path / "c"), population="auto")
    )
    assert meta["population"] == 32  # local-scgdm's grid of 192 points, capped
    _, meta, _ = prepare(SweepOptions(space="sinusoid", out=str(tmp_path / "d"), population=3))
    assert meta["population_asked"] == 3 and meta["population"] == 3


def test_the_default_turns_populations_off_where_they_cannot_run_and_says_why(tmp_path):
    """--backend ray (a population runs in one process) and a tracker (one tracker run per
    Tune trial): the default falls back to one trial at a time and records why; the same
    options with an explicit --population P > 1 are refused, naming both."""
    from raycompo.tune.sweep import SweepOptions, prepare

    _, meta, _ = prepare(SweepOptions(space="sinusoid", backend="ray", out=str(tmp_path / "a")))
    assert meta["population"] == 1 and "--backend ray" in meta["population_off"]
    _, meta, _ = prepare(SweepOptions(space="sinusoid", out=str(tmp_path / "b")), trackers=["mlflow"])
    assert meta["population"] == 1 and "--tracker mlflow" in meta["population_off"]
    with pytest.raises(ConfigError, match="--population 3 .*--tracker mlflow"):
        prepare(SweepOptions(space="sinusoid", out=str(tmp_path / "c"), population=3), trackers=["mlflow"])
    with pytest.raises(ConfigError, match="--population 3 .*--backend inline"):
        prepare(SweepOptions(space="sinusoid", backend="ray", out=str(tmp_path / "d"), population=3))
    assert not any((tmp_path / n).exists() for n in "abcd")  # prepare writes nothing
    # a sweep of populations resumed with a tracker: refused as a new one is
    _, meta, store = prepare(SweepOptions(space="sinusoid", out=str(tmp_path / "e"), population=3))
    store.write_meta(meta)
    assert prepare(SweepOptions(), resume=str(tmp_path / "e"))[1]["population"] == 3
    with pytest.raises(ConfigError, match="--population 3 .*--tracker mlflow"):
        prepare(SweepOptions(), resume=str(tmp_path / "e"), trackers=["mlflow"])


@pytest.mark.slow
def test_an_optuna_sweep_asks_populations_and_says_how_its_trials_group(
    tmp_path, ray_session, capsys
):
    import pandas as pd

    from raycompo.tune.cli import main

    out = tmp_path / "s"
    argv = [
        "--space",
        "dro",
        "--algos",
        "fedavg",
        "comfedl",
        "--samples",
        "3",
        "--rounds",
        "1",
        "--population",
        "2",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == 6 and trials["trial_id"].is_unique
    assert json.loads((out / "sweep.json").read_text())["population"] == 2
    [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("populations: ")]
    assert "of up to 2 trials (" in line and "fedavg: " in line and "comfedl: " in line


@pytest.mark.slow
def test_a_grid_sweep_groups_its_points_by_structure(tmp_path, ray_session, capsys):
    import pandas as pd

    from raycompo.tune.cli import main

    space = tmp_path / "lr.yaml"  # 7 learning rates, one structure (tau 1)
    space.write_text(
        "task: dro-mnist5k\nrounds: 1\nalgorithms:\n"
        "  fedavg: {lr: [0.001, 0.01, 0.05, 0.1, 0.2, 0.5, 1], tau: [1]}\n"
    )
    out = tmp_path / "s"
    assert (
        main(["--space", str(space), "--search", "grid", "--population", "4", "--out", str(out)])
        == 0
    )
    assert len(pd.read_csv(out / "trials.csv")) == 7
    assert "populations: 2 of up to 4 trials (fedavg: 2)" in capsys.readouterr().err  # 4 + 3


@pytest.mark.slow
def test_a_resumed_sweep_asks_populations_as_it_started_and_runs_no_trial_twice(
    tmp_path, ray_session
):
    import pandas as pd

    from raycompo.tune.cli import main

    space = tmp_path / "small.yaml"
    space.write_text(
        "task: dro-mnist5k\nrounds: 1\nsamples: 4\nalgorithms:\n  fedavg: {lr: [0.001, 0.01, 0.1], tau: [1, 5]}\n"
    )
    out = tmp_path / "s"
    argv = [
        "--space",
        str(space),
        "--population",
        "3",
        "--out",
        str(out),
        "--stop-after",
        "2",
        "--max-concurrent",
        "1",
    ]
    assert main([*argv, "--quiet"]) == 130
    assert 2 <= len(pd.read_csv(out / "trials.csv")) < 4
    assert main(["--resume", str(out), "--quiet"]) == 0
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == 4 and len({(r.lr, r.tau) for r in trials.itertuples()}) == 4
    assert json.loads((out / "sweep.json").read_text())["population"] == 3


@pytest.mark.slow
def test_a_grid_sweep_run_as_populations_gives_each_trial_its_rows_alone(tmp_path, ray_session, capsys):
    """--population 4: two Tune trials of 4 members each (one structure per algorithm), the
    same trials, statuses (a diverging ComFedL step size) and final values as --population 1."""
    import numpy as np
    import pandas as pd

    from raycompo.tune.cli import main

    space = tmp_path / "lr.yaml"
    space.write_text(
        "task: synthetic\nrounds: 2\nsettings: {n_clients: 24, clients_per_round: 8, tau: 3}\nalgorithms:\n"
        "  fedavg: {lr: [0.01, 0.02, 0.05, 0.1]}\n  comfedl: {lr: [0.001, 0.002, 0.005, 5.0], gamma: [10.0]}\n"
    )
    tables = []
    for extra in ([], ["--population", "4"]):
        out = tmp_path / f"s{len(extra)}"
        assert main(["--space", str(space), "--search", "grid", "--out", str(out), *extra]) == 0
        tables.append(pd.read_csv(out / "trials.csv").sort_values("trial_id").reset_index(drop=True))
    assert "populations: 2 of up to 4 trials (" in capsys.readouterr().err
    alone, together = tables
    assert len(together) == 8 and list(together["trial_id"]) == list(alone["trial_id"])
    assert list(together["status"]) == list(alone["status"]) and (together["status"] == "diverged").sum() == 1
    cols = [c for c in alone.columns if c.startswith("final_") and "time" not in c]
    x, y = alone[cols].to_numpy(float), together[cols].to_numpy(float)
    finite = np.isfinite(x) & np.isfinite(y)
    assert (np.isfinite(x) == np.isfinite(y)).all()
    assert np.allclose(x[finite], y[finite], rtol=1e-5, atol=1e-7)


def test_populations_run_inline(tmp_path):
    """--backend ray is refused; --scheduler asha stops members one by one (tests/test_member_asha.py)."""
    from raycompo.errors import ConfigError
    from raycompo.tune.sweep import SweepOptions, prepare

    opts = SweepOptions(space="dro", population=4, out=str(tmp_path / "ray"), backend="ray")
    with pytest.raises(ConfigError, match="--backend inline"):
        prepare(opts)


def test_the_population_searcher_hands_whole_structures_and_tells_each_member_its_own_result():
    from ray.tune.search import Searcher

    from raycompo.tune.population_search import PopulationSearcher

    class Inner(Searcher):  # fedavg and comfedl in turn, as PerAlgorithmSearcher hands them
        def __init__(self):
            super().__init__(metric="m", mode="max")
            self.todo = [{"algorithm": a, "lr": lr} for lr in (1, 2, 3) for a in ("fedavg", "comfedl")]
            self.told: dict[str, tuple] = {}
            self.ids: dict[str, dict] = {}

        def suggest(self, trial_id):
            if not self.todo:
                return Searcher.FINISHED
            self.ids[trial_id] = self.todo.pop(0)
            return self.ids[trial_id]

        def on_trial_complete(self, trial_id, result=None, error=False):
            self.told[trial_id] = (self.ids[trial_id], None if result is None else result["m"], error)

    inner = Inner()
    s = PopulationSearcher(inner, 2, key=lambda c: c["algorithm"], metric="m", mode="max")
    first = s.suggest("t1")
    assert first == {"algorithm": "fedavg", "population": [{"lr": 1}, {"lr": 2}]}
    second = s.suggest("t2")
    assert second == {"algorithm": "comfedl", "population": [{"lr": 1}, {"lr": 2}]}
    s.on_trial_result("t1", {"member": 1, "m": 0.5, "status": "completed"})
    s.on_trial_result("t1", {"member": 0, "m": 0.25, "status": "error"})
    s.on_trial_complete("t1")
    told = sorted(inner.told.values(), key=lambda t: t[0]["lr"])
    assert told == [({"algorithm": "fedavg", "lr": 1}, None, True), ({"algorithm": "fedavg", "lr": 2}, 0.5, False)]
    assert s.suggest("t3")["population"] == [{"lr": 3}] and s.suggest("t4")["population"] == [{"lr": 3}]
    assert s.suggest("t5") == Searcher.FINISHED


@pytest.mark.slow
def test_a_grid_sweep_of_populations_stopped_part_way_resumes_to_the_trials_of_an_uninterrupted_sweep(
    tmp_path, ray_session
):
    """Stopped once its first population ended (a later one that had started: stopped, its
    members unrecorded), --resume runs every member left, each recorded once, with the final values of
    the same grid run trial by trial in one go (sweep trials keep no checkpoints: a member that
    was running starts again from round 0, as a trial alone does)."""
    import numpy as np
    import pandas as pd

    from raycompo.tune.cli import main

    space = tmp_path / "lr.yaml"
    space.write_text(
        "task: synthetic\nrounds: 2\nsettings: {n_clients: 24, clients_per_round: 8, tau: 3}\nalgorithms:\n"
        "  fedavg: {lr: [0.01, 0.02, 0.05, 0.1, 0.2, 0.3]}\n"
    )
    grid = ["--space", str(space), "--search", "grid", "--quiet"]
    out = tmp_path / "killed"
    assert main([*grid, "--out", str(out), "--population", "2", "--max-concurrent", "1", "--stop-after", "2"]) == 130
    first = pd.read_csv(out / "trials.csv")
    assert len(first) == 2 and first["trial_id"].is_unique  # the first population, both members
    assert main(["--resume", str(out), "--quiet"]) == 0
    resumed = pd.read_csv(out / "trials.csv").sort_values("trial_id").reset_index(drop=True)
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 6 * 3 and len({(x["trial_id"], x["round"]) for x in lines}) == 18  # rounds 0-2, once
    assert main([*grid, "--out", str(tmp_path / "whole")]) == 0
    whole = pd.read_csv(tmp_path / "whole" / "trials.csv").sort_values("trial_id").reset_index(drop=True)
    assert list(resumed["trial_id"]) == list(whole["trial_id"]) and (resumed["status"] == "completed").all()
    cols = [c for c in whole.columns if c.startswith("final_") and "time" not in c]
    assert np.allclose(resumed[cols].to_numpy(float), whole[cols].to_numpy(float), rtol=1e-5, atol=1e-7)


def test_auto_leaves_populations_off_where_they_would_be_small(tmp_path):
    """The README's quick start (8 Optuna samples per algorithm over 3 values of tau: about
    2.7 trials a population) runs one trial at a time and says why; its grid does not."""
    from raycompo.tune.population import AUTO_MIN_MEMBERS, too_few_members
    from raycompo.tune.sweep import SweepOptions, prepare

    one = [{"tau": 1}]
    three = [{"tau": t} for t in (1, 5, 10)]
    assert too_few_members({"fedavg": 8}, {"fedavg": one}) is None  # 8 trials, 1 structure
    assert too_few_members({"fedavg": 12}, {"fedavg": three}) is None  # 4 a population: enough
    why = too_few_members({"fedavg": 8, "comfedl": 3}, {"fedavg": three, "comfedl": one})
    assert why is not None and "about 2.8 trials a population, 11 trials over 4 structures (the structural tau" in why
    assert AUTO_MIN_MEMBERS == 4
    _, meta, _ = prepare(SweepOptions(space="dro", out=str(tmp_path / "q")))
    assert meta["population"] == 1 and meta["population_off"].startswith("auto: about 2.7 trials a population")
    _, meta, _ = prepare(SweepOptions(space="dro", search="grid", out=str(tmp_path / "g")))
    assert meta["population"] > 1 and "population_off" not in meta


def test_auto_is_bounded_by_the_memory_available():
    """shared + P * per_trial <= fraction * available, with a made-up memory figure."""
    from raycompo.tune.population import AUTO_MEMORY_FRACTION, memory_bound

    gb = 2**30
    p = memory_bound(per_trial=0.5 * gb, shared=1 * gb, available=8 * gb)
    assert p == 6 and 1 * gb + p * 0.5 * gb <= AUTO_MEMORY_FRACTION * 8 * gb < 1 * gb + (p + 1) * 0.5 * gb
    assert memory_bound(per_trial=gb, shared=4 * gb, available=4 * gb) == 1  # never below one trial
    assert auto_population({"comfedl": 8}, memory=6) == 6 and auto_population({"comfedl": 3}, memory=6) == 3


def test_the_sweeps_auto_population_fits_a_small_machine(monkeypatch, tmp_path):
    """A made-up trial of 1 GB beside 1 GB shared: half of 12 GB available holds 5 (of the grid's
    192 points), half of 4 GB holds 1."""
    from raycompo.tune import sweep
    from raycompo.tune.sweep import SweepOptions, prepare

    gb = 2**30
    monkeypatch.setattr(sweep, "trial_memory", lambda resolved: (1.0 * gb, 1.0 * gb))
    sizes = []
    for name, available in (("a", 12 * gb), ("b", 4 * gb)):
        monkeypatch.setattr("raycompo.engine.memory.available_local", lambda a=available: float(a))
        _, meta, _ = prepare(SweepOptions(space="sinusoid", search="grid", out=str(tmp_path / name), population="auto"))
        sizes.append(meta["population"])
    assert sizes == [5, 1]


def test_auto_weighs_every_structure_not_only_the_first_point(monkeypatch, tmp_path):
    """A space sweeping the cohort size (structural) and lr (per row): auto's bound is set by
    the larger cohort, wherever it stands in the grid, and weighs each structure once."""
    from raycompo.algorithms.fedavg import FedAvg
    from raycompo.tune import sweep
    from raycompo.tune.population import structure_points
    from raycompo.tune.sweep import SweepOptions, prepare

    spec = {"lr": [0.1, 0.2, 0.3], "clients_per_round": [4, 16], "tau": [2]}
    assert structure_points(spec, FedAvg) == [{"lr": 0.1, "clients_per_round": m, "tau": 2} for m in (4, 16)]
    space = tmp_path / "m.yaml"
    space.write_text("task: synthetic\nrounds: 2\nsettings: {n_clients: 24}\nalgorithms:\n"
                     "  fedavg: {lr: [0.1, 0.2, 0.3, 0.4], clients_per_round: [4, 16]}\n")  # 4 trials a structure
    gb = 2**30
    weighed = []

    def trial_memory(resolved):  # 1 GB a trial per client of the cohort: the larger cohort needs more
        m = resolved.config.settings["clients_per_round"]
        weighed.append(m)
        return m * 1.0 * gb, 1.0 * gb

    monkeypatch.setattr(sweep, "trial_memory", trial_memory)
    monkeypatch.setattr("raycompo.engine.memory.available_local", lambda: 130.0 * gb)
    _, meta, _ = prepare(SweepOptions(space=str(space), search="grid", out=str(tmp_path / "s"), population="auto"))
    assert sorted(weighed) == [4, 16]  # each structure once, lr not
    assert meta["population"] == 4  # (0.5 * 130 - 1) // 16; the first point alone (m = 4) would give 6
