"""Small shared pieces of the tests."""

from __future__ import annotations

from raycompo.configuration.config import RunConfig

# A small dro-mnist5k federation: 4 clients (one with 60 images, three with 20) so runs take
# a fraction of a second per round.
SMALL_DRO = {"n_clients": 4, "big_client_size": 60, "small_client_size": 20, "val_per_client": 40}


def small_config(algo: str = "comfedl", rounds: int = 3, **settings) -> RunConfig:
    return RunConfig(task="dro-mnist5k", algo=algo, rounds=rounds, settings={**SMALL_DRO, **settings}, backend="inline")


def assert_rows_close(a: list[dict], b: list[dict], tol: float = 1e-6) -> None:
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        for key in ra:
            if key in ("round_time", "wall_time") or not isinstance(ra[key], float):
                continue
            assert abs(ra[key] - rb[key]) <= tol * max(1.0, abs(ra[key])), (key, ra["round"], ra[key], rb[key])


def assert_client_states_close(ref: dict, got: dict, tol: float) -> None:
    """Each client's state in `got` equals its state in `ref` to `tol`, key by key. A 1-D
    value kept longer in `got` is a batched chunk's padded row (PDSGD's dual log-weights a,
    then -inf up to the chunk's largest n_i: raycompo/algorithms/pdsgd.py): its tail must be
    -inf and its head equal."""
    import torch

    assert ref.keys() == got.keys()
    for cid, st in ref.items():
        for key, value in st.items():
            mine = got[cid][key]
            if isinstance(value, torch.Tensor) and value.dim() == 1 and mine.shape[0] > value.shape[0]:
                assert bool((mine[value.shape[0]:] == float("-inf")).all()), (cid, key)
                mine = mine[: value.shape[0]]
            torch.testing.assert_close(mine, value, rtol=tol, atol=tol)


def assert_dead(actor, timeout: float = 30.0) -> None:
    """`actor` ends within `timeout` s: `ray.kill` is asynchronous, so a call made just
    after it may still be answered for a moment."""
    import time

    import pytest
    import ray

    deadline = time.monotonic() + timeout
    with pytest.raises(ray.exceptions.RayActorError):
        while time.monotonic() < deadline:
            ray.get(actor.stats.remote(), timeout=10)
            time.sleep(0.1)


def wait_until(condition, timeout: float = 60.0, every: float = 0.2) -> bool:
    """Whether `condition()` became true within `timeout` s (polled every `every` s)."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)
    return True
