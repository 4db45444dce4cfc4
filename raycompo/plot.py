"""Compare runs in one figure, the way the papers draw them.

    python -m raycompo.plot runs/comfedl-s0 runs/comfedl-s1 runs/fedavg-s0 \\
        --metric val_acc_worst --out fig.png
    python -m raycompo.plot sweep_results/dro-20250101-120000 --metric val_acc_worst --x wall_time
    python -m raycompo.plot reproductions/comfedl-fig2/runs --metric val_acc
    python -m raycompo.plot runs/feddro runs/fedavg-co --metric val_acc_worst --x values

Each source is a run folder (config.json + metrics.csv, as `raycompo.run --out` writes),
a folder holding run folders (e.g. a claim's runs/), or a sweep folder (trials.csv +
metrics.parquet; by default the best settings of each algorithm, as best.json ranks them;
--all-trials draws every setting). Runs that share the task, the algorithm, every effective
setting and every other field of the run's configuration (the simulated system, the
budget, ...: `RunConfig`'s fields, but the seed and those that only choose how a run
executes, `EXECUTION`) are one line: their mean, with a band of the 95% confidence
interval (Student's t) over the seeds. Each line is named as its algorithm's paper names
it (ComFedL, FedAvg, q-FedAvg, DRFL, ...), followed by what tells it apart: a
configuration field that differs between lines (e.g. `system=mobile-sync`), a setting that
differs between one algorithm's lines.

The x axis (--x) is the round (default), the wall time, or a cost the papers argue in
(raycompo/costs/axes.py): samples drawn, values (values_up + values_down: real values
communicated), bytes (bytes_up + bytes_down) or sim_time (simulated seconds, runs with
--system only). A line's x at a round is the mean over its runs (seeds) of that round's
value; a run without the columns of the axis is an error naming them.

`--events staleness` draws, from each run's events.csv (`--log-events`), the histogram of
the staleness of its applied updates; `--events participation` the number of applied
dispatches per client (raycompo/runfolder/events_file.py). A run without events.csv is
an error (run it with --log-events).

From Python, this module is callable: `raycompo.plot(sources, metric=..., x=..., out=...)`
returns the matplotlib Figure (and writes it when `out` is given). Bad input (no
metrics.csv, an unknown metric, which lists the columns there are) raises ConfigError;
the command line prints it and exits 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raycompo.configuration.arguments import Arg, check
from raycompo.costs.axes import COST_AXES, COST_LABELS, cost, missing_columns, where_from
from raycompo.errors import ConfigError, RaycompoError

PAPER_NAMES = {
    "comfedl": "ComFedL", "comfedl-damaml": "ComFedL (DA-MAML)", "comfedl-maml": "ComFedL (MAML)",
    "ditto": "Ditto", "drfl": "DRFL", "fastdro": "FastDRO", "fedavg": "FedAvg", "fedavg-co": "FedAvg (CO)",
    "feddro": "FedDRO", "fedmaml": "FedMAML", "gcivr": "GCIVR", "local-bsgd": "Local-BSGD",
    "local-moml": "Local-MOML", "local-scgd": "Local-SCGD", "local-scgdm": "Local-SCGDM", "mbsgd-co": "MB-SGD",
    "pdsgd": "PD-SGD", "qfedavg": "q-FedAvg", "tr-maml": "TR-MAML", "unconstrained": "unconstrained ERM",
}
"""Registered algorithm name -> the name its paper's figures use."""

METRIC_LABELS = {
    "val_acc_worst": "worst client's validation accuracy",
    "val_acc": "average validation accuracy",
    "train_acc_worst": "worst client's training accuracy",
    "train_acc": "average training accuracy",
    "val_loss_worst": "worst client's validation loss",
    "val_loss": "average validation loss",
    "train_loss_worst": "worst client's training loss",
    "train_loss": "average training loss",
    "grad_norm": r"$\|\nabla \Phi(\bar{x})\|$",
    "objective": r"$\Phi(\bar{x})$",
    "val_violation": "test constraint violation",
    "train_violation": "training constraint violation",
    "round_time": "seconds per round",
}
X_LABELS = {"round": "communication round $s$", "wall_time": "wall-clock time (s)", **COST_LABELS}
"""The x axes: the round, the wall time, and the cost axes of raycompo/costs/axes.py."""
LOG_METRICS = ("grad_norm",)
NOT_METRICS = ("round", "diverged", "trial_id", "status")


