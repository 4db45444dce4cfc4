"""Summarize sinusoid runs (Local-SCGDM paper, section 5.1): the final training and
validation loss of each algorithm over seeds (mean, std, min, max), the loss curves
averaged over seeds, and the Figure 1 data of all runs in one file.

    python notebooks/sinusoid_summary.py RUNS_DIR [--group-by algo|gamma|p|alpha]

RUNS_DIR holds one folder per run (each with config.json, metrics.csv, figure1.csv), as
written by `python -m raycompo.run --out RUNS_DIR/NAME`. Writes RUNS_DIR/summary.csv,
RUNS_DIR/curves.csv and RUNS_DIR/figure1_all.csv, and prints the summary table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd


def load(runs: Path, group_by: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    finals, curves, figures = [], [], []
    for cfg_path in sorted(runs.glob("*/config.json")):
        cfg = json.loads(cfg_path.read_text())
        if cfg.get("status") != "completed":
            continue
        settings = cfg["effective_settings"]
        key = cfg["algo"] + (" per-task" if settings.get("per_task_state") else "")
        if group_by != "algo":
            key += f" {group_by}={settings[group_by]}"
        metrics = pd.read_csv(cfg_path.parent / "metrics.csv").dropna(subset=["val_loss"])
        last = metrics.iloc[-1]
        finals.append(
            {
                "group": key,
                "seed": cfg["seed"],
                "round": int(last["round"]),
                "train_loss": last["train_loss"],
                "val_loss": last["val_loss"],
            }
        )
        curves.append(
            metrics[["round", "train_loss", "val_loss"]].assign(group=key, seed=cfg["seed"])
        )
        fig = cfg_path.parent / "figure1.csv"
        if fig.exists():
            figures.append(pd.read_csv(fig).assign(group=key, seed=cfg["seed"]))
    if not finals:
        raise SystemExit(f"no completed runs under {runs}")
    final = pd.DataFrame(finals)
    summary = final.groupby("group").agg(
        runs=("seed", "count"),
        rounds=("round", "max"),
        train_mean=("train_loss", "mean"),
        train_std=("train_loss", "std"),
        val_mean=("val_loss", "mean"),
        val_std=("val_loss", "std"),
        val_min=("val_loss", "min"),
        val_max=("val_loss", "max"),
    )
    curve = (
        pd.concat(curves)
        .groupby(["group", "round"])[["train_loss", "val_loss"]]
        .mean()
        .reset_index()
    )
    return summary, curve, pd.concat(figures) if figures else pd.DataFrame()


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("runs", type=Path)
    p.add_argument(
        "--group-by", default="algo", help="algo, or a setting name (gamma, p, alpha) for ablations"
    )
    args = p.parse_args()
    summary, curve, figure = load(args.runs, args.group_by)
    summary.to_csv(args.runs / "summary.csv")
    curve.to_csv(args.runs / "curves.csv", index=False)
    if len(figure):
        figure.to_csv(args.runs / "figure1_all.csv", index=False)
    pd.set_option("display.width", 160)
    print(summary.round(4).to_string())


if __name__ == "__main__":
    main()
