"""An algorithm defined in the script itself (its `__main__`, as in a notebook), run on
Ray: raycompo ships the class's code to the actors, no module of yours needs installing.

    python examples/main_class.py --rounds 10 [--address auto]

FedProx (Li et al. 2020): FedAvg whose local steps also pull towards the server's model,
w <- w - lr * (grad f_i(w; B) + mu (w - w_s)).
"""

import argparse
from dataclasses import dataclass

import raycompo


@dataclass
class FedProxSettings(raycompo.LocalSettings):
    mu: float = 0.1
    """Proximal weight mu (0: FedAvg)."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        raycompo.require(self.mu >= 0, f"mu must be >= 0, got {self.mu}")


class FedProx(raycompo.Algorithm):
    name = "fedprox"
    Settings = FedProxSettings

    def server_round(self, ctx, w, state):
        sums = ctx.map("local", ctx.sample(self.s.cohort_size(ctx.n_clients)), {"w": w})
        return sums["w"] / sums["count"], state

    @raycompo.client_phase("local")
    def local(self, c, state, payload):
        w0 = payload["w"]

        def direction(w, batch, t):
            return self.loss_grad(w, batch) + self.s.mu * (w - w0)

        w = raycompo.local_sgd(c, w0, self.s.tau, self.s.lr, self.s.batch_size, direction)
        return {"w": w, "count": 1.0}, state


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--address", default=None, help="a Ray cluster to join (default: start a local one)")
    args = p.parse_args()
    small = {"n_clients": 4, "big_client_size": 60, "small_client_size": 20, "val_per_client": 20}
    inline = raycompo.run("dro-mnist5k", FedProx, rounds=args.rounds, settings=small)
    ray_run = raycompo.run("dro-mnist5k", FedProx, rounds=args.rounds, settings=small, backend="ray",
                           clients_per_actor=2, cpus_per_actor=0.25, address=args.address, dashboard=False)
    cols = ["train_loss", "val_loss", "val_acc", "val_acc_worst"]
    diff = float((inline.metrics[cols] - ray_run.metrics[cols]).abs().max().max())
    print(ray_run.metrics[["round", *cols]].to_string(index=False))
    print(f"{ray_run.config['algo']}: inline == ray: max difference {diff:.1e}")
