"""An algorithm that draws its own cohorts (DRFL: with replacement by its mixing weights)
cannot run on a simulated system that chooses cohorts among online clients: it is refused
before the first round, naming why (issue 32: under `mobile` it used to wait 4.7 simulated
days for offline clients, silently). On a system whose cohorts are the engine's own draw
(always online, no over-selection) it runs and its exchanges are timed."""

from __future__ import annotations

import subprocess
import sys

import pytest

import raycompo
from raycompo.errors import ConfigError

SETTINGS = {"n_clients": 20, "clients_per_round": 5}


@pytest.mark.parametrize("system", ["mobile", "mobile-fastest"])
def test_drfl_is_refused_where_the_system_chooses_cohorts(system, tmp_path):
    with pytest.raises(ConfigError, match=r"drfl cannot run on a system that chooses cohorts.*mixing weights"):
        raycompo.run("synthetic", "drfl", rounds=2, settings=SETTINGS, backend="inline", system=system)
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "raycompo.run", "--task", "synthetic", "--algo", "drfl", "--rounds", "2",
                        "--backend", "inline", "--system", system, "--set", "n_clients=20", "clients_per_round=5",
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stderr
    assert "mixing weights" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not out.exists()  # refused before anything was written


def test_drfl_runs_where_cohorts_are_the_engines_draw():
    plain = raycompo.run("synthetic", "drfl", rounds=2, settings=SETTINGS, backend="inline")
    timed = raycompo.run("synthetic", "drfl", rounds=2, settings=SETTINGS, backend="inline", system="mobile-sync")
    assert timed.metrics["val_acc"].tolist() == plain.metrics["val_acc"].tolist()  # the same cohorts, the same maths
    assert timed.metrics["sim_time"].iloc[-1] > 0
    fedavg = raycompo.run("synthetic", "fedavg", rounds=2, settings=SETTINGS, backend="inline", system="mobile")
    assert fedavg.metrics["sim_time"].iloc[-1] > 0  # (an algorithm that draws through ctx.sample: accepted)
