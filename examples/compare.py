"""Two algorithms on one task from Python, as a notebook would: run, plot, compare.

    python examples/compare.py --rounds 30 --out compare.png

Runs FedAvg and ComFedL (log-sum-exp normalizer) on the imbalanced MNIST subset (no
download), draws the worst client's validation accuracy per round into a PNG, and prints
a table of the final rows. In a notebook, call `compare(...)` and show the figure.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; a notebook keeps its own backend
import matplotlib.pyplot as plt
import pandas as pd

import raycompo

RUNS = {
    # label: (algorithm, settings)
    "FedAvg": ("fedavg", {}),
    "ComFedL (LSE)": ("comfedl", {"normalizer": "lse"}),
}


def compare(rounds: int = 30, seed: int = 0, backend: str = "inline") -> dict[str, raycompo.RunResult]:
    """Each algorithm of RUNS on dro-mnist5k for `rounds` rounds, same seed."""
    results = {}
    for label, (algo, settings) in RUNS.items():
        done = []  # a live view: on_row sees every row as soon as it is computed
        results[label] = raycompo.run("dro-mnist5k", algo, rounds=rounds, seed=seed, settings=settings,
                                      backend=backend, on_row=done.append)
        print(f"{label}: {len(done)} rows, status {results[label].status}")
    return results


def plot(results: dict[str, raycompo.RunResult], path: str, metric: str = "val_acc_worst") -> None:
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for label, result in results.items():
        m = result.metrics.dropna(subset=[metric])
        ax.plot(m["round"], m[metric], label=label)
    ax.set_xlabel("communication round s")
    ax.set_ylabel("worst client's validation accuracy")
    ax.set_title("Imbalanced MNIST (dro-mnist5k)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def table(results: dict[str, raycompo.RunResult]) -> pd.DataFrame:
    cols = ["round", "train_loss", "val_acc", "val_acc_worst", "wall_time"]
    return pd.DataFrame({label: r.metrics.iloc[-1][cols] for label, r in results.items()}).T


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="inline", choices=("inline", "ray"))
    p.add_argument("--out", default="compare.png")
    args = p.parse_args(argv)
    out = args.out if Path(args.out).suffix else args.out + ".png"  # matplotlib's default format, named
    results = compare(args.rounds, args.seed, args.backend)
    plot(results, out)
    print(table(results).to_string(float_format=lambda v: f"{v:.4f}"))
    print(f"figure: {out}")


if __name__ == "__main__":
    main()
