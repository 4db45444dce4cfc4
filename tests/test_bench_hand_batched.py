"""The hand-written batched FedAvg round of `python -m raycompo.bench cohort` ('hand
batched'): the same seeded draws and maths as raycompo's vectorized round, so it ends at
the same model; it refuses what it does not compute."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from raycompo.bench import cohort, hand_batched
from raycompo.bench.hand_batched import (
    HandBatchedFedAvg,
    hand_batched_seconds_per_round,
    relative_difference,
)
from raycompo.engine.federation import Federation
from raycompo.errors import ConfigError


def small(algo: str = "fedavg", vectorize: str = "on", sampler: str = "randperm"):
    """logistic-784 at m = 6 clients (50-1000 samples each: all hold a batch of 32)."""
    return cohort.config("logistic-784", algo, 6, "inline", vectorize, sampler=sampler)


@pytest.mark.parametrize("sampler", ["randperm", "keyed"])
def test_it_ends_at_the_models_of_both_raycompo_paths(sampler):
    """Three rounds from w_0: the per-client round and the vectorized one each agree with the
    hand-written round to float32 rounding (the draws are the same, with either sampler;
    different draws would differ by far more, checked with another seed)."""
    hand = HandBatchedFedAvg(small(sampler=sampler))
    vec, per_client = Federation(small(sampler=sampler)), Federation(small(vectorize="off", sampler=sampler))
    for _ in range(3):
        hand.round_()
        vec.run_rounds(1)
        per_client.run_rounds(1)
        assert relative_difference(hand.w, vec.w) < 1e-5
        assert relative_difference(hand.w, per_client.w) < 1e-5
    other = HandBatchedFedAvg(dataclasses.replace(small(sampler=sampler), seed=small().seed + 1))
    for _ in range(3):
        other.round_()
    assert relative_difference(other.w, vec.w) > 1e-3


def test_relative_difference_is_the_norm_ratio():
    a, b = torch.tensor([3.0, 4.0]), torch.tensor([0.0, 5.0])
    assert relative_difference(a, b) == pytest.approx(((9 + 1) ** 0.5) / 5)


def test_it_refuses_what_it_does_not_compute():
    with pytest.raises(ConfigError, match="algo must be 'fedavg', got 'comfedl'"):
        HandBatchedFedAvg(small("comfedl"))
    tiny = cohort.config("logistic-784", "fedavg", 6, "inline", "on")
    tiny = dataclasses.replace(tiny, settings={**tiny.settings, "batch_size": 5000})
    with pytest.raises(ConfigError, match="batch_size = 5000"):
        HandBatchedFedAvg(tiny)


def test_seconds_per_round_are_measured(monkeypatch):
    """The clocks read around the timed rounds only (not the warm-up), divided by their
    number: with clocks that a round moves by 0.5 s wall and 0.25 s CPU, exactly those."""
    clock = {"wall": 100.0, "cpu": 7.0}
    calls = []

    def round_(self):
        calls.append(self)
        clock["wall"] += 0.5
        clock["cpu"] += 0.25

    monkeypatch.setattr(hand_batched, "time", SimpleNamespace(perf_counter=lambda: clock["wall"],
                                                              process_time=lambda: clock["cpu"]))
    monkeypatch.setattr(HandBatchedFedAvg, "round_", round_)
    t = hand_batched_seconds_per_round(small(), rounds=3, warmup=2)
    assert (t.wall, t.cpu) == (0.5, 0.25) and len(calls) == 5
