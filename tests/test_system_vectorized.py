"""The simulated system's fast paths give the numbers of its plain ones (issue 32: the system
under 1 ms per cohort of 100 at 10^7 clients): candidates drawn a batch at a time in numpy,
devices drawn at once, the deadline policy's choice on arrays. Each is compared with the
one-at-a-time path it replaces, bit for bit."""

from __future__ import annotations

import math
import random

import numpy as np

from raycompo.system import PROFILES, System, candidates
from raycompo.system.availability import DAY_S, Bernoulli, Diurnal
from raycompo.system.deadline import choose, choose_many
from raycompo.system.devices import KEEP_ACROSS_MAX, KEEP_MAX, DeviceModel
from raycompo.system.draws import CANDIDATE, below, prefix, units_of
from raycompo.system.draws import indices as _indices


def test_candidates_drawn_in_numpy_are_those_drawn_one_at_a_time(monkeypatch):
    avail = Diurnal(6, 0, 0.9, 5)
    pre = prefix(5, CANDIDATE)
    rng = random.Random(1)
    cases = [(10**7, 130, 100), (10**6, 40, 30), (10**5, 13, 10)]  # n >= BIG * cap: the numpy path
    fast = {}
    for n, k, m in cases:
        for r in range(15):
            t = rng.uniform(0, 30 * DAY_S)
            fast[n, r] = (candidates.draw_candidates(avail, pre, n, k, m, t, (r, 0, 0), "p"), t)
    monkeypatch.setattr(candidates, "BIG", 10**12)  # every population takes the one-at-a-time loop
    for (n, r), (got, t) in fast.items():
        k, m = next((k, m) for nn, k, m in cases if nn == n)
        assert candidates.draw_candidates(avail, pre, n, k, m, t, (r, 0, 0), "p") == got


def test_a_repeat_within_and_across_batches_is_skipped_as_one_at_a_time(monkeypatch):
    # a population just at BIG * cap: repeats are frequent enough to occur within a batch and
    # across batches (few online: several batches)
    avail = Diurnal(1, 0, 0.5, 2)  # about 2 % online: several batches
    pre = prefix(2, CANDIDATE)
    k = 4
    n = candidates.BIG * (20 * k + 100)
    fast = [candidates.draw_candidates(avail, pre, n, k, k, 3600.0 * h, (h, 1, 0), "p") for h in range(24)]
    assert any(len(d.drawn) > 8 * k + 32 for d in fast)  # a second batch was needed
    monkeypatch.setattr(candidates, "BIG", 10**12)
    slow = [candidates.draw_candidates(avail, pre, n, k, k, 3600.0 * h, (h, 1, 0), "p") for h in range(24)]
    assert fast == slow
    for d in fast:
        assert len(set(d.drawn)) == len(d.drawn)


def test_a_repeat_at_the_kth_online_draw_is_skipped_as_one_at_a_time():
    # the numpy loop on a population small enough that a repeat often falls on the k-th
    # online draw itself, where the batch is cut (its repeat check reads the draws up to it),
    # against the one-at-a-time loop: the same clients looked at and the same online ones
    pre = prefix(4, CANDIDATE)
    seen_repeat = 0
    for b in (Bernoulli(0.9, 60, 4), Bernoulli(1.0, 60, 4), Bernoulli(0.3, 60, 4)):
        for k in (2, 5, 12):
            for r in range(200):
                key, size, cap = (r, 0, 0), 40 + 10 * k, 20 * k + 100
                drawn, online, _ = candidates._draw_large(b, pre, size, k, 60.0 * r, key, cap)
                slow = candidates._draw_small(b, None, pre, size, k, 60.0 * r, key, cap)
                assert (drawn, online) == slow[:2]
                ids = draws_indices(pre, size, len(drawn) + 5, key)
                seen_repeat += len(set(ids[: len(drawn) + 1])) < len(drawn) + 1
    assert seen_repeat > 100  # repeats within the draws looked at were common


def draws_indices(pre: int, size: int, count: int, key: tuple[int, int, int]) -> list[int]:
    """The first `count` keyed candidate draws of `key` (repeats included)."""
    return _indices(pre, size, 0, count, *key).tolist()


