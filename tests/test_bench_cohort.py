"""`python -m raycompo.bench cohort`: its floor times the round's own products at the
workload's shapes, its FLOP floor counts what the round computes, and a tiny run prints one
row per (workload, algorithm, m) with every column measured."""

from __future__ import annotations

from raycompo.bench import cohort
from raycompo.configuration.config import resolve


def test_round_flops_counts_every_clients_batches():
    cfg = cohort.config("synthetic", "fedavg", 6, "inline", "off")
    r = resolve(cfg)
    sizes = [c.num_samples for c in r.make_task().clients(list(range(6)))]
    b, tau, d, classes = 10, 20, 60, 10  # the synthetic workload: batch 10, tau 20, 60 features, 10 classes
    assert (r.algo_settings.batch_size, r.algo_settings.tau) == (b, tau)
    assert cohort.round_flops(cfg) == tau * sum(min(b, n) for n in sizes) * 2 * (2 * d * classes)


def test_floor_shapes_are_the_rounds_padded_products():
    """The floor multiplies what the batched step multiplies: tau steps of m clients' (C, d)
    models by batches padded to the largest client's min(b, n_i) rows."""
    cfg = cohort.config("synthetic", "fedavg", 6, "inline", "off")
    r = resolve(cfg)
    sizes = [c.num_samples for c in r.make_task().clients(list(range(6)))]
    assert cohort.round_shapes(cfg) == (20, 6, 10, 60, max(min(10, n) for n in sizes))
    big = cohort.config("logistic-784", "comfedl", 4, "inline", "off")
    tau, m, classes, d, b = cohort.round_shapes(big)
    assert (tau, m, classes, d) == (5, 4, 10, 784) and 1 <= b <= 32
    assert resolve(big).algo_settings.gamma == 10.0  # finite rounds (gamma 1 overflows exp(f / gamma))


def test_a_tiny_run_prints_a_measured_row(capsys):
    assert cohort.main(["--m", "3", "--rounds", "1", "--no-ray", "--workloads", "synthetic", "--algos", "comfedl",
                        "--threads", "1"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("synthetic"))
    cells = row.split()
    assert cells[:3] == ["synthetic", "comfedl", "3"]
    floor, flop_floor, hand, hand_batched, inline, vec = (float(c) for c in cells[3:9])
    assert 0 < floor < min(hand, inline, vec)  # the products alone are below every engine's round
    assert 0 < flop_floor < min(hand, inline, vec)
    assert cells[6] == "nan"  # the hand-written batched round is FedAvg's only
    assert cells[9:11] == ["nan", "nan"]  # --no-ray
    ratio = float(cells[11].rstrip("x"))  # vec/floor, of the unrounded times (cells: 2 decimals of a ms)
    assert (vec - 0.005) / (floor + 0.005) - 0.05 <= ratio <= (vec + 0.005) / (floor - 0.005) + 0.05
    assert "GFLOP/s" in out and "load average" in out
