"""A user's algorithm file that reads every member's value with `ctx.map_rows` and sends
each member its own entry with `raycompo.Shares`, loaded as users load it (`--algo
path.py:Class`): the same rows as its sibling written with `map_each` and a dict of
entries, client by client and batched, inline and on Ray (docs/library.md)."""

import textwrap

import pandas as pd
import pytest

import raycompo
from raycompo.configuration.config import RunConfig, resolve

# The rule is the test's own (not a paper's): members weighted by softmax(-f_i(w)) of their
# losses at the round's model, each returning q_i w_i, the server summing them.
PLUGIN = textwrap.dedent('''
    import torch

    import raycompo


    class Weighted(raycompo.Algorithm):
        name = "loss-weighted-rows"
        Settings = raycompo.LocalSettings

        def weights(self, ctx, cohort, w):
            rows = ctx.map_rows("loss", cohort, {"w": w})
            losses = rows.stacked("loss", cohort).reshape(len(cohort)).double()
            assert sorted(rows) == sorted(set(cohort)) and rows.as_dict().keys() == set(cohort)
            return torch.softmax(-losses, 0)

        def send(self, cohort, q):
            return raycompo.Shares(cohort, q, [1] * len(cohort))

        def server_round(self, ctx, w, state):
            cohort = ctx.sample(self.s.cohort_size(ctx.n_clients))
            q = self.weights(ctx, cohort, w)
            return ctx.map("local", cohort, {"w": w, "q": self.send(cohort, q)})["w"], state

        @raycompo.client_phase("loss")
        def client_loss(self, c, state, payload):
            with torch.no_grad():
                return {"loss": self.task.loss(payload["w"], c.data.batch(c.rng(0, stream=2), self.s.batch_size))}, state

        @raycompo.batched_phase("loss")
        def batched_loss(self, cb, states, payload):
            with torch.no_grad():
                return {"loss": cb.losses(cb.broadcast(payload["w"]), cb.batch(0, self.s.batch_size, stream=2))}, states

        @raycompo.client_phase("local")
        def client_local(self, c, state, payload):
            w = raycompo.local_sgd(c, payload["w"], self.s.tau, self.s.lr, self.s.batch_size,
                                   lambda w, b, t: self.loss_grad(w, b))
            return {"w": payload["q"][c.client_id].reshape(()).to(w.dtype) * w}, state

        @raycompo.batched_phase("local")
        def batched_local(self, cb, states, payload):
            w = cb.local_sgd(cb.broadcast(payload["w"]), self.s.tau, self.s.lr, self.s.batch_size, cb.loss_gradient())
            q = self.entries(payload["q"], cb.ids).to(w.device, w.dtype)
            return {"w": q.unsqueeze(1) * w}, states

        def entries(self, q, ids):
            return q.cat(ids)


    class WeightedEach(Weighted):
        """The same rule with map_each and a dict of entries."""
        name = "loss-weighted-each"

        def weights(self, ctx, cohort, w):
            each = ctx.map_each("loss", cohort, {"w": w})
            return torch.softmax(-torch.stack([each[c]["loss"].reshape(()) for c in cohort]).double(), 0)

        def send(self, cohort, q):
            return {c: q[i:i + 1] for i, c in enumerate(cohort)}

        def entries(self, q, ids):
            return torch.cat([q[i] for i in ids])

        batched_loss = Weighted.batched_loss  # batched phases are declared, not inherited
        batched_local = Weighted.batched_local


    class Unbatched(Weighted):
        name = "loss-weighted-unbatched"


    class OwnLocal(Weighted):
        name = "loss-weighted-own-local"

        @raycompo.client_phase("local")
        def client_local(self, c, state, payload):
            return Weighted.client_local(self, c, state, payload)

        @raycompo.client_phase("loss")
        def client_loss(self, c, state, payload):
            return Weighted.client_loss(self, c, state, payload)
''')

# FedAvg that also sends up its last batch's per-sample losses (of different lengths where a
# client holds fewer samples than the batch): batched, one `Shares` per chunk.
RAGGED = textwrap.dedent('''
    import torch

    import raycompo
    from raycompo.algorithms.fedavg import FedAvg


    class FedAvgLosses(FedAvg):
        name = "fedavg-losses"

        def server_round(self, ctx, w, state):  # a Shares is read per member, not summed by ctx.map
            cohort = ctx.sample(self.s.cohort_size(ctx.n_clients))
            rows = ctx.map_rows("local", cohort, {"w": w})
            nw = rows.stacked("nw", cohort).double().sum(0) / rows.stacked("n", cohort).double().sum()
            return nw.to(w.dtype), state

        @raycompo.client_phase("local")
        def client_local(self, c, state, payload):
            out, state = FedAvg.client_local(self, c, state, payload)
            with torch.no_grad():
                batch = c.data.batch(c.rng(0, stream=2), self.s.batch_size)
                return {**out, "l": self.task.sample_losses(payload["w"], batch)}, state

        @raycompo.batched_phase("local")
        def batched_local(self, cb, states, payload):
            out, states = FedAvg.batched_local(self, cb, states, payload)
            with torch.no_grad():
                batch = cb.batch(0, self.s.batch_size, stream=2)
                losses = cb.task.batched_sample_losses(cb.broadcast(payload["w"]), batch)
            l = raycompo.Shares(cb.ids, losses[batch.mask.bool()], batch.count.long().tolist())
            return {**out, "l": l}, states
''')

