"""The reproductions on asynchronous aggregation (issue 31, item 6): a variant's RunConfig keys
(aggregation, concurrency, buffer) reach its runs, its command and the resume check."""

from __future__ import annotations

import shlex

import pytest

from raycompo.reproduce import CLAIMS
from raycompo.reproduce.runner import command, plan, validate
from raycompo.reproduce.spec import Claim, Panel, V, run_keys


def parsed(job):
    """The RunConfig `python -m raycompo.run` builds from the job's command."""
    from raycompo.run import build_parser, config_from_args

    return config_from_args(build_parser().parse_args(shlex.split(command(job))[3:]))


def test_a_variant_keyword_that_is_a_runconfig_field_sets_the_field_not_a_setting():
    assert {"aggregation", "concurrency", "buffer"} <= set(run_keys())
    v = V("fb", "fedavg", system="mobile-sync", aggregation="buffered", concurrency=4, buffer=2, lr=0.1, server_lr=0.5)
    assert v.run == {"aggregation": "buffered", "concurrency": 4, "buffer": 2}
    assert v.settings == {"lr": 0.1, "server_lr": 0.5}  # an aggregation setting is a flat setting, as with --set
    assert "aggregation=buffered" in v.described() and "buffer=2" in v.described()


def test_the_run_and_its_command_carry_the_aggregation(tmp_path):
    claim = Claim(name="c", source="s", title="t", task="synthetic", rounds=3, x_axis="sim_time",
                  settings={"n_clients": 10, "clients_per_round": 4},
                  variants=(V("fb", "fedavg", system="mobile-sync", aggregation="buffered", concurrency=4, buffer=2,
                              budget={"sim_time": 5}),
                            V("sync", "fedavg", system="mobile-sync")),
                  metrics=("sim_time",), panels=(Panel("val_acc", "a"),), paper_says="p")
    fb, sync = plan(claim, tmp_path, seeds=1)
    validate([fb, sync])  # the engine accepts both (K <= C, a system for the buffered one)
    assert (fb.cfg.aggregation, fb.cfg.concurrency, fb.cfg.buffer) == ("buffered", 4, 2)
    assert "--aggregation buffered --concurrency 4 --buffer 2" in command(fb)
    again = parsed(fb)
    assert (again.aggregation, again.concurrency, again.buffer, again.system, again.budget, again.settings) == \
        (fb.cfg.aggregation, fb.cfg.concurrency, fb.cfg.buffer, fb.cfg.system, fb.cfg.budget, fb.cfg.settings)
    assert "--aggregation" not in command(sync) and parsed(sync).aggregation == sync.cfg.aggregation


def test_a_finished_run_with_another_aggregation_is_run_again(tmp_path):
    import json

    from raycompo.reproduce.runner import is_done

    claim = Claim(name="c", source="s", title="t", task="synthetic", rounds=3, settings={"n_clients": 10},
                  variants=(V("fb", "fedavg", system="mobile-sync", aggregation="buffered", concurrency=4, buffer=2),),
                  metrics=("sim_time",), panels=(Panel("val_acc", "a"),), paper_says="p")
    [job] = plan(claim, tmp_path, seeds=1)
    job.out.mkdir(parents=True)
    recorded = {**job.cfg.to_dict(), "status": "completed"}
    (job.out / "config.json").write_text(json.dumps(recorded))
    assert is_done(job)
    (job.out / "config.json").write_text(json.dumps({**recorded, "buffer": 3}))
    assert not is_done(job)


@pytest.mark.parametrize("name", ["fedbuff-speed", "scgdm-stale"])
def test_the_async_claims_are_accepted_by_the_engine_before_anything_runs(name, tmp_path):
    claim = CLAIMS[name]
    jobs = plan(claim, tmp_path, seeds=1)
    validate(jobs)
    kinds = {j.variant.label: j.cfg.aggregation for j in jobs}
    assert "buffered" in kinds.values() and "sync" in kinds.values()
    for j in jobs:  # every run stops at the claim's common budget, and says so in its command
        assert j.cfg.budget and "--budget" in command(j)
        assert j.cfg.system in ("mobile-sync", "mobile-fastest") and f"--system {j.cfg.system}" in command(j)


def test_on_a_cost_axis_the_mean_curve_ends_at_the_last_round_every_run_reached():
    import pandas as pd

    from raycompo.reproduce.report import band

    # two runs stopped by a budget at rounds 3 and 4; the second's cost at round 4 is below the first's at 3
    a = pd.DataFrame({"round": range(4), "val_acc": [0.1, 0.2, 0.3, 0.4], "sim_time": [0.0, 1.0, 2.0, 3.0]})
    b = pd.DataFrame({"round": range(5), "val_acc": [0.1, 0.3, 0.5, 0.6, 0.7], "sim_time": [0.0, 0.5, 1.0, 1.5, 2.0]})
    x, m, _, _ = band([a, b], "val_acc", 1.0, x_axis="sim_time")
    assert list(x) == [0.0, 0.75, 1.5, 2.25]  # means of both runs' costs, increasing; round 4 (b alone) left out
    assert list(m) == pytest.approx([0.1, 0.25, 0.4, 0.5])