EXECUTION = ("seed", "task", "algo", "settings", "rounds", "backend", "clients_per_actor", "cpus_per_actor",
             "gpus_per_actor", "data_dir", "host_timeout_s", "state_memory_gb", "vectorize", "vectorize_memory_mb",
             "threads", "log_events")
"""`RunConfig` fields that do not tell lines apart: the seed (a line's runs are its seeds),
those grouped on their own (task, algo, settings) and those that choose only how a run
executes (the same rows to 1e-6) or what it writes besides its rows (`log_events`), or how long (`rounds`: a longer run continues the same
curve). Every other field (system, budget, eval_every, ... and any field added later) does."""


@dataclass
class Run:
    """One run's rows: what it ran (task, algo, settings without the seed, the other fields
    of its configuration that tell lines apart) and its seed."""

    source: str
    task: str
    algo: str
    settings: dict[str, Any]
    seed: Any
    frame: Any  # pandas DataFrame of metrics.csv
    fields: dict[str, Any] = field(default_factory=dict)
    """config.json's values of the `RunConfig` fields not in `EXECUTION` (with a simulated
    system, also its `system_profile` as read: an edited profile file is another line)."""

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.task, self.algo, json.dumps(self.settings, sort_keys=True, default=str),
                json.dumps(self.fields, sort_keys=True, default=str))


@dataclass
class Line:
    task: str
    algo: str
    settings: dict[str, Any]
    runs: list[Run] = field(default_factory=list)
    label: str = ""
    fields: dict[str, Any] = field(default_factory=dict)


def paper_name(algo: str) -> str:
    """'comfedl' -> 'ComFedL'; a plugin ('file.py:Class') -> its class name."""
    short = algo.rpartition(":")[2]
    return PAPER_NAMES.get(algo, PAPER_NAMES.get(short, short))


def metric_label(metric: str) -> str:
    """The y axis label: e.g. 'worst client's validation accuracy'; a spread column
    (raycompo/watch/per_client.py) as 'validation accuracy: 10th percentile over clients'."""
    if metric in METRIC_LABELS:
        return METRIC_LABELS[metric]
    base, _, stat = metric.rpartition("_")
    of = METRIC_LABELS.get(base, base.replace("_", " ")).removeprefix("average ")
    if stat == "std" and base:
        return f"{of}: standard deviation over clients"
    if len(stat) == 3 and stat[0] == "p" and stat[1:].isdigit() and base:
        return f"{of}: {int(stat[1:])}th percentile over clients"
    return metric.replace("_", " ")


# --- reading -----------------------------------------------------------------------------------


def _read_run(folder: Path):
    import pandas as pd

    metrics, config = folder / "metrics.csv", folder / "config.json"
    if not metrics.exists():
        raise ConfigError(f"{folder}: no metrics.csv (a run folder holds config.json and metrics.csv; "
                          "a sweep folder trials.csv and metrics.parquet)")
    try:
        cfg = json.loads(config.read_text()) if config.exists() else {}
        frame = pd.read_csv(metrics)
    except (ValueError, OSError) as exc:
        raise ConfigError(f"{folder}: cannot read its run files: {exc}") from None
    if "round" not in frame.columns:
        raise ConfigError(f"{metrics}: no 'round' column; is it a raycompo metrics.csv?")
    settings = dict(cfg.get("effective_settings") or cfg.get("settings") or {})
    settings.pop("seed", None)
    return Run(str(folder), str(cfg.get("task", "?")), str(cfg.get("algo", folder.name)), settings,
               cfg.get("seed"), frame, _fields(cfg))


def _fields(cfg: dict[str, Any]) -> dict[str, Any]:
    """The values that tell this run's line apart besides task, algo and settings: every
    `RunConfig` field outside `EXECUTION` (a field config.json lacks: its default)."""
    import dataclasses

    from raycompo.configuration.config import RunConfig

    default = RunConfig()
    out = {f.name: cfg.get(f.name, getattr(default, f.name)) for f in dataclasses.fields(RunConfig)
           if f.name not in EXECUTION}
    if cfg.get("system_profile") is not None:
        out["system_profile"] = cfg["system_profile"]
    return out


