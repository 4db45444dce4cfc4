"""q-FedAvg's F_k(w) on each client's whole data, read in groups of similar sizes where the
chunk padded to its largest client does not fit (algorithms/size_groups.py,
`CohortBatch.whole_losses`; issue 41): the same rows and the same counted reads and oracle
calls as client by client, and no tensor operation per client."""

from __future__ import annotations

import numpy as np
import pytest

import raycompo
import raycompo.algorithms.cohort as cohort
from raycompo.algorithms.size_groups import size_groups

SYN = {"n_clients": 40, "min_samples": 2, "max_samples": 300, "clients_per_round": 30, "tau": 2, "q": 1.0}


@pytest.mark.parametrize("bound", [10_000, 1_000_000, 1])
def test_every_row_in_one_group_within_the_bound_and_padding_at_most_double(bound):
    sizes = np.random.default_rng(0).integers(1, 2000, size=500)
    groups = size_groups(sizes, row_bytes=8, bound=bound)
    rows = np.concatenate(groups)
    assert sorted(rows.tolist()) == list(range(len(sizes)))  # each row exactly once
    for g in groups:
        n = sizes[g]
        assert len(g) == 1 or len(g) * n.max() * 8 <= bound
        assert n.max() <= 2 * n.min() or n.min() == 1 and n.max() <= 2  # one power-of-2 bucket
    buckets = len(set(np.ceil(np.log2(sizes)).tolist()))
    if bound == 1_000_000:  # few groups: about one per bucket, whatever the number of rows
        assert len(groups) <= 2 * buckets


def test_grouped_whole_read_equals_per_client(monkeypatch, tmp_path):
    kw = dict(rounds=3, seed=0, eval_every=1, settings=SYN)
    alone = raycompo.run("synthetic", "qfedavg", vectorize="off", out=tmp_path / "off", **kw)
    whole = raycompo.run("synthetic", "qfedavg", vectorize="on", out=tmp_path / "whole", **kw)
    calls = []
    real = cohort.size_groups
    monkeypatch.setattr(cohort, "GATHER_BYTES", 20_000)  # the padded chunk no longer fits: groups
    monkeypatch.setattr("raycompo.engine.batched.gather_bytes", lambda *a: 20_000)
    monkeypatch.setattr(cohort, "size_groups", lambda *a: calls.append(1) or real(*a))
    grouped = raycompo.run("synthetic", "qfedavg", vectorize="on", out=tmp_path / "groups", **kw)
    assert calls  # the grouped read ran
    for run in (whole, grouped):
        cols = [c for c in alone.metrics.columns if "time" not in c]
        np.testing.assert_allclose(run.metrics[cols].to_numpy(float), alone.metrics[cols].to_numpy(float),
                                   rtol=1e-5, atol=1e-6)
        assert run.costs.equals(alone.costs)  # samples read and oracle calls, row by row
