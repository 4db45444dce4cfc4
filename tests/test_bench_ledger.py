"""`python -m raycompo.bench ledger` runs and prints its figures (never asserted: timings)."""

from __future__ import annotations

from raycompo.bench.ledger import main


def test_ledger_bench_prints_both_sides(capsys):
    results = main(["--n", "1000", "--m", "10", "--pairs", "2", "--algos", "fedavg", "--vectorize", "off"])
    out = capsys.readouterr().out
    assert len(results) == 1 and "largest overhead" in out and "target <= 3%" in out
    r = results[0]
    assert len(r.times["with"]) == len(r.times["without"]) == 2  # side by side, two rounds each
    assert r.with_s > 0 and r.without_s > 0
