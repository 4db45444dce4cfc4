"""A task made by `task_from_arrays` and passed as an object is recorded by something that
resolves again (issue 27, part 7): the module-level name bound to it; a class only the
session can make says how to resume it, and a sweep's re-run command says how to
re-create it."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

import raycompo
from raycompo.configuration import plugins
from raycompo.tune.results import command_line

MODULE = '''
import numpy as np
import raycompo

_rng = np.random.default_rng(0)
_x = _rng.normal(size=(120, 5)).astype("float32")
_y = (_x[:, 0] > 0).astype("int64")
MyTask = raycompo.task_from_arrays(_x, _y, n_clients=4)
'''


def _python(code: str, cwd, path: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (path, os.environ.get("PYTHONPATH", "")) if p)}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_a_module_level_arrays_task_is_recorded_by_its_name_and_resumes_elsewhere(tmp_path, monkeypatch):
    (tmp_path / "mydata_rec.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    import mydata_rec

    out = tmp_path / "run"
    first = raycompo.run(mydata_rec.MyTask, "fedavg", rounds=2, out=out)
    assert first.config["task"] == "mydata_rec:MyTask"
    assert plugins.load("task", "mydata_rec:MyTask") is mydata_rec.MyTask
    # a new process, no task= given: the recorded spec finds the class (and its data) again
    done = _python(f"import raycompo; r = raycompo.resume({str(out)!r}, rounds=3); print(list(r.metrics['round']))",
                   cwd=tmp_path, path=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0, 1, 2, 3]"


def _unbound_task():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(80, 4)).astype("float32")
    return raycompo.task_from_arrays(x, (x[:, 1] > 0).astype("int64"), n_clients=4)


@pytest.mark.slow
def test_a_class_only_the_session_can_make_says_to_pass_it_again(tmp_path):
    out = tmp_path / "run"
    task = _unbound_task()
    result = raycompo.run(task, "fedavg", rounds=1, out=out)
    spec = result.config["task"]
    assert "<locals>" in spec and plugins.session_only(spec)
    cli = subprocess.run([sys.executable, "-m", "raycompo.run", "--resume", str(out), "--rounds", "2", "--quiet"],
                         capture_output=True, text=True, timeout=300)
    assert cli.returncode == 2 and "Traceback" not in cli.stderr
    assert "a class of the Python session" in cli.stderr and "raycompo.resume(out, task=TheClass)" in cli.stderr
    api = _python(f"import raycompo; raycompo.resume({str(out)!r}, rounds=2)", cwd=tmp_path)
    assert api.returncode != 0 and "raycompo.resume(out, task=TheClass)" in api.stderr
    # in a session that has the class, passing it again resumes
    assert list(raycompo.resume(out, rounds=2, task=task).metrics["round"]) == [0, 1, 2]


def test_a_main_class_says_to_pass_it_again():
    with pytest.raises(raycompo.ConfigError, match=r"algo=TheClass"):
        plugins.load("algorithm", "__main__:NotHere")


def test_a_sweeps_command_for_a_session_class_is_the_call_to_make():
    cfg = {"task": "tests.mod:task_from_arrays.<locals>.ArraysTask", "algo": "fedavg", "rounds": 5, "seed": 1,
           "backend": "inline", "settings": {"lr": 0.1, "n_clients": 4}, "eval_every": 1, "data_dir": None}
    command = command_line(cfg)
    call, _, comment = command.partition("  # ")
    assert call == "raycompo.run(ArraysTask, 'fedavg', rounds=5, seed=1, backend='inline', " \
                   "settings={'lr': 0.1, 'n_clients': 4})"
    assert "ArraysTask = the task class of your session (tests.mod:task_from_arrays.<locals>.ArraysTask)" in comment
    # the call is Python that runs as written once the class is there
    assert compile(call, "<command>", "eval")
    plain = command_line({**cfg, "task": "dro-mnist5k"})
    assert plain.startswith("python -m raycompo.run --task dro-mnist5k --algo fedavg --rounds 5 --seed 1")
    # one line of text, which trials.csv holds as it is
    assert isinstance(command, str) and "\n" not in command
    assert pd.read_csv(io.StringIO(pd.DataFrame({"command": [command]}).to_csv(index=False)))["command"][0] == command


@pytest.mark.slow
def test_a_sweeps_command_for_a_module_level_arrays_task_runs(tmp_path, monkeypatch, ray_session):
    """raycompo.tune(dict) with a task_from_arrays class: the command trials.csv writes
    re-runs the trial from a shell (it exited 2 when the class was recorded by its
    '<locals>' name)."""
    import shlex

    import pandas as pd

    (tmp_path / "mydata_sweep.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    import mydata_sweep

    sweep = raycompo.tune({"task": mydata_sweep.MyTask, "rounds": 1, "metric": "val_acc", "mode": "max",
                           "algorithms": {"fedavg": {"lr": [0.1]}}}, search="grid", out=tmp_path / "sweep")
    (command,) = sweep.trials["command"]
    assert "--task mydata_sweep:MyTask" in command, command
    out = tmp_path / "again"
    words = shlex.split(command)
    done = subprocess.run([sys.executable, *words[1:], "--quiet", "--threads", "1", "--out", str(out)],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [str(tmp_path), os.environ.get("PYTHONPATH", "")])},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    final = pd.read_csv(out / "metrics.csv").iloc[-1]
    assert final["val_acc"] == pytest.approx(sweep.trials["final_val_acc"].iloc[0], abs=1e-6)
