"""Your own data set as a federated task: numpy arrays plus a Dirichlet label-skew partition.

The 8x8 digits of scikit-learn (1,797 images, shipped with it: no download) stand in for
your arrays. From the command line, name the class like any task:

    python -m raycompo.run --task examples/my_data.py:Digits --algo fedavg --rounds 20
    python -m raycompo.run --task examples/my_data.py:Digits --algo comfedl --set dirichlet_alpha=0.1 gamma=1

or run this file for a FedAvg run from Python: python examples/my_data.py
"""

import argparse

from sklearn.datasets import load_digits

import raycompo

x, y = load_digits(return_X_y=True)  # (1797, 64) floats in 0..16, labels 0..9

Digits = raycompo.task_from_arrays(
    x / 16.0, y,
    n_clients=20,
    partition="dirichlet",  # label skew: class proportions ~ Dir(alpha) over the clients
    dirichlet_alpha=0.5,
    val_fraction=0.2,       # each client validates on 20% of its own samples
    model="logistic",       # or "mlp", or any function returning a torch.nn.Module
    name="digits-dirichlet",
)

if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()  # --help
    result = raycompo.run(Digits, "fedavg", rounds=20, settings={"lr": 0.5})
    print(result.metrics[["round", "train_loss", "val_acc", "val_acc_worst"]].tail(3).to_string(index=False))
    print("partition:", {k: result.config["partition"][k] for k in ("partitioner", "params", "seed")})