def _read_sweep(folder: Path, all_trials: bool) -> list[Run]:
    import pandas as pd

    parquet, trials_csv = folder / "metrics.parquet", folder / "trials.csv"
    if not parquet.exists():
        raise ConfigError(f"{folder}: a sweep folder without metrics.parquet (the sweep has written no "
                          "finished trial yet)")
    trials = pd.read_csv(trials_csv)
    rows = pd.read_parquet(parquet)
    keep = None
    if not all_trials and (folder / "best.json").exists():
        best = json.loads((folder / "best.json").read_text())
        keep = {json.dumps([a, e.get("settings", {})], sort_keys=True, default=str)
                for a, e in best.get("algorithms", {}).items() if "settings" in e}
    runs = []
    for _, t in trials.iterrows():
        if t.get("status") not in ("completed", "diverged", "stopped"):
            continue
        settings = json.loads(t["settings"]) if isinstance(t.get("settings"), str) else {}
        if keep is not None and json.dumps([t["algorithm"], settings], sort_keys=True, default=str) not in keep:
            continue
        frame = rows[rows["trial_id"] == t["trial_id"]].drop(columns=["trial_id"]).reset_index(drop=True)
        if len(frame):
            settings.pop("seed", None)
            runs.append(Run(f"{folder}:{t['trial_id']}", str(t["task"]), str(t["algorithm"]), settings,
                            t.get("seed"), frame))
    return runs


def read_sources(sources: Sequence[str | Path], all_trials: bool = False) -> list[Run]:
    """The runs of each source (a run folder, a folder of run folders, a sweep folder)."""
    if isinstance(sources, (str, Path)):
        sources = [sources]
    if not sources:
        raise ConfigError("give at least one run or sweep folder")
    runs: list[Run] = []
    for src in sources:
        folder = Path(src)
        if not folder.is_dir():
            raise ConfigError(f"{folder}: no such folder")
        if (folder / "trials.csv").exists():
            runs += _read_sweep(folder, all_trials)
        elif (folder / "metrics.csv").exists() or (folder / "config.json").exists():
            runs.append(_read_run(folder))
        else:
            inner = sorted(p.parent for p in folder.rglob("metrics.csv") if "tune" not in p.parts)
            if not inner:
                raise ConfigError(f"{folder}: no metrics.csv here or below (not a run, sweep or claim folder)")
            runs += [_read_run(p) for p in inner]
    return runs


def group(runs: list[Run]) -> list[Line]:
    """Runs that differ only by seed -> one line each; labels with the paper's names and
    what tells a line apart (`_differ`)."""
    lines: dict[tuple, Line] = {}
    for r in runs:
        lines.setdefault(r.key, Line(r.task, r.algo, r.settings, fields=r.fields)).runs.append(r)
    out = list(lines.values())
    tasks = {ln.task for ln in out}
    fields = [k for k in _differ([ln.fields for ln in out]) if k != "system_profile"]
    for ln in out:
        same_algo = [o for o in out if o.algo == ln.algo]
        label = paper_name(ln.algo)
        parts = [_field_text(k, ln.fields.get(k)) for k in fields]
        if len(same_algo) > 1:
            parts += [f"{k}={ln.settings.get(k)}" for k in sorted(_differ([o.settings for o in same_algo]))]
        if "system_profile" in _differ([o.fields for o in same_algo]) and "system" not in fields:
            parts.append("system profile edited between runs")  # the same file, other content
        if parts:
            label += " (" + ", ".join(parts) + ")"
        if len(tasks) > 1:
            label += f" [{ln.task}]"
        n = len(ln.runs)
        seeds = len({json.dumps(r.seed, default=str) for r in ln.runs})
        diverged = sum(_diverged(r) for r in ln.runs)
        count = "" if n == 1 else f", {n} seeds" if seeds == n else f", {n} runs ({seeds} seed{'s' if seeds > 1 else ''})"
        ln.label = label + count + (f" (diverged {diverged}/{n})" if diverged else "")
    return out


def _differ(values: list[dict[str, Any]]) -> list[str]:
    """The keys whose value is not the same in all of `values` (in first-seen order)."""
    keys = list(dict.fromkeys(k for v in values for k in v))
    return [k for k in keys if len({json.dumps(v.get(k), sort_keys=True, default=str) for v in values}) > 1]


