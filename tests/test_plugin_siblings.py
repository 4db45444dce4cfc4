"""A plugin file as a researcher writes it (issue 27, part 7): it imports the user's other
files beside it (`from my_base import Base`), from whatever folder the command runs, on
every backend; its settings may reuse a name that only another task declares."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

import raycompo
from raycompo.errors import ConfigError
from tests.helpers import SMALL_DRO

STEPS = '''
def shrink_towards(w, mean, shrink):
    """w + shrink * (mean - w): the server's damped step."""
    return w + shrink * (mean - w)
'''

BASE = '''
from dataclasses import dataclass

import raycompo
import my_steps  # used by name inside a method: the module itself must travel


@dataclass
class DampedSettings(raycompo.LocalSettings):
    shrink: float = 0.5
    """Server step: w <- w + shrink * (mean_i w_i - w)."""
    noise: float = 0.0
    """A name toy-co's task settings also use (no collision on another task)."""


class Base(raycompo.Algorithm):
    Settings = DampedSettings

    def server_round(self, ctx, w, state):
        sums = ctx.map("local", ctx.sample(ctx.n_clients), {"w": w})
        return my_steps.shrink_towards(w, sums["w"] / sums["k"], self.s.shrink), state
'''

ALGO = '''
import raycompo
from my_base import Base


class Mine(Base):
    name = "mine"

    @raycompo.client_phase("local")
    def local(self, c, state, payload):
        g = lambda w, b, t: self.loss_grad(w, b)  # noqa: E731
        return {"w": raycompo.local_sgd(c, payload["w"], self.s.tau, self.s.lr, self.s.batch_size, g), "k": 1.0}, state
'''


@pytest.fixture
def user_folder(tmp_path):
    """p/my_algo.py importing p/my_base.py importing p/my_steps.py; a module name unique
    per test, so no earlier import in this process helps."""
    folder = tmp_path / "p"
    folder.mkdir()
    tag = tmp_path.name.replace("-", "_")
    (folder / f"my_steps_{tag}.py").write_text(STEPS)
    (folder / f"my_base_{tag}.py").write_text(textwrap.dedent(BASE).replace("my_steps", f"my_steps_{tag}"))
    (folder / "my_algo.py").write_text(textwrap.dedent(ALGO).replace("my_base", f"my_base_{tag}"))
    (tmp_path / "elsewhere").mkdir()
    return folder


@pytest.mark.slow
def test_cli_from_another_folder_imports_the_plugins_sibling(user_folder):
    elsewhere = user_folder.parent / "elsewhere"
    sets = [f"{k}={v}" for k, v in SMALL_DRO.items()]
    done = subprocess.run(
        [sys.executable, "-m", "raycompo.run", "--algo", "../p/my_algo.py:Mine", "--backend", "inline", "--rounds",
         "2", "--threads", "1", "--quiet", "--out", "run", "--set", *sets],
        cwd=elsewhere, env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = pd.read_csv(elsewhere / "run" / "metrics.csv")
    assert list(rows["round"]) == [0, 1, 2]
    assert rows["train_loss"].iloc[-1] < rows["train_loss"].iloc[0]


@pytest.mark.slow
def test_sibling_imports_travel_to_ray_workers(ray_session, user_folder, monkeypatch):
    """Ray was started before the plugin's folder was on sys.path: its workers cannot
    import my_base or my_steps by name, so they must arrive by value."""
    monkeypatch.chdir(user_folder.parent / "elsewhere")
    spec = f"{user_folder}/my_algo.py:Mine"
    inline = raycompo.run("dro-mnist5k", spec, rounds=2, settings=SMALL_DRO)
    remote = raycompo.run("dro-mnist5k", spec, rounds=2, settings=SMALL_DRO, backend="ray", clients_per_actor=2,
                          cpus_per_actor=0.25)
    assert remote.status == "completed"
    cols = [c for c in inline.metrics.columns if "time" not in c and inline.metrics[c].dtype.kind == "f"]
    assert float((inline.metrics[cols] - remote.metrics[cols]).abs().max().max()) <= 1e-6
    # result.config is complete without out=: the placement of the hosts is in it
    assert remote.config["placement"]["hosts"] == 2 and remote.config["placement"]["clients_per_actor"] == 2


def test_a_setting_another_task_declares_is_no_collision(user_folder):
    """`noise` is a setting of toy-co: on dro-mnist5k it is the algorithm's alone."""
    spec = f"{user_folder}/my_algo.py:Mine"
    result = raycompo.run("dro-mnist5k", spec, rounds=1, settings={**SMALL_DRO, "noise": 0.25})
    assert result.config["effective_settings"]["noise"] == 0.25
    with pytest.raises(ConfigError, match=r"setting 'noise' is declared by task toy-co and by algo mine \(.*my_algo"):
        raycompo.run("toy-co", spec, rounds=1)
