"""Placement is decided and checked before any actor starts (fake clusters: no Ray)."""

import json

import pytest

from raycompo.configuration.config import RunConfig
from raycompo.engine.placement import plan_placement
from raycompo.errors import ConfigError


def cfg(per=None, cpus=1.0, gpus=0.0):
    return RunConfig(clients_per_actor=per, cpus_per_actor=cpus, gpus_per_actor=gpus)


def node(cpu, gpu=0.0, nid=None, alive=True):
    return {"NodeID": nid or f"n{cpu}-{gpu}", "Alive": alive, "Resources": {"CPU": cpu, **({"GPU": gpu} if gpu else {})}}


def old_auto(c: RunConfig, res: dict, n: int) -> int:
    """engine/ray_pool.auto_clients_per_actor's numbers, before this module."""
    if c.gpus_per_actor > 0 and res.get("GPU", 0) > 0:
        slots = int(res["GPU"] / c.gpus_per_actor)
    else:
        slots = int(res.get("CPU", 1) / c.cpus_per_actor)
    import math

    return math.ceil(n / max(1, min(slots, n)))


def pool_blocks(n: int, per: int) -> list[list[int]]:
    """The former engine/pools.py `placement`: contiguous blocks of client ids."""
    import math

    return [list(range(j * per, min(n, (j + 1) * per))) for j in range(math.ceil(n / per))]


@pytest.mark.parametrize("cpu,cpus,n", [(2, 1.0, 10), (2, 0.5, 4), (2, 0.25, 10), (16, 1.0, 10), (2, 1.0, 1), (8, 2.0, 1000), (3, 0.4, 7)])
def test_auto_keeps_the_former_numbers_on_one_node(cpu, cpus, n):
    c = cfg(cpus=cpus)
    res = {"CPU": float(cpu)}
    p = plan_placement(c, n, res, [node(cpu)])
    assert p.auto and p.strategy == "SPREAD"
    assert p.clients_per_actor == old_auto(c, res, n)
    assert [list(b) for b in p.blocks] == pool_blocks(n, p.clients_per_actor)
    assert all(isinstance(b, range) for b in p.blocks)  # O(hosts) whatever n: no list of every client id
    assert p.actor_options(0) == {"num_cpus": cpus, "num_gpus": 0.0, "scheduling_strategy": "SPREAD"}


def test_auto_fits_node_by_node():
    # 3 CPUs in total, but two nodes of 1.5: only two 1-CPU hosts fit (the old rule said 3).
    p = plan_placement(cfg(), 6, {"CPU": 3.0}, [node(1.5, nid="a"), node(1.5, nid="b")])
    assert p.n_hosts == 2 and p.clients_per_actor == 3
    # dead nodes do not count
    p = plan_placement(cfg(), 6, None, [node(2, nid="a"), node(2, nid="b", alive=False)])
    assert p.n_hosts == 2 and p.cluster["nodes"] == 1


def test_explicit_that_fits_is_kept():
    p = plan_placement(cfg(per=2, cpus=0.5), 4, {"CPU": 2.0}, [node(1, nid="a"), node(1, nid="b")])
    assert [list(b) for b in p.blocks] == [[0, 1], [2, 3]] and not p.auto
    assert p.actor_options(1)["scheduling_strategy"] == "SPREAD"


def test_explicit_too_many_hosts_says_what_to_change():
    with pytest.raises(ConfigError) as e:
        plan_placement(cfg(per=2, cpus=1.0), 10, {"CPU": 2.0}, [node(2)])
    msg = str(e.value)
    assert "5 hosts x 1 CPU" in msg and "holds 2" in msg
    assert "--cpus-per-actor 0.4" in msg and "--clients-per-actor 5" in msg
    # the suggestions fit
    plan_placement(cfg(per=2, cpus=0.4), 10, {"CPU": 2.0}, [node(2)])
    plan_placement(cfg(per=5, cpus=1.0), 10, {"CPU": 2.0}, [node(2)])


