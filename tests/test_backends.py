"""The Ray backend (one host or several) gives the inline backend's numbers on the same
seed: every draw is seeded by (seed, client, round, step), never by placement."""

import dataclasses

import pytest

from raycompo.engine import run
from tests.helpers import assert_dead, assert_rows_close, small_config

CASES = [
    # (algorithm, settings, clients per actor): one host, then several.
    ("comfedl", {"gamma": 1.0, "clients_per_round": 3}, 4),
    ("comfedl", {"gamma": 1.0, "clients_per_round": 3}, 1),
    ("drfl", {}, 2),
    ("qfedavg", {}, 3),
]


@pytest.mark.parametrize("algo,settings,per_actor", CASES)
def test_ray_equals_inline(ray_session, algo, settings, per_actor):
    cfg = small_config(algo, rounds=3, **settings)
    inline = run(cfg)
    ray_cfg = dataclasses.replace(cfg, backend="ray", clients_per_actor=per_actor, cpus_per_actor=0.5)
    remote = run(ray_cfg)
    assert inline.status == remote.status == "completed"
    assert_rows_close(inline.rows, remote.rows, tol=1e-6)
    assert inline.rows[-1]["val_acc"] != inline.rows[0]["val_acc"]  # it trained


def test_host_actors_are_named_and_end_with_the_run(ray_session):
    ray = ray_session
    cfg = dataclasses.replace(small_config("fedavg", rounds=1), backend="ray", clients_per_actor=2, cpus_per_actor=0.5)
    found = []

    def look(row):
        if row["round"] == 0:
            found.extend(ray.get_actor(n, namespace="named-test") for n in ("driver", "clients-0", "clients-1"))

    run(cfg, progress=look, namespace="named-test")
    assert len(found) == 3  # 4 clients, 2 per actor: driver + 2 hosts, findable by name
    for name in ("driver", "clients-0", "clients-1"):
        with pytest.raises(ValueError):
            ray.get_actor(name, namespace="named-test")  # gone with the run


def test_seed_changes_the_run_and_repeats_it():
    a = run(small_config("comfedl", gamma=1.0))
    b = run(small_config("comfedl", gamma=1.0))
    c = run(dataclasses.replace(small_config("comfedl", gamma=1.0), seed=1))
    assert_rows_close(a.rows, b.rows, tol=0)
    assert a.rows[-1]["train_loss"] != c.rows[-1]["train_loss"]


def test_error_inside_host_actors_reaches_the_caller_and_actors_end(ray_session):
    """A user error raised while the hosts build their clients (here: a partition larger
    than the data) arrives as itself through the driver actor, not as a Ray wrapper,
    and no actor of the run survives it."""
    ray = ray_session
    cfg = dataclasses.replace(
        small_config("fedavg", rounds=1, big_client_size=4990), backend="ray", clients_per_actor=2, cpus_per_actor=0.5
    )
    with pytest.raises(ValueError, match="lower the client sizes"):
        run(cfg, namespace="failing-hosts")
    for name in ("driver", "clients-0", "clients-1"):
        with pytest.raises(ValueError, match="Failed to look up actor"):
            ray.get_actor(name, namespace="failing-hosts")


@pytest.mark.slow
def test_hosts_start_beside_the_driver_and_end_with_it_even_if_it_died(ray_session):
    """start_driver creates the host actors in this process while the driver actor starts
    (engine/driver.py, host_actors.PrestartedHosts): the driver runs on exactly those hosts,
    and closing the driver kills them, also after the driver itself died (they are this
    process's actors, so they do not fate-share with it)."""
    import ray

    from raycompo.configuration.backends import get_backend
    from raycompo.configuration.config import resolve
    from raycompo.engine.driver import start_driver

    cfg = dataclasses.replace(small_config("fedavg", rounds=1), backend="ray", clients_per_actor=2, cpus_per_actor=0.5)
    fed = start_driver(resolve(cfg), get_backend("ray"), "actor", "prestart-test")
    hosts = list(fed._hosts)
    assert len(hosts) == 2
    assert [ray.get_actor(f"clients-{j}", namespace="prestart-test") for j in range(2)] == hosts
    assert fed.run_rounds(1)[0]["round"] == 1
    ray.kill(fed._actor)  # the driver dies; its hosts live on until closed
    assert ray.get([h.stats.remote() for h in hosts], timeout=30)
    fed.close()
    for h in hosts:
        assert_dead(h)
