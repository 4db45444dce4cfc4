"""The cost ledger (engine/ledger.py): every exchange of a server round reaches
`Federation.exchange_listeners` as a `costs.ExchangeCost` whose per-client samples, values
and bytes equal the papers' counts, computed here from the settings and the model size."""

from __future__ import annotations

import io

import pytest
import torch

from raycompo.configuration.config import RunConfig
from raycompo.costs.exchange import BREAKDOWN_KEY
from raycompo.engine.federation import Federation
from raycompo.engine.ledger import COLUMNS, Ledger, count_values
from tests.helpers import SMALL_DRO, small_config

SIZES = {0: 60, 1: 20, 2: 20, 3: 20}
"""Training samples of SMALL_DRO's clients: the big client, then the small ones."""


def listen(fed: Federation) -> list:
    seen: list = []
    fed.exchange_listeners.append(seen.append)
    return seen


def test_count_values_reads_tensors_at_their_dtype_and_numbers_as_8_bytes():
    payload = {"w": torch.zeros(3, 4), "j": 2, "lr": 0.5, "nested": {"a": torch.zeros(5, dtype=torch.float64),
                                                                    "b": [torch.zeros(2, dtype=torch.int64), 1.0]},
               "name": "x", "none": None}
    # 12 float32 + 2 numbers + 5 float64 + 2 int64 + 1 number; strings and None are not values
    assert count_values(payload) == (12 + 2 + 5 + 2 + 1, 12 * 4 + 2 * 8 + 5 * 8 + 2 * 8 + 8)


def test_fedavg_listener_sees_each_client_of_each_round():
    tau, b = 3, 32
    fed = Federation(small_config("fedavg", tau=tau, batch_size=b, lr=0.1))
    d = fed.w.numel()
    seen = listen(fed)
    rows = fed.run_rounds(2)
    assert [(e.round, e.phase, e.index) for e in seen] == [(1, "local", 0), (2, "local", 0)]
    for e in seen:
        assert e.clients == [0, 1, 2, 3] and e.multiplicity == [1, 1, 1, 1]
        assert e.samples == [tau * min(b, SIZES[c]) for c in e.clients]  # tau mini-batches of min(b, n_i)
        assert e.values_down == [d] * 4 and e.bytes_down == [4 * d] * 4  # the float32 model
        assert e.values_up == [d + 1] * 4 and e.bytes_up == [4 * d + 8] * 4  # n_i w_i, and n_i as a number
        assert e.by_key == {"down:w": {"values": 4 * d, "bytes": 16 * d}, "up:nw": {"values": 4 * d, "bytes": 16 * d},
                            "up:n": {"values": 4, "bytes": 32}}
    # FedAvg: 2 m d values a round (plus the m weights n_i), cumulative
    m = 4
    assert rows[-1]["values_down"] == 2 * m * d and rows[-1]["values_up"] == 2 * m * (d + 1)
    assert rows[-1]["exchanges"] == 2 and rows[-1]["samples"] == 2 * tau * sum(min(b, n) for n in SIZES.values())


def test_evaluation_is_not_an_exchange():
    fed = Federation(small_config("fedavg-co", lr=0.1))  # its global_metrics makes a ctx.map
    seen = listen(fed)
    row = fed.initial_row()
    assert seen == [] and all(row[c] == 0 for c in COLUMNS)


def test_counting_off_changes_no_metric():
    on = Federation(small_config("fedavg", lr=0.1))
    off = Federation(small_config("fedavg", lr=0.1))
    off.counting = False
    a, b = on.run_rounds(2), off.run_rounds(2)
    for ra, rb in zip(a, b):
        for k, v in ra.items():
            if k not in COLUMNS and k not in ("round_time", "wall_time", BREAKDOWN_KEY):
                assert v == rb[k], k
    assert b[-1]["exchanges"] == 0 and a[-1]["exchanges"] == 2


def test_ledger_state_round_trips():
    fed = Federation(small_config("fedavg", lr=0.1))
    fed.run_rounds(2)
    again = Ledger()
    again.load(fed.ledger.state(), 2)
    # FedAvg: 3 breakdown rows a round (down:w, up:n, up:nw), counted, not kept
    assert again.totals == fed.ledger.totals and again.closed_rows == fed.ledger.closed_rows == 2 * 3


def _ledger_bytes(fed: Federation) -> int:
    buf = io.BytesIO()
    torch.save(fed.checkpoint()["ledger"], buf)
    return buf.tell()


def test_the_checkpoints_ledger_part_does_not_grow_with_the_rounds():
    fed = Federation(small_config("fedavg", rounds=40, lr=0.1))
    try:
        fed.run_rounds(4)
        early = _ledger_bytes(fed)
        fed.run_rounds(36)
        late = _ledger_bytes(fed)
    finally:
        fed.close()
    # 36 more rounds are 108 more rows of costs.csv; the ledger's part keeps its cumulative
    # counts (and the number of rows written), whose pickled ints may only widen
    assert late <= early + 8 * (len(COLUMNS) + 1), (early, late)


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
def test_ray_gives_the_inline_costs():
    settings = {**SMALL_DRO, "lr": 0.1, "sync_every": 2}
    inline = Federation(RunConfig(task="dro-mnist5k", algo="feddro", rounds=2, settings=settings, backend="inline"))
    on_ray = Federation(RunConfig(task="dro-mnist5k", algo="feddro", rounds=2, settings=settings, backend="ray",
                                  clients_per_actor=2))
    try:
        seen_inline, seen_ray = listen(inline), listen(on_ray)
        rows_inline, rows_ray = inline.run_rounds(2), on_ray.run_rounds(2)
        assert seen_inline == seen_ray and len(seen_ray) > 2
        assert [{c: r[c] for c in COLUMNS} for r in rows_inline] == [{c: r[c] for c in COLUMNS} for r in rows_ray]
    finally:
        on_ray.close()
        inline.close()


