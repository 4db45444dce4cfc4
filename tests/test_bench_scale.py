"""Smoke test of the scale benchmark (issue 12): a tiny inline run yields sane numbers."""

from __future__ import annotations

from raycompo.bench.scale import HEADER, bench_one, fmt, main


def test_bench_one_inline_small():
    r = bench_one("inline", "ditto", n=1000, m=10, rounds=2, eval_clients=5, settings={"max_samples": 100, "tau": 2})
    assert len(r.round_times) == 2 and r.sec_per_round > 0 and r.startup_s > 0
    assert r.peak_rss_bytes > 0
    assert r.state_memory_bytes > 0  # ditto keeps a personal model per sampled client
    assert len(fmt(r).split()) == 11  # one value per column


def test_main_prints_a_row(capsys):
    results = main(["--n", "1000", "--m", "10", "--rounds", "2", "--backends", "inline", "--algos", "fedavg",
                    "--eval-clients", "5", "--set", "max_samples=100", "tau=2"])
    assert len(results) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == HEADER and len(out) == 3 and "command start" in out[2]


def test_peak_rss_catches_a_short_peak(monkeypatch):
    """The kernel's peak RSS (VmHWM) is read, not sampled RSS: a 300 MB buffer held for far
    less than the sampling interval still counts, and the next block starts afresh. Only
    this process is read: the test session's Ray processes start and end workers meanwhile."""
    import psutil
    import torch

    from raycompo.bench.scale import PeakRSS

    monkeypatch.setattr(PeakRSS, "_tree", staticmethod(lambda: [psutil.Process()]))

    with PeakRSS(interval=10.0) as base:
        pass
    with PeakRSS(interval=10.0) as mem:
        x = torch.ones(300 * 2**20 // 8, dtype=torch.float64)  # touched: resident
        del x
    assert mem.exact and mem.reset_ok
    assert mem.peak - base.peak > 250 * 2**20
    with PeakRSS(interval=10.0) as after:
        pass
    assert after.peak - base.peak < 100 * 2**20  # restarted at the block's start
