"""A user's own algorithm, in a file of its own, is counted without a line of counting
code (issue 32): its oracle calls where it evaluates the task, its samples where it draws
them, and, when it trains on `c.data.x` directly (no draw the ledger can see), a warning at
run time that says why its samples are 0."""

from __future__ import annotations

import textwrap

import pytest

from raycompo.configuration.config import RunConfig
from raycompo.engine.federation import Federation
from raycompo.engine.uncounted import message
from tests.helpers import SMALL_DRO

SIZES = {0: 60, 1: 20, 2: 20, 3: 20}
"""Training samples per client of SMALL_DRO."""
STEPS, B = 3, 8

PLUGIN = textwrap.dedent('''
    from raycompo.algorithms.base import Algorithm, LocalSettings, client_phase, grad_of


    class FullGD(Algorithm):
        """Gradient steps on the client's whole data, read from c.data.x directly."""

        name = "full-gd"
        Settings = LocalSettings

        def server_round(self, ctx, w, state):
            sums = ctx.map("local", list(range(ctx.n_clients)), {"w": w})
            return sums["w"] / sums["count"], state

        @client_phase("local")
        def client_local(self, c, state, payload):
            w = payload["w"]
            for _ in range(self.s.tau):
                w = w - self.s.lr * grad_of(self.task.loss, w, (c.data.x, c.data.y))
            return {"w": w, "count": 1.0}, state


    class MiniGD(FullGD):
        """The same on mini-batches drawn with c.data.batch, and one function value."""

        name = "mini-gd"

        @client_phase("local")
        def client_local(self, c, state, payload):
            w = payload["w"]
            for t in range(self.s.tau):
                w = w - self.s.lr * grad_of(self.task.loss, w, c.data.batch(c.rng(t), self.s.batch_size))
            value = self.task.loss(w.detach(), c.data.batch(c.rng(t), self.s.batch_size))  # the last batch again
            return {"w": w, "count": 1.0, "f": float(value)}, state
''')


@pytest.fixture
def plugin(tmp_path):
    path = tmp_path / "user" / "my_algos.py"
    path.parent.mkdir()
    path.write_text(PLUGIN)
    return path


def run(spec: str) -> list:
    cfg = RunConfig(task="dro-mnist5k", algo=spec, rounds=2, backend="inline",
                    settings={**SMALL_DRO, "lr": 0.01, "tau": STEPS, "batch_size": B})
    fed = Federation(cfg)
    seen: list = []
    fed.exchange_listeners.append(seen.append)
    try:
        fed.run_rounds(2)
    finally:
        fed.close()
    return seen


def test_direct_reads_count_oracle_calls_and_warn_why_samples_are_0(plugin):
    with pytest.warns(RuntimeWarning) as caught:
        seen = run(f"{plugin}:FullGD")
    # a gradient on all n_i points per step: forward and backward, 2 n_i calls
    for x in seen:
        assert x.oracle_calls == [STEPS * 2 * SIZES[c] for c in x.clients]
        assert x.samples == [0] * len(x.clients)
    texts = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert texts.count(message("full-gd", "local")) == 1  # once, not once per client or round


def test_draws_count_samples_and_a_repeated_draw_once(plugin, recwarn):
    seen = run(f"{plugin}:MiniGD")
    b = {c: min(B, n) for c, n in SIZES.items()}
    for x in seen:
        # tau gradients (2 b each) and one function value on the last batch (b)
        assert x.oracle_calls == [STEPS * 2 * b[c] + b[c] for c in x.clients]
        assert x.samples == [STEPS * b[c] for c in x.clients]  # the last batch drawn again: the same points
    assert not [w for w in recwarn if "drew none" in str(w.message)]