def _field_text(key: str, value: Any) -> str:
    """A configuration field in a line's name: 'system=mobile-sync' (a profile file by its
    name), 'budget samples=2e+05', 'no budget'."""
    if value is None or value == {}:
        return f"no {key}"
    if isinstance(value, dict):
        return f"{key} " + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in value.items())
    if isinstance(value, str) and ("/" in value or "\\" in value):
        value = Path(value).name
    return f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}"


def _diverged(run: Run) -> bool:
    f = run.frame
    return bool(len(f) and "diverged" in f.columns and str(f["diverged"].iloc[-1]).lower() in ("true", "1", "1.0"))


def _columns(runs: list[Run]) -> list[str]:
    cols: dict[str, None] = {}
    for r in runs:
        for c in r.frame.columns:
            if c not in NOT_METRICS:
                cols[c] = None
    return list(cols)


def curve(line: Line, metric: str, x: str):
    """(x, mean, lower, upper) over the line's runs at each round: the 95% CI (t) band;
    x = the round, or the wall time or a cost (`cost_axes.COST_AXES`) at that round
    (mean over the runs)."""
    import numpy as np
    import pandas as pd

    from raycompo.watch.stats import t_quantile

    ys, xs = [], []
    for r in line.runs:
        f = r.frame
        if metric not in f.columns:
            continue
        y = pd.to_numeric(f[metric], errors="coerce")
        y.index = f["round"].to_numpy()
        ys.append(y)
        if x in COST_AXES:
            w = pd.to_numeric(cost(f, x), errors="coerce")
            w.index = y.index
            xs.append(w)
        elif x == "wall_time":
            if "wall_time" in f.columns:
                w = pd.to_numeric(f["wall_time"], errors="coerce")
            else:
                w = pd.to_numeric(f.get("round_time", pd.Series(0.0, index=f.index)), errors="coerce").fillna(0).cumsum()
            w.index = y.index
            xs.append(w)
    if not ys:
        return None
    frame = pd.concat(ys, axis=1)
    frame = frame[frame.notna().any(axis=1)]  # rounds without an evaluation
    if not len(frame):
        return None
    n = frame.notna().sum(axis=1)
    mean, sd = frame.mean(axis=1), frame.std(axis=1, ddof=1).fillna(0.0)
    half = np.array([t_quantile(0.975, int(k) - 1) * s / math.sqrt(k) if k > 1 else 0.0 for k, s in zip(n, sd)])
    if xs:
        xv = pd.concat(xs, axis=1).mean(axis=1).reindex(frame.index).to_numpy()
    else:
        xv = frame.index.to_numpy()
    m = mean.to_numpy()
    return xv, m, m - half, m + half


# --- drawing -----------------------------------------------------------------------------------


PLOT_ARGS = {
    "sources": Arg(("path", "paths")), "metric": Arg(("str",), none=True), "x": Arg(("choice",), choices=tuple(X_LABELS)),
    "out": Arg(("path",), none=True), "title": Arg(("text",), none=True), "all_trials": Arg(("bool",)),
    "log": Arg(("bool",), none=True), "events": Arg(("choice",), choices=("staleness", "participation"), none=True),
}
"""What `plot` accepts (raycompo.configuration.arguments)."""


