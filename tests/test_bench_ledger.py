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


def test_timed_counting_times_the_counting_code_and_restores_it():
    from raycompo.bench.ledger import timed_counting
    from raycompo.configuration.config import RunConfig
    from raycompo.engine import host, ledger
    from raycompo.engine.federation import Federation

    before = (host.count_by_key, ledger.Ledger.record)
    fed = Federation(RunConfig(task="synthetic", algo="fedavg", rounds=3, backend="inline", vectorize="off",
                               settings={"n_clients": 20, "clients_per_round": 5}))
    with timed_counting() as timer:
        fed.run_round()
    assert timer.seconds > 0
    fed.counting = False
    with timed_counting() as off:
        fed.run_round()
    assert off.seconds < timer.seconds  # counting off: only the ledger's close of the round runs
    assert (host.count_by_key, ledger.Ledger.record) == before
