"""The uplink as an ordered list of steps (issue 40; raycompo/compression/uplink.py): the
order `Uplink.steps` says is the order applied (compress, then clip), and a user's step
(`--uplink SPEC`) acts on every exchange of synchronous, deadline and asynchronous runs,
per client and batched alike; an unknown spec is refused before round 0."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

import raycompo
from raycompo.compression.keys import VALUE
from raycompo.compression.methods import parse_method
from raycompo.compression.uplink import Clip, Compress, Kept, Uplink, UplinkStep, Upload
from raycompo.configuration.config import RunConfig, resolve
from raycompo.engine.federation import Federation
from raycompo.errors import ConfigError
from raycompo.run import build_parser, config_from_args, main
from tests.helpers import assert_rows_close

SETTINGS = {"n_clients": 8, "clients_per_round": 4, "tau": 2, "min_samples": 60, "max_samples": 60, "batch_size": 16}
AGGREGATIONS = {
    "sync": {},
    "deadline": {"system": "mobile"},
    "buffered": {"system": "uniform", "aggregation": "buffered", "concurrency": 4, "buffer": 2},
    "async": {"system": "uniform", "aggregation": "async", "concurrency": 4},  # FedAsync: z + alpha s(tau) (y - z)
}
PER_MEMBER = 611
"""Values one FedAvg member sends up on `synthetic`: nw, (60 + 1) x 10 entries, and n."""
HALF = "tests.test_uplink_steps:Half"
COUNT = "tests.test_uplink_steps:Count"


class Half(UplinkStep):
    """Every update and value sent up, halved."""

    name = "half"

    def apply(self, up: Upload) -> dict[str, torch.Tensor]:
        return {key: 0.5 * rows for key, rows in up.moved.items()}


class Reset(UplinkStep):
    """What travels unchanged; each member's uplink state replaced by a new list of dicts."""

    name = "reset"

    def apply(self, up: Upload) -> dict[str, torch.Tensor]:
        up.kept = [{"seen": torch.ones(1)} for _ in up.members]  # type: ignore[assignment]
        return up.moved


class Count(UplinkStep):
    """What travels unchanged; each member counts its uploads in its uplink state."""

    name = "count"

    def apply(self, up: Upload) -> dict[str, torch.Tensor]:
        for kept in up.kept:
            kept["count"] = kept.get("count", torch.zeros(1)) + 1
        return up.moved


def config(aggregation: str = "sync", **kw) -> RunConfig:
    return RunConfig(task="synthetic", algo="fedavg", rounds=3, backend="inline", eval_every=3,
                     settings=dict(SETTINGS), **AGGREGATIONS[aggregation], **kw)


