"""Issue 19 item 10: a population that cannot fit in memory is refused before anything
starts (exit 2, the numbers, no run folder); the README's population-scale runs fit."""

from __future__ import annotations

import pytest

from raycompo.configuration.config import RunConfig, resolve
from raycompo.engine import memory
from raycompo.errors import ConfigError
from raycompo.run import main

README = ["--backend", "inline", "--task", "synthetic", "--algo", "ditto", "--rounds", "20", "--eval-clients", "100",
          "--eval-every", "10", "--state-memory", "0.5"]


def synthetic(n: int, backend: str = "inline", **kw) -> object:
    cfg = RunConfig(task="synthetic", algo="ditto", rounds=20, backend=backend, eval_clients=100, eval_every=10,
                    state_memory_gb=0.5, settings={"n_clients": n, "clients_per_round": 100}, **kw)
    return resolve(cfg)


def test_a_population_too_large_is_refused_with_the_numbers_and_no_folder(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["--backend", "inline", "--quiet", "--task", "synthetic", "--algo", "fedavg", "--rounds", "1",
               "--set", "n_clients=1000000000", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert "does not fit in memory" in err and "1,000,000,000 clients" in err and "available on this machine" in err
    assert "state index" in err  # the parts, with their sizes
    assert not out.exists()  # nothing started, nothing written


@pytest.mark.parametrize("n", [10**6, 10**7])
def test_the_readme_population_runs_pass_the_estimate(n):
    """README "Population scale": 10^6 (and the same at 10^7) need well under a small
    machine's memory; on Ray with 2 hosts too."""
    assert memory.estimate(synthetic(n), ray=False).total < 4e9
    assert memory.estimate(synthetic(n, "ray", clients_per_actor=n // 2), ray=True).total < 8e9
    memory.check(synthetic(n), ray=False, available=4e9)


def test_estimate_scales_with_n_and_refuses_against_a_cluster():
    small, big = (memory.estimate(synthetic(n), ray=False) for n in (10**6, 10**8))
    assert big.parts["state index"] == 100 * small.parts["state index"]
    assert "client ids" not in big.parts  # no list of the population's ids is built any more
    assert big.parts["client states"] == small.parts["client states"]  # touched clients, not n
    with pytest.raises(ConfigError, match=r"(?s)need about .* GB .*1\.00 GB in the Ray cluster"):
        memory.check(synthetic(10**8, "ray", clients_per_actor=10**7), ray=True, available=1e9,
                     where="in the Ray cluster (its memory resource)")