def plot(sources: Sequence[str | Path] | str | Path, metric: str | None = None, *, x: str = "round",
         out: str | Path | None = None, title: str | None = None, all_trials: bool = False,
         log: bool | None = None, events: str | None = None):
    """Draw `metric` of the runs in `sources` against `x`: 'round' (default), 'wall_time',
    or a cost: 'samples', 'values' (values_up + values_down), 'bytes' (bytes_up +
    bytes_down) or 'sim_time' (runs with a simulated system); one line (mean over seeds,
    95% CI band) per algorithm and settings. `events` ('staleness' or 'participation')
    draws the runs' events.csv instead (`plot_events`). Returns the Figure; writes it to
    `out` (.png, .pdf, .svg) when given. Raises ConfigError on bad input, e.g. a run
    without the columns of `x`."""
    check("raycompo.plot", locals(), PLOT_ARGS)
    out = None if out is None else figure_path(out)
    if events is not None:
        return plot_events(sources, events, out=out, title=title)
    runs = read_sources(sources, all_trials=all_trials)
    if not runs:
        raise ConfigError(f"{', '.join(map(str, [sources] if isinstance(sources, (str, Path)) else sources))}: "
                          "no finished run to draw")
    if x in COST_AXES:
        _check_cost_columns(runs, x)
    columns = _columns(runs)
    if metric is None:
        metric = next((m for m in ("val_acc_worst", "val_acc", "grad_norm", "train_loss") if m in columns), None)
        if metric is None:
            raise ConfigError(f"give --metric; the runs have: {', '.join(columns)}")
    if metric not in columns:
        raise ConfigError(f"unknown metric {metric!r}: the runs' metrics.csv have {', '.join(columns)}")
    lines = group(runs)

    from matplotlib import colormaps
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend needed

    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    cmap = colormaps["tab10" if len(lines) <= 10 else "tab20"]
    drawn = 0
    for i, ln in enumerate(sorted(lines, key=lambda ln: (ln.algo != "comfedl", ln.label))):
        c = curve(ln, metric, x)
        if c is None:
            continue
        xv, m, lo, hi = c
        color = cmap(i % cmap.N)
        ax.plot(xv, m, label=ln.label, lw=1.8, color=color)
        if len(ln.runs) > 1:
            ax.fill_between(xv, lo, hi, color=color, alpha=0.2, lw=0)
        drawn += 1
    if drawn == 0:
        raise ConfigError(f"no run has a value of {metric!r}")
    if log if log is not None else metric in LOG_METRICS:
        ax.set_yscale("log")
    elif "acc" in metric:
        ax.set_ylim(-0.02, 1.02)  # accuracies: a wide band (few seeds) must not squash the curves
    ax.set_xlabel(X_LABELS[x], fontsize=11)
    ax.set_ylabel(metric_label(metric), fontsize=11)
    tasks = sorted({ln.task.rpartition(":")[2] for ln in lines})
    several = any(len(ln.runs) > 1 for ln in lines)
    ax.set_title(title if title is not None else
                 f"{', '.join(tasks)}" + (" (mean over seeds, band: 95% CI)" if several else ""), fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9, framealpha=0.85)
    return _finished(fig, out)


def figure_path(out: str | Path) -> Path:
    """The file a figure given `out` is written to: `out`, with '.png' added where it has no
    extension (matplotlib's default, which it adds too); a ConfigError for an extension
    matplotlib cannot write, before anything is read or drawn."""
    from matplotlib.backend_bases import FigureCanvasBase

    path = Path(out)
    if not path.suffix:
        return path.with_name(path.name + ".png")
    formats = FigureCanvasBase.get_supported_filetypes()
    if path.suffix[1:].lower() not in formats:
        raise ConfigError(f"--out {out}: a figure is written as one of {', '.join('.' + f for f in sorted(formats))}, "
                          f"not {path.suffix}")
    return path


def _finished(fig: Any, out: str | Path | None) -> Any:
    """The figure laid out, and written to `out` (its folder made) when given."""
    fig.tight_layout()
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=150)
    return fig


# --- events.csv ------------------------------------------------------------------------------


EVENT_PLOTS = {"staleness": "staleness of applied updates (server steps)",
               "participation": "client"}
"""`--events`: what each draws, by its x axis label."""


def read_event_runs(sources: Sequence[str | Path] | str | Path) -> list[tuple[str, list[dict[str, Any]]]]:
    """(a label, events.csv's rows) of each run in `sources` (a run folder, or a folder of
    runs: every events.csv below it); ConfigError where there is none."""
    from raycompo.runfolder.events_file import FILE, read_events

    runs = []
    for src in [sources] if isinstance(sources, (str, Path)) else sources:
        folder = Path(src)
        if not folder.is_dir():
            raise ConfigError(f"{folder}: no such folder")
        files = [folder / FILE] if (folder / FILE).exists() else sorted(folder.rglob(FILE))
        if not files:
            raise ConfigError(f"{folder}: no events.csv; run it with --log-events (raycompo.run(..., "
                              "log_events=True)) to log its dispatches")
        runs += [(str(f.parent), read_events(f.parent)) for f in files]
    return runs