def test_suggestion_counts_nodes_one_by_one():
    # two nodes of 1.5 CPUs, 4 hosts: 0.75 each fits (2 per node), not 3 / 4 = 0.75... nor 1.
    with pytest.raises(ConfigError, match=r"--cpus-per-actor 0\.75 or --clients-per-actor 4") as e:
        plan_placement(cfg(per=2, cpus=1.0), 8, None, [node(1.5, nid="a"), node(1.5, nid="b")])
    assert "2 nodes" in str(e.value)


def test_gpus_without_gpu_and_too_big_requests():
    with pytest.raises(ConfigError, match=r"--gpus-per-actor 2 asks for GPUs but the cluster has none.*--gpus-per-actor 0"):
        plan_placement(cfg(gpus=2), 4, {"CPU": 2.0}, [node(2)])
    with pytest.raises(ConfigError, match=r"--cpus-per-actor 8 is more than any node has \(at most 4 CPUs.*--cpus-per-actor 4 or less"):
        plan_placement(cfg(cpus=8), 4, {"CPU": 8.0}, [node(4, nid="a"), node(4, nid="b")])
    with pytest.raises(ConfigError, match=r"--gpus-per-actor 2 is more than any node has.*--gpus-per-actor 1 or less"):
        plan_placement(cfg(gpus=2), 4, None, [node(8, 1, "a"), node(8, 1, "b")])
    with pytest.raises(ConfigError, match=r"fraction below 1 or a whole number"):
        plan_placement(cfg(gpus=1.5), 4, None, [node(8, 2, "a")])


def test_fractional_gpus_pack_a_gpu_node_first():
    g1, g2 = "a1" * 28, "b2" * 28  # node ids are 28-byte hex strings
    nodes = [node(4, nid="c0" * 28), node(8, 1, g1), node(8, 2, g2)]  # CPU head, two GPU workers
    p = plan_placement(cfg(cpus=1, gpus=0.25), 20, None, nodes)
    # auto: one host per 0.25 GPU: 3 GPUs -> 12 slots, but node by node g1 holds 4, g2 holds 8
    assert p.strategy == "PACK" and p.n_hosts == 10 and p.clients_per_actor == 2
    assert p.node_ids == [g2] * 8 + [g1] * 2
    opts = p.actor_options(0)
    assert opts["num_gpus"] == 0.25 and opts["scheduling_strategy"].node_id == g2 and opts["scheduling_strategy"].soft
    with pytest.raises(ConfigError, match=r"--clients-per-actor 2"):
        plan_placement(cfg(per=1, cpus=1, gpus=0.25), 20, None, nodes)


def test_record_and_describe_are_one_json_line():
    p = plan_placement(cfg(per=3, cpus=0.5), 10, None, [node(2, nid="a"), node(2, nid="b")])
    rec = json.loads(json.dumps(p.record()))
    assert rec["hosts"] == 4 and rec["blocks"] == [[0, 2, 3], [3, 5, 3], [6, 8, 3], [9, 9, 1]]
    assert rec["strategy"] == "SPREAD" and rec["cluster"]["nodes"] == 2 and rec["cluster"]["capacity_hosts"] == 8
    line = p.describe()
    assert "\n" not in line and "4 hosts x 1-3 clients" in line and "0.5 CPU" in line and "SPREAD over 2 nodes" in line


def test_placement_group_bundles_come_after_the_extra_ones():
    pytest.importorskip("ray")
    p = plan_placement(cfg(per=2, cpus=0.5), 4, {"CPU": 2.0}, [node(2)], extra_bundles=1)

    class FakePG:  # PlacementGroupSchedulingStrategy only stores it
        pass

    s = p.actor_options(1, placement_group=FakePG())["scheduling_strategy"]
    assert s.placement_group_bundle_index == 2