def first_step(cfg: RunConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(the model before, after the first server step)."""
    fed = Federation(cfg)
    try:
        w0 = fed.w.clone()
        fed.run_round()
        return w0, fed.w.clone()
    finally:
        fed.close()


def test_steps_are_the_list_applied_compress_then_clip():
    declared = {"p": {"g": VALUE}}
    uplink = Uplink({"g": parse_method("qsgd:2", "g")}, 1.0, declared, seed=0, extra=[Half()])
    assert [type(s) for s in uplink.steps] == [Compress, Clip, Half]
    assert [s.name for s in uplink.steps] == ["compress", "clip", "half"]
    assert [s.name for s in Uplink({}, 1.0, declared, seed=0).steps] == ["clip"]
    # clipped after compression: what the server sums is bounded by C although a QSGD draw
    # with 2 levels is longer than its input; halved after both
    x = torch.randn(1, 400, generator=torch.Generator().manual_seed(0)) * 10
    out, _, encoded = Uplink({"g": parse_method("qsgd:2", "g")}, 1.0, declared, seed=0).apply(
        "p", 0, [(0, 0)], {"g": x[0]}, {}, [{}], batched=False)
    assert abs(float(out["g"].norm()) - 1.0) < 1e-5 and encoded["g"] == [(32 + 400 * 3 + 7) // 8]
    halved, _, _ = uplink.apply("p", 0, [(0, 0)], {"g": x[0]}, {}, [{}], batched=False)
    assert torch.allclose(halved["g"], 0.5 * out["g"])


def test_the_hosts_run_the_steps_of_the_options_then_the_users():
    fed = Federation(config(compress={"nw": "topk:0.1"}, dp_clip=1.0, dp_noise=1.0, uplink=[HALF]))
    try:
        assert [s.name for s in fed.pool.host.uplink.steps] == ["compress", "clip", "half"]
    finally:
        fed.close()
    only = Federation(config(uplink=[HALF]))
    try:
        assert only.pool.host.uplink is not None and [s.name for s in only.pool.host.uplink.steps] == ["half"]
        assert only.transforms is None  # nothing for the driver to do
    finally:
        only.close()


@pytest.mark.parametrize("aggregation", list(AGGREGATIONS))
def test_a_users_step_halves_the_first_server_step(aggregation):
    """FedAvg's and FedBuff's first step is linear in the members' updates: with every
    update halved on its way up, the model moves half as far."""
    w0, plain = first_step(config(aggregation))
    w0_half, half = first_step(config(aggregation, uplink=[HALF]))
    assert torch.equal(w0, w0_half) and not torch.allclose(plain, half)
    assert torch.allclose(half - w0, 0.5 * (plain - w0), atol=1e-6)


@pytest.mark.parametrize("aggregation", list(AGGREGATIONS))
def test_a_users_step_sees_every_upload(aggregation):
    fed = Federation(config(aggregation, uplink=[COUNT]))
    try:
        rows = [fed.run_round() for _ in range(3)]
        counts = {c: float(s["_uplink"]["count"]) for c, s in fed.pool.client_states().items() if "_uplink" in s}
    finally:
        fed.close()
    uploads = rows[-1]["values_up"] / PER_MEMBER  # the uploads the server received
    assert len(counts) >= 3 and all(n >= 1 for n in counts.values())
    if aggregation in ("buffered", "async"):  # and the C = 4 in flight, computed when dispatched
        assert uploads <= sum(counts.values()) <= uploads + 4
    else:
        assert sum(counts.values()) == uploads == 12


def test_batched_equals_per_client_with_a_users_step():
    def rows(vectorize: str) -> list[dict]:
        fed = Federation(config(vectorize=vectorize, compress={"*": "topk:0.2"}, dp_clip=5.0, dp_noise=0.5,
                                uplink=[HALF]))
        try:
            return [fed.run_round() for _ in range(3)]
        finally:
            fed.close()

    per_client, batched = rows("off"), rows("on")
    assert_rows_close(per_client, batched, tol=1e-5)
    assert [r["bytes_up"] for r in per_client] == [r["bytes_up"] for r in batched]


def test_kept_rows_and_member_dicts_are_one_uplink_state():
    """`Upload.kept` held as stacked rows (a batched chunk's residuals) reads and writes as
    the k members' dicts do: zeros for a member without an entry, and a step that indexes
    a member (a user's) sees the rows and keeps its writes."""
    like = torch.zeros(3, 2)
    dicts = Kept(3, members=[{"e": torch.ones(2)}, {}, {"e": torch.full((2,), 2.0)}])
    assert torch.equal(dicts.rows("e", like), torch.tensor([[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]]))
    assert dicts.rows("f", like) is None and dicts.stacked() is None
    rows = Kept(3, rows={"e": torch.arange(6.0).view(3, 2)})
    assert torch.equal(rows.rows("e", like), torch.arange(6.0).view(3, 2)) and rows.rows("f", like) is None
    rows.set_rows("f", torch.ones(3, 2))
    assert list(rows.stacked() or {}) == ["e", "f"]
    rows[1]["count"] = torch.ones(1)  # a member's dict: every member's made once, from the rows
    assert rows.stacked() is None and torch.equal(rows[2]["e"], torch.tensor([4.0, 5.0])) and "count" in rows[1]
    rows.set_rows("e", torch.zeros(3, 2))
    assert all(torch.equal(m["e"], torch.zeros(2)) for m in rows) and "count" not in rows[0]


def test_batched_equals_per_client_with_a_step_that_keeps_state():
    """A user's step that writes each member's uplink state (`Count`) next to top-k's stacked
    residuals: the same counts and residuals per client, vectorized or not."""
    def states(vectorize: str) -> dict:
        fed = Federation(config(vectorize=vectorize, compress={"*": "topk:0.2"}, uplink=[COUNT]))
        try:
            fed.run_rounds(3)
            return fed.pool.client_states()
        finally:
            fed.close()

    per_client, batched = states("off"), states("on")
    assert per_client.keys() == batched.keys()
    for cid, st in per_client.items():
        assert list(st["_uplink"]) == list(batched[cid]["_uplink"]) == ["local:nw", "count"]
        assert torch.equal(st["_uplink"]["count"], batched[cid]["_uplink"]["count"])
        torch.testing.assert_close(batched[cid]["_uplink"]["local:nw"], st["_uplink"]["local:nw"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("vectorize", ["off", "on"])
def test_a_step_may_set_the_uplink_state_to_a_list_of_dicts(vectorize):
    """A user's step that sets `up.kept` to a new list of the members' dicts (as before it was
    a `Kept`): kept in each client's state, per client and vectorized alike."""
    fed = Federation(config(vectorize=vectorize, uplink=["tests.test_uplink_steps:Reset"]))
    try:
        fed.run_rounds(2)
        states = fed.pool.client_states()
    finally:
        fed.close()
    assert states and all(list(s["_uplink"]) == ["seen"] for s in states.values())


def test_a_step_from_a_file_is_recorded_and_the_cli_takes_it(tmp_path):
    step = tmp_path / "my_steps.py"
    step.write_text("from raycompo.compression.uplink import UplinkStep\n\n\n"
                    "class Zero(UplinkStep):\n"
                    "    def apply(self, up):\n"
                    "        return {key: 0 * rows for key, rows in up.moved.items()}\n")
    res = raycompo.run("synthetic", "fedavg", rounds=2, settings=SETTINGS, uplink=[f"{step}:Zero"], out=tmp_path / "run")
    assert json.loads((tmp_path / "run" / "config.json").read_text())["uplink"] == [f"{step}:Zero"]
    assert res.metrics["train_loss"].nunique() == 1  # every update zero: the model never moves
    args = build_parser().parse_args(["--uplink", f"{step}:Zero", "--uplink", HALF])
    assert config_from_args(args).uplink == [f"{step}:Zero", HALF]


@pytest.mark.parametrize("spec, message", [
    ("tests.test_uplink_steps:Nope", r"tests\.test_uplink_steps has no 'Nope'; its uplink classes: Count, Half"),
    ("no_such_module:Step", r"uplink spec 'no_such_module:Step': cannot import module 'no_such_module'"),
    ("tests.test_uplink_steps:config", r"not a subclass of raycompo's UplinkStep"),
    ("half", r"unknown uplink 'half'; name your own class as 'path/to/file.py:ClassName'"),
    ("missing.py:Step", r"no such file 'missing.py'"),
])
def test_an_unknown_spec_is_refused_before_round_0(tmp_path, spec, message):
    with pytest.raises(ConfigError, match=message):
        resolve(config(uplink=[spec]))
    with pytest.raises(ConfigError, match=message):
        raycompo.run("synthetic", "fedavg", rounds=1, settings=SETTINGS, uplink=[spec], out=tmp_path / "run")
    assert not (tmp_path / "run" / "metrics.csv").exists()


def test_a_step_given_as_a_class_is_recorded_by_its_spec():
    assert dataclasses.replace(config(), uplink=[Half]).uplink == [HALF]


def test_a_resumed_run_keeps_its_steps(tmp_path, capsys):
    whole = raycompo.run("synthetic", "fedavg", rounds=3, settings=SETTINGS, uplink=[COUNT], compress={"nw": "topk:0.1"})
    raycompo.run("synthetic", "fedavg", rounds=2, settings=SETTINGS, uplink=[COUNT], compress={"nw": "topk:0.1"},
                 out=tmp_path / "run")
    resumed = raycompo.resume(tmp_path / "run", rounds=3)
    assert_rows_close(whole.metrics.to_dict("records"), resumed.metrics.to_dict("records"), tol=1e-6)
    assert main(["--resume", str(tmp_path / "run"), "--rounds", "4", "--uplink", HALF]) == 2
    assert "cannot change --uplink ['tests.test_uplink_steps:Half']" in capsys.readouterr().err


@pytest.mark.slow
def test_a_users_step_from_a_file_acts_on_ray_hosts_as_inline(tmp_path, ray_session):
    """A step given by file is shipped to the Ray host actors (the plugin mechanism), and the
    rows there equal the inline rows (1e-6), synchronous and buffered."""
    step = tmp_path / "third.py"
    step.write_text("from raycompo.compression.uplink import UplinkStep\n\n\n"
                    "class Third(UplinkStep):\n"
                    "    def apply(self, up):\n"
                    "        return {key: rows / 3 for key, rows in up.moved.items()}\n")
    from raycompo.engine import run

    for aggregation in ("sync", "buffered"):
        cfg = config(aggregation, uplink=[f"{step}:Third"])
        inline = run(cfg)
        remote = run(dataclasses.replace(cfg, backend="ray", clients_per_actor=4, cpus_per_actor=0.5))
        assert_rows_close(remote.rows, inline.rows, tol=1e-6)
    w0, plain = first_step(config("sync"))
    _, third = first_step(config("sync", uplink=[f"{step}:Third"]))
    assert torch.allclose(third - w0, (plain - w0) / 3, atol=1e-6)