def plot_events(sources: Sequence[str | Path] | str | Path, kind: str, *, out: str | Path | None = None,
                title: str | None = None):
    """From the runs' events.csv: 'staleness', the histogram of the staleness of the applied
    updates (one per run, overlaid), or 'participation', the number of applied dispatches
    per client (bars, side by side for several runs). Returns the Figure; writes `out`."""
    from matplotlib.figure import Figure

    out = None if out is None else figure_path(out)
    runs = read_event_runs(sources)
    applied = [(label, [r for r in rows if r["fate"] == "applied"]) for label, rows in runs]
    if not any(rows for _, rows in applied):
        raise ConfigError(f"{', '.join(label for label, _ in runs)}: no applied update in events.csv")
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    (_staleness if kind == "staleness" else _participation)(ax, applied)
    for axis in (ax.xaxis, ax.yaxis):
        axis.get_major_locator().set_params(integer=True)  # steps, clients and counts
    ax.set_xlabel(EVENT_PLOTS[kind], fontsize=11)
    ax.set_ylabel("applied updates" if kind == "staleness" else "applied dispatches", fontsize=11)
    ax.set_title(title if title is not None else f"{kind} (events.csv)", fontsize=11)
    ax.grid(alpha=0.3)
    if len(applied) > 1:
        ax.legend(fontsize=9, framealpha=0.85)
    return _finished(fig, out)


def _staleness(ax: Any, runs: list[tuple[str, list[dict[str, Any]]]]) -> None:
    """One histogram per run of its applied updates' staleness, a bin per integer."""
    top = max((r["staleness"] or 0 for _, rows in runs for r in rows), default=0)
    bins = [b - 0.5 for b in range(top + 2)]
    for label, rows in runs:
        ax.hist([r["staleness"] or 0 for r in rows], bins=bins, label=label, alpha=0.6 if len(runs) > 1 else 1.0,
                edgecolor="black", linewidth=0.6)


def _participation(ax: Any, runs: list[tuple[str, list[dict[str, Any]]]]) -> None:
    """Bars of each run's applied dispatches per client (every client of any run's rows)."""
    import collections

    clients = sorted({r["client"] for _, rows in runs for r in rows})
    width = 0.8 / len(runs)
    for i, (label, rows) in enumerate(runs):
        count = collections.Counter(r["client"] for r in rows)
        ax.bar([c + (i - (len(runs) - 1) / 2) * width for c in clients], [count[c] for c in clients], width=width,
               label=label)


def _check_cost_columns(runs: list[Run], axis: str) -> None:
    """ConfigError naming the runs that lack the columns of cost axis `axis`."""
    lacking = [(r.source, missing_columns(r.frame.columns, axis)) for r in runs]
    lacking = [(src, cols) for src, cols in lacking if cols]
    if lacking:
        shown = "; ".join(f"{src} (no {', '.join(cols)})" for src, cols in lacking[:5])
        more = f"; and {len(lacking) - 5} more" if len(lacking) > 5 else ""
        raise ConfigError(f"--x {axis} needs the column(s) {', '.join(COST_AXES[axis])} in every run: {where_from(axis)}. "
                          f"Without them: {shown}{more}")


def build_parser() -> argparse.ArgumentParser:
    """The command line's argument parser (main parses with it; tests check documented commands)."""
    p = argparse.ArgumentParser(prog="python -m raycompo.plot", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sources", nargs="+", metavar="RUN_OR_SWEEP", help="run folders, folders of runs, sweep folders")
    p.add_argument("--metric", default=None, help="the column to draw (default: val_acc_worst where there is one)")
    p.add_argument("--x", default="round", choices=tuple(X_LABELS),
                   help="the x axis: round (default), wall_time (seconds), or a cost: samples (samples drawn), "
                        "values (values_up + values_down: real values communicated), bytes (bytes_up + bytes_down), "
                        "sim_time (simulated seconds; runs with --system), epsilon (privacy loss; runs with --dp-clip)")
    p.add_argument("--out", default="fig.png", help="the figure's file (.png, .pdf, .svg; default fig.png)")
    p.add_argument("--title", default=None)
    p.add_argument("--all-trials", action="store_true", help="a sweep: every setting, not the best per algorithm")
    p.add_argument("--log", action="store_true", default=None, help="log-scale y axis")
    p.add_argument("--events", default=None, choices=tuple(EVENT_PLOTS),
                   help="draw the runs' events.csv (--log-events) instead: staleness (histogram of the applied "
                        "updates' staleness) or participation (applied dispatches per client)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        plot(args.sources, args.metric, x=args.x, out=args.out, title=args.title, all_trials=args.all_trials,
             log=args.log, events=args.events)
    except RaycompoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(figure_path(args.out))  # the file written: fig, without an extension, is fig.png
    return 0


if __name__ == "__main__":
    sys.exit(main())
else:
    from raycompo.api import callable_module

    callable_module(__name__, plot)
