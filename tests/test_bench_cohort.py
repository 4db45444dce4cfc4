"""`python -m raycompo.bench cohort`: its FLOP floor counts what the round computes, and a
tiny run prints one row per (workload, algorithm, m) with every column measured."""

from __future__ import annotations

from raycompo.bench import cohort
from raycompo.config import resolve


def test_round_flops_counts_every_clients_batches():
    cfg = cohort.config("synthetic", "fedavg", 6, "inline", "off")
    r = resolve(cfg)
    sizes = [c.num_samples for c in r.make_task().clients(list(range(6)))]
    b, tau, d, classes = 10, 20, 60, 10  # the synthetic workload: batch 10, tau 20, 60 features, 10 classes
    assert (r.algo_settings.batch_size, r.algo_settings.tau) == (b, tau)
    assert cohort.round_flops(cfg) == tau * sum(min(b, n) for n in sizes) * 2 * (2 * d * classes)


def test_a_tiny_run_prints_a_measured_row(capsys):
    assert cohort.main(["--m", "3", "--rounds", "1", "--no-ray", "--workloads", "synthetic", "--algos", "comfedl",
                        "--threads", "1"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("synthetic"))
    cells = row.split()
    assert cells[:3] == ["synthetic", "comfedl", "3"]
    floor, hand, inline, vec = (float(c) for c in cells[3:7])
    assert 0 < floor < min(hand, inline, vec)  # the floor is below every measured engine
    assert cells[7:9] == ["nan", "nan"]  # --no-ray
    assert "GFLOP/s" in out and "load average" in out
