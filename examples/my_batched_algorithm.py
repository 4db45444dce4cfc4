"""Your algorithm with a batched form: FedProx whose local steps run for a whole chunk of
clients at once (`raycompo.batched_phase`, `raycompo.CohortBatch`; docs/running.md,
"Vectorized cohorts").

    python examples/my_batched_algorithm.py        # per client vs batched: the same rows
    python -m raycompo.run --algo examples/my_batched_algorithm.py:BatchedFedProx --vectorize on

FedProx (Li et al. 2020): w <- w - lr * (grad f_i(w; B) + mu (w - w_s)). The batched phase
computes, client by client, what the per-client phase computes: the k clients' models are
the rows of w, and `cb.loss_grad` gives each row's gradient on that client's own seeded batch.
"""

import argparse
from dataclasses import dataclass

import raycompo


@dataclass
class Settings(raycompo.LocalSettings):
    mu: float = 0.1
    """Proximal weight mu (0: FedAvg)."""


class BatchedFedProx(raycompo.Algorithm):
    name = "batched-fedprox"
    Settings = Settings

    def server_round(self, ctx, w, state):
        sums = ctx.map("local", ctx.sample(self.s.cohort_size(ctx.n_clients)), {"w": w})
        return sums["w"] / sums["count"], state

    @raycompo.client_phase("local")  # one client: w is (dim,)
    def local(self, c, state, payload):
        w0 = payload["w"]
        w = raycompo.local_sgd(c, w0, self.s.tau, self.s.lr, self.s.batch_size,
                               lambda w, batch, t: self.loss_grad(w, batch) + self.s.mu * (w - w0))
        return {"w": w, "count": 1.0}, state

    @raycompo.batched_phase("local")  # k clients: w is (k, dim), contributions stacked or listed
    def local_batched(self, cb: raycompo.CohortBatch, states, payload):
        w0 = payload["w"]
        w = cb.local_sgd(cb.broadcast(w0), self.s.tau, self.s.lr, self.s.batch_size,
                         lambda w, batch, t: cb.loss_grad(w, batch)[0] + self.s.mu * (w - w0))
        return {"w": w, "count": [1.0] * cb.k}, states


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()  # --help
    settings = {"clients_per_round": 20, "n_clients": 50}  # the task's own lr (0.01), tau (20), batch (10)
    rows = {v: raycompo.run("synthetic", BatchedFedProx, rounds=5, settings=settings, vectorize=v).metrics
            for v in ("off", "on")}
    cols = [c for c in rows["off"] if "loss" in c or "acc" in c]
    print(rows["on"][["round", *cols]].to_string(index=False))
    print(f"largest difference, batched vs per client: {(rows['on'][cols] - rows['off'][cols]).abs().max().max():.2e}")
