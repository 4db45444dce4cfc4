"""A resume reproduces the run it continues (issue 33): with the printed hint alone
(`--resume DIR`, no `--threads`) the rows are those of the run done in one go, and a
clients.csv deleted or cut short is refused like metrics.csv's damage, not silently lost."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from raycompo.run import main

RUN = ["--task", "synthetic", "--algo", "fedavg", "--backend", "inline", "--quiet",
       "--set", "n_clients=20", "clients_per_round=5", "tau=3", "max_samples=80"]


@pytest.fixture
def threads():
    """A number of threads other than this process's (conftest sets 1); restored after."""
    before = torch.get_num_threads()
    yield 1 if before != 1 else 2
    torch.set_num_threads(before)


def same_rows(a, b):
    for name in ("metrics.csv", "clients.csv"):
        x, y = pd.read_csv(a / name), pd.read_csv(b / name)
        timed = [c for c in x.columns if c in ("round_time", "wall_time")]
        pd.testing.assert_frame_equal(x.drop(columns=timed), y.drop(columns=timed), check_exact=True)


def test_resume_with_the_printed_hint_uses_the_runs_threads(tmp_path, threads, capsys):
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main([*RUN, "--rounds", "5", "--threads", str(threads), "--out", str(whole)]) == 0
    assert main([*RUN, "--rounds", "2", "--threads", str(threads), "--out", str(part), "--checkpoint-every", "1"]) == 0
    assert json.loads((part / "config.json").read_text())["threads"] == threads
    torch.set_num_threads(3 - threads)  # the resuming process starts with another number
    assert main(["--resume", str(part), "--rounds", "5", "--quiet"]) == 0
    assert torch.get_num_threads() == threads
    same_rows(whole, part)
    capsys.readouterr()
    assert main(["--resume", str(part), "--rounds", "6", "--quiet", "--threads", str(3 - threads)]) == 2
    assert f"cannot change --threads {3 - threads} (the run has {threads})" in capsys.readouterr().err


def test_a_run_without_threads_records_the_number_it_used(tmp_path):
    assert main([*RUN, "--rounds", "1", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "config.json").read_text())["threads"] == torch.get_num_threads()


def _damaged(tmp_path, damage, capsys) -> str:
    out = tmp_path / "run"
    assert main([*RUN, "--rounds", "3", "--eval-every", "2", "--out", str(out), "--checkpoint-every", "1"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.name != "clients.csv"}
    damage(out / "clients.csv")
    capsys.readouterr()
    assert main(["--resume", str(out), "--rounds", "5", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name != "clients.csv"} == before  # nothing rewritten
    return err


def test_resume_refuses_a_deleted_clients_file(tmp_path, capsys):
    err = _damaged(tmp_path, lambda p: p.unlink(), capsys)
    assert "cannot resume" in err and "clients.csv is missing" in err


def test_resume_refuses_a_clients_file_without_its_last_rounds(tmp_path, capsys):
    def cut(path):  # rounds 0 and 2 kept (evaluated: 0, 2 and the last, 3)
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(ln for ln in lines if not ln.startswith("3,")))

    err = _damaged(tmp_path, cut, capsys)
    assert "clients.csv lacks the rows of round(s) 3, which metrics.csv evaluated" in err


def test_resume_refuses_a_clients_file_cut_within_a_round(tmp_path, capsys):
    def cut(path):
        text = path.read_text()
        path.write_text(text[: len(text) - 200])

    err = _damaged(tmp_path, cut, capsys)
    assert "clients.csv holds" in err and "rows of round 3" in err and "cut short" in err
