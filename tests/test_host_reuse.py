"""Host actors reused from one run to the next (engine/host_actors.py, issue 10 item 4):
a reset host gives the numbers of a fresh one, and the cache keeps, resets or replaces
its hosts as the shape of the runs asks."""

from __future__ import annotations

import dataclasses
import time

import pytest

from raycompo.engine import run
from raycompo.engine.host_actors import ReusedHosts
from tests.helpers import assert_dead, assert_rows_close, small_config

pytestmark = pytest.mark.slow  # every test here: see docs/development.md


def ray_config(algo: str, per_actor: int = 2, seed: int = 0, **settings):
    cfg = small_config(algo, rounds=2, **settings)
    return dataclasses.replace(cfg, backend="ray", clients_per_actor=per_actor, cpus_per_actor=0.25, seed=seed)


def test_reused_hosts_give_the_numbers_of_fresh_hosts(ray_session):
    """Three runs on one cached set of hosts: a stateful algorithm (ditto keeps a personal
    model per client) on fresh hosts; another algorithm, seed and settings that diverges
    (NaN client states must not leak); then the first config again on the reset hosts."""
    first = ray_config("ditto", seed=0)
    second = ray_config("comfedl", seed=1, lr=1e6, gamma=1.0)
    cache = ReusedHosts()
    try:
        fresh = run(first, driver="local", hosts=cache)  # the cache starts its hosts
        diverged = run(second, driver="local", hosts=cache)
        again = run(first, driver="local", hosts=cache)
        kept = cache.idle
        assert (cache.starts, cache.resets) == (1, 2)  # one set of hosts served every run
        assert len(kept) == 2
    finally:
        cache.close()
    assert fresh.status == again.status == "completed" and diverged.status == "diverged"
    assert_rows_close(again.rows, fresh.rows, tol=1e-6)  # reused == fresh
    assert fresh.rows[-1]["val_acc"] != fresh.rows[0]["val_acc"]  # it trained
    inline = run(dataclasses.replace(second, backend="inline"))
    assert inline.status == "diverged"
    assert_rows_close(diverged.rows, inline.rows, tol=1e-6)  # inline == ray still, on reset hosts
    assert_dead(kept[0])  # closing the cache killed its hosts


def test_other_shape_replaces_the_hosts_and_failed_runs_do_not_keep_them(ray_session):
    cache = ReusedHosts()
    try:
        run(ray_config("fedavg", per_actor=2), driver="local", hosts=cache)
        two = [a._actor_id.hex() for a in cache.idle]
        run(ray_config("fedavg", per_actor=4), driver="local", hosts=cache)  # one host now
        one = [a._actor_id.hex() for a in cache.idle]
        assert len(two) == 2 and len(one) == 1 and not set(one) & set(two)
        assert cache.starts == 2 and cache.resets == 0
        # a bad setting that only the hosts see (a partition larger than the data): the
        # error arrives as itself and the hosts are not kept
        with pytest.raises(ValueError, match="lower the client sizes"):
            run(ray_config("fedavg", per_actor=4, big_client_size=4990), driver="local", hosts=cache)
        assert cache.idle == []
    finally:
        cache.close()


def test_hosts_need_a_local_driver(ray_session):
    with pytest.raises(ValueError, match="driver='local'"):
        run(ray_config("fedavg"), hosts=ReusedHosts())


def host_actors(ray) -> dict[str, str]:
    """Every host actor of the cluster's actor table (alive or dead): id -> state."""
    from ray._private.state import actors  # Ray's debug view; works without the dashboard

    return {a["ActorID"]: a["State"] for a in actors().values() if a["Name"].startswith("clients-")}


def test_ray_sweep_reuses_the_hosts_of_a_trial_actor(tmp_path, ray_session):
    """A real Tune sweep with --backend ray, one trial at a time: the second trial runs on
    the first trial's hosts (one set of 2 started, not two sets; `python -m
    raycompo.bench sweep` shows the --no-reuse-hosts count), and every trial's rows are
    the inline backend's for its config."""
    import json
    import textwrap

    import pandas as pd

    from raycompo.configuration.config import RunConfig
    from raycompo.tune.cli import main

    space = tmp_path / "space.yaml"
    space.write_text(textwrap.dedent("""
        task: dro-mnist5k
        rounds: 2
        settings: {n_clients: 4, big_client_size: 60, small_client_size: 20, val_per_client: 40}
        algorithms:
          comfedl: {lr: [1000000.0, 0.01], gamma: [1], tau: [5]}
    """))
    before = set(host_actors(ray_session))
    out = tmp_path / "sweep"
    argv = ["--space", str(space), "--search", "grid", "--out", str(out), "--quiet", "--backend", "ray",
            "--hosts-per-trial", "2", "--max-concurrent", "1"]
    assert main(argv) == 0
    started = {k: v for k, v in host_actors(ray_session).items() if k not in before}
    assert len(started) == 2
    trials = pd.read_csv(out / "trials.csv").set_index("lr")
    assert trials.loc[1e6, "status"] == "diverged" and trials.loc[0.01, "status"] == "completed"
    metrics = pd.read_parquet(out / "metrics.parquet")
    for _, trial in trials.iterrows():
        cfg = RunConfig(task="dro-mnist5k", algo="comfedl", rounds=2, settings=json.loads(trial["settings"]))
        inline = run(cfg)
        mine = metrics[metrics["trial_id"] == trial["trial_id"]].sort_values("round")
        assert list(mine["round"]) == [r["round"] for r in inline.rows]
        for row, (_, got) in zip(inline.rows, mine.iterrows()):
            if row.get("diverged"):  # Tune gets the worst value of the metric instead
                continue
            for key in ("train_loss", "val_acc", "val_acc_worst"):
                assert got[key] == pytest.approx(row[key], rel=1e-6, abs=1e-6), (key, row["round"])
    # the hosts end with their trial actor, at the sweep's end (bounded wait)
    deadline = time.monotonic() + 60
    while any(host_actors(ray_session).get(k) == "ALIVE" for k in started) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert [k for k in started if host_actors(ray_session).get(k) == "ALIVE"] == []
