"""Resuming a completed run with no more rounds asked for is not an error (issue 27, part
3): the command line exits 0 saying there is nothing left to do, `raycompo.resume` returns
the run's result; asking for fewer rounds than were done stays an error."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

import raycompo
from raycompo.errors import ConfigError
from tests.helpers import SMALL_DRO

ARGS = ["--backend", "inline", "--threads", "1", "--quiet", "--task", "dro-mnist5k", "--algo", "comfedl",
        "--rounds", "3", "--set", "gamma=1", *(f"{k}={v}" for k, v in SMALL_DRO.items())]


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "raycompo.run", *args], env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def completed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("finished") / "run"
    done = _cli(*ARGS, "--out", str(folder))
    assert done.returncode == 0, done.stderr
    return folder


def _files(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.name != ".raycompo.lock"}


@pytest.mark.slow
def test_cli_resume_of_a_completed_run_exits_0_and_says_nothing_is_left(completed):
    before = _files(completed)
    for extra in ([], ["--rounds", "3"]):
        again = _cli("--resume", str(completed), *extra)
        assert again.returncode == 0, again.stderr
        assert "nothing left to do" in again.stdout and "already completed (3 rounds)" in again.stdout
        assert "Traceback" not in again.stderr
    assert _files(completed) == before  # nothing was run or rewritten


def test_cli_resume_with_fewer_rounds_than_done_exits_2(completed):
    fewer = _cli("--resume", str(completed), "--rounds", "2")
    assert fewer.returncode == 2
    assert "already completed (3 rounds)" in fewer.stderr and "cannot be cut to 2 rounds" in fewer.stderr


def test_api_resume_of_a_completed_run_returns_its_metrics(completed):
    before = _files(completed)
    result = raycompo.resume(completed)
    assert result.status == "completed" and result.out == str(completed)
    assert result.config["rounds_done"] == 3 and result.final["round"] == 3
    pd.testing.assert_frame_equal(result.metrics, pd.read_csv(completed / "metrics.csv"), check_dtype=False)
    assert raycompo.resume(completed, rounds=3).final == result.final
    with pytest.raises(ConfigError, match=r"already completed \(3 rounds\).*cannot be cut to 1 rounds"):
        raycompo.resume(completed, rounds=1)
    assert _files(completed) == before
