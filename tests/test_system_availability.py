"""Availability (raycompo/system/availability.py): answers checked against brute force, in any
order of queries; the trace file's errors."""

from __future__ import annotations

import random

import pytest

from raycompo.errors import ConfigError
from raycompo.system.availability import DAY_S, Bernoulli, Diurnal, Trace, read_trace


def brute_online(intervals, t, period=None):
    starts, ends = intervals
    x = t % period if period else t
    return any(a <= x < b for a, b in zip(starts, ends))


def brute_next(intervals, t, period=None):
    """The first start >= t, or t itself, by listing every interval of the next two periods."""
    if brute_online(intervals, t, period):
        return t
    reps = range(int(t // period), int(t // period) + 2) if period else [0]
    times = [r * (period or 0) + a for r in reps for a in intervals[0]]
    later = [x for x in times if x >= t]
    return min(later) if later else None


def test_trace_binary_search_equals_brute_force_out_of_order(tmp_path):
    rng = random.Random(5)
    lines = ["client,start_s,end_s"]
    for c in range(20):
        t = 0.0
        for _ in range(rng.randint(0, 30)):
            a = t + rng.uniform(0, 100)
            b = a + rng.uniform(0.5, 50)
            lines.append(f"{c},{a},{b}")
            t = b
    lines.append("3,10,20")  # overlaps client 3's intervals: merged
    path = tmp_path / "t.csv"
    path.write_text("\n".join(lines) + "\n")
    for period in (None, 5000.0):
        iv = read_trace(str(path), 20, period)
        tr = Trace(iv, period)
        queries = [rng.uniform(0, 12000) for _ in range(3000)]  # random order: earlier times after later ones
        for t in queries:
            c = rng.randrange(20)
            got_iv = iv.get(c, ([], []))
            assert tr.online(c, t) == brute_online(got_iv, t, period), (c, t)
            expect = brute_next(got_iv, t, period) if got_iv[0] else None
            got = tr.next_online(c, t)
            assert (got is None and expect is None) or got == pytest.approx(expect), (c, t, got, expect)
        assert tr.population == sorted(iv)


def test_trace_intervals_of_a_client_are_merged(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("client,start_s,end_s\n0,30,40\n0,0,10\n0,5,20\n0,20,25\n")
    assert read_trace(str(path), 1, None) == {0: ([0.0, 30.0], [25.0, 40.0])}


@pytest.mark.parametrize("text, message", [
    ("client,start_s,end_s\n0,0,10\n7,0,10\n", "client 7 does not exist"),
    ("client,start_s,end_s\n0,10,5\n", "0 <= start_s < end_s"),
    ("client,start_s,end_s\n0,0,99999\n", "past the trace's period_s"),
    ("client,start,end\n0,0,1\n", "header must be exactly client,start_s,end_s"),
    ("client,start_s,end_s\nzero,0,1\n", "expected an integer client"),
    ("client,start_s,end_s\n0,0\n", "does not have 3 fields"),
    ("client,start_s,end_s\n", "no client is ever online"),
])
def test_trace_errors(tmp_path, text, message):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        read_trace(str(path), 5, 1000.0)


def test_diurnal_share_online_and_next_online_by_brute_force():
    d = Diurnal(online_hours=6, start_hour=22, p_day=0.5, seed=3)
    rng = random.Random(1)
    samples = [(rng.randrange(10**6), rng.uniform(0, 30 * DAY_S)) for _ in range(20000)]
    share = sum(d.online(c, t) for c, t in samples) / len(samples)
    assert abs(share - 6 / 24 * 0.5) < 0.015  # sd ~ 0.003
    step = 600.0
    for c, t in samples[:200]:
        nxt = d.next_online(c, t)
        assert nxt is not None and nxt >= t and d.online(c, nxt)
        grid = [t + k * step for k in range(int((nxt - t) // step))]
        assert not any(d.online(c, x) for x in grid[1:] if x < nxt - 1e-6)  # nothing earlier on a 10-min grid
    assert Diurnal(24, 0, 1.0, 0).online(5, 123.0)


def test_bernoulli_next_online_is_the_first_online_slot():
    b = Bernoulli(p=0.2, slot_s=60, seed=0)
    share = sum(b.online(c, 60.0 * k) for c in range(100) for k in range(100)) / 10**4
    assert abs(share - 0.2) < 0.02
    for c in range(50):
        t = 1234.5
        nxt = b.next_online(c, t)
        assert b.online(c, nxt)
        assert nxt == t or (nxt % 60 == 0 and not any(b.online(c, x) for x in [t, *range(int(t // 60 + 1) * 60, int(nxt), 60)]))
    assert Bernoulli(0.2, 60, 0).online(7, 500.0) == b.online(7, 500.0)  # keyed, not stateful