def _costs(rows):
    return [{c: r[c] for c in ("round", *COLUMNS)} for r in rows]


def test_a_resumed_run_continues_the_same_counts(tmp_path):
    from raycompo.engine import run

    cfg = small_config("fedavg", rounds=5, lr=0.1)
    whole = run(cfg, out=str(tmp_path / "whole"))
    run(small_config("fedavg", rounds=3, lr=0.1), out=str(tmp_path / "cut"), checkpoint_every=2)
    resumed = run(cfg, out=str(tmp_path / "cut"), resume=True)
    assert _costs(resumed.rows) == _costs(whole.rows)
    assert resumed.cost_rows == whole.cost_rows  # the rows of rounds 1-3 read back from costs.csv
    assert (tmp_path / "cut" / "costs.csv").read_bytes() == (tmp_path / "whole" / "costs.csv").read_bytes()
    import pandas as pd

    for name in ("metrics.csv", "costs.csv"):
        a, b = pd.read_csv(tmp_path / "whole" / name), pd.read_csv(tmp_path / "cut" / name)
        cols = [c for c in a.columns if c in (*COLUMNS, "round", "direction", "key", "values", "bytes")]
        pd.testing.assert_frame_equal(a[cols], b[cols])


def _cut_short(path):
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))


def _garble(path):
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines[:2], "1,up,n,x,40\n", *lines[3:]]))


@pytest.mark.parametrize("damage,says", [
    (_cut_short, r"costs.csv holds 5 rows of rounds up to 2, where its checkpoint \(round 2\) counted 6"),
    (lambda path: path.unlink(), r"costs.csv is missing, where its checkpoint \(round 2\) counted 6"),
    (_garble, r"costs.csv: line 3 is not a row of round, direction, key, values, bytes"),
], ids=["cut", "missing", "garbled"])
def test_a_resume_refuses_a_damaged_costs_file(tmp_path, damage, says):
    from raycompo.engine import run
    from raycompo.errors import ConfigError

    run(small_config("fedavg", rounds=2, lr=0.1), out=str(tmp_path))  # FedAvg: 3 rows a round
    damage(tmp_path / "costs.csv")
    metrics = (tmp_path / "metrics.csv").read_bytes()
    with pytest.raises(ConfigError, match=says):
        run(small_config("fedavg", rounds=4, lr=0.1), out=str(tmp_path), resume=True)
    assert (tmp_path / "metrics.csv").read_bytes() == metrics  # refused before anything was written


def test_a_checkpoint_that_holds_the_rows_resumes_with_them(tmp_path):
    """A checkpoint written before costs.csv was appended per round kept the rows in the
    ledger's state (and its run, interrupted, wrote no costs.csv): the resume takes them."""
    from raycompo.engine import checkpoint, run
    from raycompo.runfolder.costs_file import read_costs

    whole = run(small_config("fedavg", rounds=4, lr=0.1), out=str(tmp_path / "whole"))
    run(small_config("fedavg", rounds=2, lr=0.1), out=str(tmp_path / "cut"))
    path = tmp_path / "cut" / checkpoint.FILE
    ckpt = checkpoint.load(path)
    rows = [list(r.values()) for r in read_costs(tmp_path / "cut")]
    ckpt["ledger"] = {"totals": ckpt["ledger"]["totals"], "rows": rows}
    checkpoint.save(path, ckpt)
    (tmp_path / "cut" / "costs.csv").unlink()
    resumed = run(small_config("fedavg", rounds=4, lr=0.1), out=str(tmp_path / "cut"), resume=True)
    assert len(rows) == 6 and resumed.cost_rows == whole.cost_rows
    assert (tmp_path / "cut" / "costs.csv").read_bytes() == (tmp_path / "whole" / "costs.csv").read_bytes()


@pytest.mark.slow
def test_a_recovered_ray_run_keeps_the_counts(ray_session):
    import dataclasses

    from raycompo.engine import run
    from raycompo.engine.faults import KillActor

    cfg = small_config("fedavg", rounds=5, lr=0.1)
    inline = run(cfg)
    lines: list[str] = []
    faulted = run(dataclasses.replace(cfg, backend="ray", clients_per_actor=2, cpus_per_actor=0.5), checkpoint_every=2,
                  namespace="ledger-fault", log=lines.append, observers=[KillActor("clients-1", after=3)])
    assert faulted.status == "completed" and len(lines) == 1  # one recovery, from round 2's checkpoint
    assert _costs(faulted.rows) == _costs(inline.rows)
    assert faulted.cost_rows == inline.cost_rows


def test_client_data_counts_the_samples_it_hands_out():
    from raycompo import ClientData

    x, y = torch.arange(20.0).view(10, 2), torch.arange(10)
    data = ClientData(0, x, y, x[:2], y[:2])
    gen = torch.Generator().manual_seed(0)
    assert data.samples_read == 0
    bx, by = data.batch(gen, 4)
    assert len(by) == 4 and data.samples_read == 4
    data.outer_batch(gen, 32)  # more than n_i: all 10
    assert data.samples_read == 14
    fx, fy = data.full()
    assert fx is x and fy is y and data.samples_read == 24
    import dataclasses

    counter = next(f for f in dataclasses.fields(ClientData) if f.name == "samples_read")
    assert not counter.compare and "samples_read" not in repr(data)  # not part of the data's identity
