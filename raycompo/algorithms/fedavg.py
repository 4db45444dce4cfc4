"""FedAvg (McMahan et al. 2017): tau local SGD steps on the mean loss, then the server
averages the cohort's models weighted by their sample counts n_i (as the ComFedL paper
describes it: weights proportional to the number of samples of each client)."""

from __future__ import annotations

from raycompo.algorithms.base import Algorithm, LocalSettings, local_sgd


class FedAvg(Algorithm):
    name = "fedavg"
    Settings = LocalSettings

    def server_round(self, ctx, w, state):
        cohort = ctx.sample(self.s.cohort_size(ctx.n_clients))
        sums = ctx.map("local", cohort, {"w": w})
        return sums["nw"] / sums["n"], state  # sum_i n_i w_i / sum_i n_i

    def client_local(self, c, payload):
        w = local_sgd(c, payload["w"], self.s.tau, self.s.lr, self.s.batch_size, lambda w, b, t: self.loss_grad(w, b))
        n = float(c.data.num_samples)
        return {"nw": n * w, "n": n}
