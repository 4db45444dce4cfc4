"""Cohort draws (issue 18, part 5): today's randperm draws up to RANDPERM_MAX_CLIENTS
clients, an O(m) draw above it, the same on both backends (the draw is the driver's)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
import torch

from raycompo.configuration.config import RunConfig
from raycompo.engine import run
from raycompo.engine.federation import RANDPERM_MAX_CLIENTS, Federation, RoundCtx, draw_cohort
from raycompo.seeding import SERVER, generator
from tests.helpers import assert_rows_close


def gen(*key):
    return generator(0, SERVER, *key)


def test_draws_up_to_the_threshold_are_todays_randperm_draws():
    for n, m in [(10, 3), (1000, 100), (RANDPERM_MAX_CLIENTS, 100), (10**6, 600_000)]:  # the last: m > n / 2
        for r in range(3):
            assert draw_cohort(n, m, gen(r)) == sorted(torch.randperm(n, generator=gen(r))[:m].tolist())
    fed = Federation(RunConfig(task="synthetic", algo="fedavg", backend="inline", settings={"n_clients": 300}), start=False)
    for r in range(3):
        assert RoundCtx(fed, r).sample(20, stream=1) == sorted(torch.randperm(300, generator=gen(r, 1))[:20].tolist())
    assert RoundCtx(fed, 0).sample(300) == list(range(300))


def test_draws_above_the_threshold_are_distinct_in_range_seeded_and_fast(monkeypatch):
    n, m = 10**7, 100
    a = draw_cohort(n, m, gen(0))
    assert len(a) == m == len(set(a)) and a == sorted(a) and 0 <= a[0] and a[-1] < n
    assert draw_cohort(n, m, gen(0)) == a  # seeded
    assert draw_cohort(n, m, gen(1)) != a
    assert draw_cohort(n, m, gen(0)) != sorted(torch.randperm(n, generator=gen(0))[:m].tolist())
    # O(m): no randperm(10^7) (~0.3 s a draw); random integers for the m ids and the
    # repeats only, never more than m at once
    sizes: list[int] = []
    randint = torch.randint
    monkeypatch.setattr(torch, "randperm", lambda *a, **k: pytest.fail("randperm above the threshold"))
    monkeypatch.setattr(torch, "randint", lambda high, size, **k: sizes.append(size[0]) or randint(high, size, **k))
    for r in range(20):
        assert len(draw_cohort(n, m, gen(r))) == m
    assert max(sizes) == m and sum(sizes) < 20 * 2 * m
    monkeypatch.undo()
    # m close to n / 2 (many repeats to discard) and m = n / 2
    for n, m in [(RANDPERM_MAX_CLIENTS + 1, RANDPERM_MAX_CLIENTS // 2), (200_000, 100_000)]:
        d = draw_cohort(n, m, gen(3))
        assert len(set(d)) == m and d[0] >= 0 and d[-1] < n


def test_o_m_draw_is_roughly_uniform():
    # a small n forced onto the O(m) path: every id reachable, frequencies near m / n
    n, m, draws = 20, 6, 5000
    counts: Counter[int] = Counter()
    pairs: Counter[tuple[int, int]] = Counter()
    for r in range(draws):
        d = draw_cohort(n, m, gen(r), randperm_max=0)
        assert len(d) == m == len(set(d)) and all(0 <= i < n for i in d)
        counts.update(d)
        pairs.update((d[i], d[j]) for i in range(m) for j in range(i + 1, m))
    expected = draws * m / n  # 1500; sd ~ 35
    assert set(counts) == set(range(n))
    assert all(abs(c - expected) < 0.1 * expected for c in counts.values()), counts
    exp_pair = draws * m * (m - 1) / (n * (n - 1))  # 395; sd ~ 19
    assert len(pairs) == n * (n - 1) // 2
    assert all(abs(c - exp_pair) < 0.3 * exp_pair for c in pairs.values())


@pytest.mark.slow
def test_ray_equals_inline_above_the_threshold(ray_session):
    n = 4 * RANDPERM_MAX_CLIENTS
    cfg = RunConfig(task="synthetic", algo="fedavg", rounds=2, backend="inline", eval_every=1, eval_clients=5,
                    settings={"n_clients": n, "clients_per_round": 5, "tau": 2, "max_samples": 60})
    inline = run(cfg)
    remote = run(dataclasses.replace(cfg, backend="ray", clients_per_actor=n // 2, cpus_per_actor=0.5))
    assert inline.status == remote.status == "completed"
    assert_rows_close(inline.rows, remote.rows, tol=1e-6)
    assert inline.rows[-1]["train_loss"] != inline.rows[0]["train_loss"]
