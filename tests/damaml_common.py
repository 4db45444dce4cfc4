"""Small shared pieces of the personalized-FL (damaml) tests."""

from __future__ import annotations

from raycompo.configuration.config import RunConfig

# A tiny damaml-mnist5k federation: 10 clients x 20 training / 10 validation images, a CNN4
# with 4 filters, batches of 8: a round takes a fraction of a second.
TINY = {"train_per_client": 20, "val_per_client": 10, "hidden": 4, "batch_size": 8, "tau": 2}


def tiny_config(algo: str, rounds: int = 2, backend: str = "inline", **settings) -> RunConfig:
    return RunConfig(
        task="damaml-mnist5k",
        algo=algo,
        rounds=rounds,
        settings={**TINY, **settings},
        backend=backend,
    )


def assert_rows_close(a: list[dict], b: list[dict], tol: float = 1e-6) -> None:
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        for key, va in ra.items():
            if key in ("round_time", "wall_time") or not isinstance(va, float):
                continue
            assert abs(va - rb[key]) <= tol * max(1.0, abs(va)), (key, ra["round"], va, rb[key])