def test_devices_drawn_at_once_are_those_drawn_one_by_one():
    spec = PROFILES["mobile"].devices
    ids = list(range(3, 10**7, 99991))
    at_once = DeviceModel(spec, 4, 10**7, 1000)
    arr = at_once.rate_arrays(ids)
    one_by_one = DeviceModel(spec, 4, 10**7, 1000)
    expected = np.array([one_by_one.rates(c) for c in ids]).T
    assert arr.shape == (4, len(ids)) and np.array_equal(arr, expected)
    # some known, some new, in any order: the same rows
    mixed = ids[::3] + list(range(5, 10**7, 1234567))
    assert np.array_equal(at_once.rate_arrays(mixed), np.array([one_by_one.rates(c) for c in mixed]).T)
    # past KEEP_MAX clients the rates of earlier rounds are let go at a round's start, and come back equal
    many = list(range(0, 10**7, 10**7 // (KEEP_MAX + 10)))
    at_once.rate_arrays(many)
    at_once.begin_round()
    assert len(at_once._rates) == 0
    assert np.array_equal(at_once.rate_arrays(ids), expected)
    # a population over KEEP_ACROSS_MAX keeps the round's rates only; a smaller one keeps them
    at_once.begin_round()
    assert len(at_once._rates) == 0
    small = DeviceModel(spec, 4, KEEP_ACROSS_MAX, 1000)
    small.rate_arrays(list(range(0, KEEP_ACROSS_MAX, 97)))
    small.begin_round()
    assert len(small._rates) == len(range(0, KEEP_ACROSS_MAX, 97))


def test_the_choice_on_arrays_is_the_sorted_choice():
    rng = random.Random(7)
    for _ in range(300):
        k = rng.randint(1, 30)
        ids = rng.sample(range(10**6), k)
        times = [rng.choice([1.0, 2.0, 2.5, math.inf, rng.uniform(0, 5)]) for _ in ids]  # ties and infs
        m = rng.randint(1, k + 1)
        deadline = rng.choice([None, 2.0, 4.0])
        # the definition: by time, ties by id; abandoned when fewer than m, or the m-th is inf or late
        order = sorted(zip(times, ids))
        ok = len(order) >= m and not math.isinf(order[m - 1][0]) and (deadline is None or order[m - 1][0] <= deadline)
        c = choose(dict(zip(ids, times)), m, deadline)
        if ok:
            assert c.kept == sorted(i for _, i in order[:m]) and c.dropped == sorted(i for _, i in order[m:])
            assert c.close_s == order[m - 1][0]
        else:
            assert c.kept == [] and c.dropped == sorted(ids)
            assert c.close_s == (deadline if deadline is not None else math.inf)
        kept, dropped, close = choose_many(np.array(ids), np.array(times), m, deadline)
        assert np.array(ids)[kept].tolist() == c.kept and np.array(ids)[dropped].tolist() == c.dropped


def test_a_system_round_is_the_same_with_the_fast_paths_off(monkeypatch):
    """A few mobile rounds at 10^7 clients, then the same with every fast path off (candidates
    one at a time, devices one by one): the same cohorts, clock and counters."""

    def rounds():
        s = System(PROFILES["mobile"], 3, 10**7, 1000, 4000)
        out = []
        for r in range(1, 6):
            s.begin_round(r)
            out.append((s.select(50, 0, lambda m: list(range(m))), s.clock.now, s.columns()))
            s.end_round()
        return out, {k: s.counters[k] for k in ("drawn", "dropped", "wasted_s")}

    fast = rounds()
    monkeypatch.setattr(candidates, "BIG", 10**12)
    monkeypatch.setattr("raycompo.system.devices.MANY_MIN", 10**9)
    assert rounds() == fast


def test_below_is_the_unit_comparison():
    """`draws.below(p)`: comparing the folded states with it is `unit < p`, written here from
    `unit`'s definition, for any p (at the bound and next to it too)."""
    rng = random.Random(11)
    probs = [0.0, -1.0, math.nan, -math.inf, 1e-300, 2.0**-54, 0.001, 0.3, 0.5, 0.5 + 2.0**-53, 0.9, 1 - 2.0**-53, 1.0,
             1.5, 1e300, math.inf]
    for p in probs + [rng.random() for _ in range(300)]:
        bound = below(p)
        states = [rng.getrandbits(64) for _ in range(64)]
        if bound is not None:
            b = int(bound)
            states += [x for d in (-4096, -2049, -2048, -1, 0, 1, 2047, 2048) if 0 <= (x := b + d) < 2**64]
        h = np.array(states, dtype=np.uint64)
        got = np.ones(len(h), dtype=bool) if bound is None else h < bound
        assert got.tolist() == [((x >> 11) + 0.5) / 2.0**53 < p for x in states], p
        assert got.tolist() == (units_of(h) < p).tolist()


def test_diurnal_batches_answer_as_one_at_a_time_at_a_window_edge():
    """Clients asked exactly when their window opens or closes (where `online`'s rounding to
    the microsecond decides): the batch answers are the one-at-a-time ones."""
    rng = random.Random(5)
    for d in (Diurnal(6, 0, 1.0, 1), Diurnal(5, 21.5, 0.7, 2), Diurnal(24, 0, 0.5, 3)):
        cs = [rng.randrange(10**7) for _ in range(40)]
        t0 = rng.uniform(0, 20 * DAY_S)
        for c in cs[:8]:
            for t in (d.next_online(c, t0), d.online_until(c, d.next_online(c, t0))):
                if t is None or math.isinf(t):
                    continue
                for s in (t, t - 4e-7, t + 4e-7, math.nextafter(t, 0), math.nextafter(t, math.inf)):
                    assert d.online_array(np.array(cs), s).tolist() == [d.online(x, s) for x in cs]
                    on = [x for x in cs if d.online(x, s)]
                    assert d.online_until_many(on, s) == [d.online_until(x, s) for x in on]