SETTINGS = {"n_clients": 12, "clients_per_round": 6, "tau": 3, "batch_size": 10}


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "weighted.py"
    path.write_text(PLUGIN)
    return path


def metrics(plugin, cls, vectorize, backend="inline", **kw):
    result = raycompo.run("synthetic", f"{plugin}:{cls}", rounds=3, settings=SETTINGS, vectorize=vectorize,
                          backend=backend, **kw)
    return result.metrics[[c for c in result.metrics if "loss" in c or "acc" in c]]


@pytest.mark.parametrize("vectorize", ["off", "on"])
def test_a_plugin_files_map_rows_equals_its_map_each(plugin, vectorize):
    rows, each = metrics(plugin, "Weighted", vectorize), metrics(plugin, "WeightedEach", vectorize)
    assert len(rows) == 4 and rows.notna().all().all()
    pd.testing.assert_frame_equal(rows, each, rtol=1e-6, atol=1e-6)


def test_a_subclass_that_does_not_declare_its_batched_phases_is_told_how(plugin):
    with pytest.raises(raycompo.ConfigError, match=r"not inherited: where Unbatched's phases local, loss compute "
                       r"what Weighted's do, .*`batched_local = Weighted.batched_local`"):
        metrics(plugin, "Unbatched", "on")
    with pytest.raises(raycompo.ConfigError) as own:  # a client phase of its own: nothing to copy
        metrics(plugin, "OwnLocal", "on")
    assert "has no batched training phases (vectorized:" in str(own.value) and "Weighted" not in str(own.value)
    # auto: trained client by client (its evaluation still batched), the rows of "off"
    pd.testing.assert_frame_equal(metrics(plugin, "Unbatched", "auto"), metrics(plugin, "Weighted", "off"),
                                  rtol=1e-6, atol=1e-6)


def test_a_plugin_files_batched_rows_equal_per_client_and_ray(plugin, ray_session):
    off, on = metrics(plugin, "Weighted", "off"), metrics(plugin, "Weighted", "on")
    pd.testing.assert_frame_equal(on, off, rtol=1e-5, atol=1e-6)
    remote = metrics(plugin, "Weighted", "on", backend="ray", clients_per_actor=6, cpus_per_actor=0.5)
    pd.testing.assert_frame_equal(remote, on, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("aggregation", [{}, {"aggregation": "buffered", "system": "uniform", "buffer": 3,
                                              "concurrency": 6}, {"aggregation": "async", "system": "uniform"}])
def test_a_shares_contribution_is_counted_alike_under_every_aggregation(tmp_path, aggregation):
    """A batched phase's `Shares` beside the model (per-sample losses, fewer than the batch
    for small clients), synchronous, FedBuff and FedAsync: the same rows and the same values
    sent up as client by client, where each member's losses count their own length. The
    values up of round 1 (synchronous): each member's model and n plus min(batch, n_i) losses."""
    path = tmp_path / "ragged.py"
    path.write_text(RAGGED)
    kw = dict(rounds=2, settings={"n_clients": 10, "clients_per_round": 10, "batch_size": 64}, **aggregation)
    on, off = (raycompo.run("synthetic", f"{path}:FedAvgLosses", vectorize=v, **kw).metrics for v in ("on", "off"))
    # the losses (near-uniform predictions at these rounds: an accuracy may flip on float rounding)
    cols = [c for c in on if "loss" in c]
    pd.testing.assert_frame_equal(on[cols], off[cols], rtol=1e-5, atol=1e-6)
    assert on["values_up"].equals(off["values_up"]) and on["bytes_up"].equals(off["bytes_up"])
    if not aggregation:  # every client each round: values up of round 1, from the clients' sizes
        cfg = RunConfig(task="synthetic", algo="fedavg", settings=kw["settings"])
        task = resolve(cfg).make_task()
        sizes = [c.num_samples for c in task.clients(list(range(10)))]
        assert min(sizes) < 64  # some losses are fewer than the batch
        assert on["values_up"][1] == sum(task.model.dim + 1 + min(64, n) for n in sizes)
