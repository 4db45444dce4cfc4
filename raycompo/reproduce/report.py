"""A claim's outputs from its run folders: table.csv / table.md (final metrics, mean and 95%
CI over seeds), figure.png (curves with a 95% band), commands.sh, verdict.txt.

The user's extra variants (`--with`, `Variant.yours`) are tabled and drawn, marked "yours",
and never read by the verdict: `verdict` sees the claim's own variants only."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from raycompo.costs.axes import COST_AXES, COST_LABELS, cost, missing_columns
from raycompo.reproduce.runner import Job, command, read_config
from raycompo.reproduce.spec import Better, Bound, Claim, Close, Variant
from raycompo.watch.stats import mean_ci, t_quantile


@dataclass
class Outcome:
    """One variant over its seeds."""

    label: str
    n: int = 0
    diverged: int = 0
    failed: int = 0
    missing: int = 0
    curves: list[pd.DataFrame] = field(default_factory=list)
    """metrics.csv of each completed run."""
    finals: dict[str, list[float]] = field(default_factory=dict)

    @property
    def completed(self) -> int:
        return len(self.curves)

    def stat(self, metric: str) -> tuple[float, float, int]:
        return mean_ci(self.finals.get(metric, []))

    def recorded(self, metric: str) -> bool:
        return any(column(c, metric) is not None for c in self.curves)


REACH = re.compile(r"^reach:(?P<axis>[a-z_]+):(?P<metric>[A-Za-z0-9_]+)(?P<op>[<>])(?P<target>[-+0-9.eE]+)$")
"""'reach:values:objective<0.5': the cost spent when the metric first crosses the target."""


def reached(frame: pd.DataFrame, metric: str) -> float | None:
    """The cost of the axis at the first evaluated round where the metric crosses the target
    ('reach:<axis>:<metric><X>'); None if it never does (or the run lacks the columns)."""
    m = REACH.match(metric)
    if m is None or m["axis"] not in COST_AXES or missing_columns(frame.columns, m["axis"]):
        return None
    s = column(frame, m["metric"])
    if s is None:
        return None
    target = float(m["target"])
    hit = s[s < target] if m["op"] == "<" else s[s > target]
    if not len(hit):
        return None
    spent = pd.Series(pd.to_numeric(cost(frame, m["axis"]), errors="coerce").to_numpy(), index=frame["round"])
    return float(spent.loc[hit.index[0]])


SLOPE = re.compile(r"^slope:(?P<axis>[a-z_]+):(?P<metric>[A-Za-z0-9_]+):(?P<eps>[-+0-9.eE,]+)$")
"""'slope:values:grad_norm:0.3,0.1,0.03': the measured exponent a of cost(eps) ~ (1/eps)^a."""


def slope(frame: pd.DataFrame, metric: str) -> float | None:
    """The least-squares slope of log(cost to reach metric < eps) against log(1/eps) over the
    listed eps ('slope:<axis>:<metric>:<e1>,<e2>,...'), the exponent a of a rate O(eps^-a);
    None when fewer than two eps are reached."""
    m = SLOPE.match(metric)
    if m is None:
        return None
    points = []
    for e in m["eps"].split(","):
        c = reached(frame, f"reach:{m['axis']}:{m['metric']}<{e}")
        if c is not None and c > 0:
            points.append((math.log(1 / float(e)), math.log(c)))
    if len(points) < 2 or len({x for x, _ in points}) < 2:
        return None
    x, y = np.array(points).T
    return float(np.polyfit(x, y, 1)[0])


def column(frame: pd.DataFrame, metric: str) -> pd.Series | None:
    name = metric.removeprefix("mean:")
    if name in COST_AXES and name not in frame.columns:  # 'values': values_up + values_down
        if missing_columns(frame.columns, name):
            return None
        s = pd.to_numeric(cost(frame, name), errors="coerce")
        s.index = frame["round"]
        s = s.dropna()
        return s if len(s) else None
    if name not in frame.columns:
        return None
    s = pd.to_numeric(frame[name], errors="coerce")
    s.index = frame["round"]
    s = s.dropna()
    return s if len(s) else None


def final_value(frame: pd.DataFrame, metric: str) -> float | None:
    if metric.startswith("reach:"):
        return reached(frame, metric)
    if metric.startswith("slope:"):
        return slope(frame, metric)
    s = column(frame, metric)
    if s is None:
        return None
    if metric.startswith("mean:"):
        s = s[s.index > 0]  # the rounds trained, not the initial model
        return float(s.mean()) if len(s) else None
    return float(s.iloc[-1])


def extras_of(jobs: list[Job]) -> list[Variant]:
    """The user's variants (`--with`) among the jobs, in order."""
    seen: dict[str, Variant] = {}
    for j in jobs:
        if j.variant.yours:
            seen.setdefault(j.variant.label, j.variant)
    return list(seen.values())


def mark(v: Variant) -> str:
    """The label shown in tables and legends: 'label (yours)' for the user's variants."""
    return f"{v.label} (yours)" if v.yours else v.label


def shown_algo(v: Variant) -> str:
    """The algo column: a user's file by its name, not its absolute path (commands.sh has that)."""
    where, sep, attr = v.algo.rpartition(":")
    if sep and ("/" in where or "\\" in where or where.endswith(".py")):
        return f"{Path(where).name}:{attr}"
    return v.algo


def collect(claim: Claim, jobs: list[Job]) -> dict[str, Outcome]:
    metrics = set(claim.metrics) | {p.metric for p in claim.panels} | {c.metric for c in claim.checks}
    out = {v.label: Outcome(v.label) for v in claim.variants}
    for j in jobs:
        o = out.setdefault(j.variant.label, Outcome(j.variant.label))
        o.n += 1
        cfg = read_config(j.out)
        status = (cfg or {}).get("status")
        if status == "diverged":
            o.diverged += 1
        elif status == "completed" and (j.out / "metrics.csv").exists():
            frame = pd.read_csv(j.out / "metrics.csv")
            o.curves.append(frame)
            for m in metrics:
                v = final_value(frame, m)
                if v is not None:
                    o.finals.setdefault(m, []).append(v)
        elif status is None:
            o.missing += 1
        else:
            o.failed += 1
    return out


def fmt(x: float) -> str:
    if not math.isfinite(x):
        return "nan"
    return f"{x:.3g}" if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e4) else f"{x:.4f}"


def cell(o: Outcome, metric: str) -> str:
    """'0.8301 ± 0.0123', 'diverged 5/5', 'n/a' (not recorded by the engine)."""
    if o.completed == 0:
        if o.diverged:
            return f"diverged {o.diverged}/{o.n}"
        return f"failed {o.failed}/{o.n}" if o.failed else "not run"
    mean, half, n = o.stat(metric)
    if n == 0:
        return "n/a"
    return fmt(mean) + (f" ± {fmt(half)}" if math.isfinite(half) else " (n=1)")


def table(claim: Claim, outcomes: dict[str, Outcome], extras: list[Variant] | None = None) -> pd.DataFrame:
    """One row per variant, the claim's, then the user's (`yours` True: not in the verdict)."""
    rows = []
    for v in (*claim.variants, *(extras or [])):
        o = outcomes[v.label]
        row: dict[str, Any] = {"variant": v.label, "algo": v.algo, "yours": v.yours,
                               "settings": v.described(),
                               "runs": o.n, "completed": o.completed,
                               "diverged": f"{o.diverged}/{o.n}", "failed": o.failed}
        for m in claim.metrics:
            mean, half, n = o.stat(m)
            if o.completed == 0:
                row[f"{m}_mean"] = row[f"{m}_ci95"] = cell(o, m)
            else:
                row[f"{m}_mean"], row[f"{m}_ci95"] = (mean, half) if n else ("n/a", "n/a")
            row[f"{m}_n"] = n
        rows.append(row)
    return pd.DataFrame(rows)


def markdown(claim: Claim, outcomes: dict[str, Outcome], header: dict[str, Any], extras: list[Variant] | None = None) -> str:
    cols = ["variant", "algo", "settings", "diverged", *claim.metrics]
    lines = [f"# {claim.name}: {claim.title}", "", f"Source: {claim.source}.",
             f"Task {header['task']}, {header['seeds']} seeds, {header['rounds']} rounds (claim budget); "
             "final values (last evaluated round), mean ± 95% CI half-width (t, n-1 df) over the runs that completed.", ""]
    if claim.notes:
        lines += [f"Notes: {claim.notes}", ""]
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for v in (*claim.variants, *(extras or [])):
        o = outcomes[v.label]
        d = f"{o.diverged}/{o.n}" if o.diverged else ""
        settings = v.described()
        label = f"**{mark(v)}**" if v.yours else v.label
        lines.append("| " + " | ".join([label, shown_algo(v), settings, d, *(cell(o, m) for m in claim.metrics)]) + " |")
    if extras:
        lines += ["", f"Rows marked (yours): your algorithm{'s' if len(extras) > 1 else ''} (`--with`) on the claim's task, "
                  "seeds and budget, with the claim's settings that it knows (and `--set`, `--with-set`); "
                  "shown for comparison, not part of the verdict."]
    lines += ["", header["verdict"].replace("\n", "\n\n"), ""]
    return "\n".join(lines)


def commands(jobs: list[Job]) -> str:
    return "#!/bin/sh\n# Every run of this claim, one per line (PYTHONPATH or an installed raycompo).\nset -e\n" + \
        "\n".join(command(j) for j in jobs) + "\n"


# --- verdict ------------------------------------------------------------------------------


def verdict(claim: Claim, outcomes: dict[str, Outcome]) -> str:
    """'paper: ...; measured: ... -> reproduced / not reproduced / not evaluated', then one
    line per `Alt` ('with <option>: measured: ... -> ...')."""
    outcomes = {v.label: outcomes[v.label] for v in claim.variants}  # the paper's variants only, never yours
    if not claim.checks:
        return f"paper: {claim.paper_says}; measured: see the figure -> not evaluated automatically"
    lines = [f"paper: {claim.paper_says}; {judge(claim.checks, outcomes)}"]
    lines += [f"{alt.name}: {judge(tuple(alt.apply(c) for c in claim.checks), outcomes)}" for alt in claim.alts]
    return "\n".join(lines)


def judge(checks, outcomes: dict[str, Outcome]) -> str:
    """'measured: <each check> -> reproduced / not reproduced / not evaluated'."""
    results, texts = [], []
    for c in checks:
        ok, text = evaluate(c, outcomes)
        results.append(ok)
        texts.append(text)
    if any(r is False for r in results):
        word = "not reproduced"
    elif any(r is None for r in results):
        word = "not evaluated"
    else:
        word = "reproduced"
    return f"measured: {'; '.join(texts)} -> {word}"


def _value(o: Outcome, metric: str) -> tuple[float | None, str]:
    if o.completed == 0:
        return None, f"{o.label} {cell(o, metric)}"
    mean, half, n = o.stat(metric)
    if n == 0:
        return None, f"{o.label} {metric} not recorded"
    return mean, f"{o.label} {fmt(mean)}"


def evaluate(c, outcomes: dict[str, Outcome]) -> tuple[bool | None, str]:
    if isinstance(c, Better):
        w = outcomes[c.winner]
        wv, wt = _value(w, c.metric)
        if w.completed == 0 and w.diverged:
            return False, f"{c.metric}: {wt}"
        if wv is None:
            return None, f"{c.metric}: {wt}"
        parts, ok, overlap, no_ci = [wt], True, False, False
        for name in c.losers:
            lo = outcomes[name]
            lv, lt = _value(lo, c.metric)
            parts.append(lt)
            if lv is None:
                if lo.completed == 0 and (lo.diverged or lo.failed):
                    continue  # a baseline that diverged everywhere is beaten
                return None, f"{c.metric}: " + ", ".join(parts)
            better = wv > lv if c.mode == "max" else wv < lv
            ok &= better
            both = _overlap(w, lo, c.metric)
            overlap |= better and both is True
            no_ci |= both is None
        op = ">" if c.mode == "max" else "<"
        note = " (95% CIs overlap)" if ok and overlap else " (one seed: no 95% CI)" if ok and no_ci else ""
        return ok, f"{c.metric}: {parts[0]} {op} " + ", ".join(parts[1:]) + (" holds" if ok else " fails") + note
    if isinstance(c, Bound):
        v, t = _value(outcomes[c.variant], c.metric)
        if v is None:
            return (False if outcomes[c.variant].completed == 0 and outcomes[c.variant].diverged else None), f"{c.metric}: {t}"
        ok = v < c.value if c.op == "<" else v > c.value
        return ok, f"{c.metric}: {t} {c.op} {c.value:g} {'holds' if ok else 'fails'}"
    if isinstance(c, Close):
        a, at = _value(outcomes[c.a], c.metric)
        b, bt = _value(outcomes[c.b], c.metric)
        if a is None or b is None:
            gone = any(outcomes[n].completed == 0 and outcomes[n].diverged for n in (c.a, c.b))
            return (False if gone else None), f"{c.metric}: {at}, {bt}"  # a run that diverged is not close to one that did not
        ok = abs(a - b) <= c.tol
        return ok, f"{c.metric}: |{at} - {bt}| <= {c.tol:g} {'holds' if ok else 'fails'}"
    raise TypeError(c)


def _overlap(a: Outcome, b: Outcome, metric: str) -> bool | None:
    """Whether the two 95% CIs of `metric` overlap; None where one has no CI (one seed)."""
    ma, ha, _ = a.stat(metric)
    mb, hb, _ = b.stat(metric)
    if not (math.isfinite(ha) and math.isfinite(hb)):
        return None  # one seed: no evidence either way
    return abs(ma - mb) <= ha + hb


# --- figure -----------------------------------------------------------------------------------


def band(curves: list[pd.DataFrame], metric: str, x_scale: float, log: bool = False, x_axis: str | None = None):
    """x, mean, lower, upper: the mean over the runs at each evaluated round and its 95%
    CI (t). log: of log10 of the values (geometric mean, a band that stays positive).
    x_axis: a cost axis; x is then the runs' mean cumulative cost at each round."""
    series = [s for s in (column(c, metric) for c in curves) if s is not None]
    if not series:
        return None
    frame = pd.concat(series, axis=1)
    if x_axis is not None and len(series) > 1:
        # runs stopped by a budget end at different rounds: a mean cost over the runs still going
        # would step back along the x axis, so the curve ends at the last round every run reached
        frame = frame[frame.notna().all(axis=1)]
    if log:
        frame = np.log10(frame.where(frame > 0))
    n = frame.notna().sum(axis=1)
    mean = frame.mean(axis=1)
    sd = frame.std(axis=1, ddof=1)
    half = np.array([t_quantile(0.975, int(k) - 1) * s / math.sqrt(k) if k > 1 else 0.0
                     for k, s in zip(n, sd.fillna(0.0))])
    x, m = frame.index.to_numpy() * x_scale, mean.to_numpy()
    if x_axis is not None:
        spent = [s for s in (column(c, x_axis) for c in curves) if s is not None]
        if not spent:
            return None
        x = pd.concat(spent, axis=1).mean(axis=1).reindex(frame.index).to_numpy()
    if log:
        return x, 10**m, 10 ** (m - half), 10 ** (m + half)
    return x, m, m - half, m + half


YOURS_STYLE = (("black", "--"), ("dimgray", "-."), ("saddlebrown", ":"), ("darkmagenta", "--"))
"""Color and line style of the user's curves: apart from the claim's tab10 colors."""


def figure(claim: Claim, outcomes: dict[str, Outcome], path: Path, subtitle: str = "",
           extras: list[Variant] | None = None) -> list[list[str]]:
    """Draws the claim's panels (the user's variants in every panel, dashed, "(yours)");
    returns each panel's legend labels, the curves drawn (figure data)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab10" if len(claim.variants) <= 10 else "tab20")
    colors = {v.label: cmap(i % cmap.N) for i, v in enumerate(claim.variants)}  # one color per variant
    styles = {v.label: "-" for v in claim.variants}
    for i, v in enumerate(extras or []):
        colors[v.label], styles[v.label] = YOURS_STYLE[i % len(YOURS_STYLE)]
    drawn_labels: list[list[str]] = []
    ncols = min(claim.ncols, len(claim.panels))
    nrows = math.ceil(len(claim.panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.8 * nrows), squeeze=False)
    for ax, panel in zip(axes.flat, claim.panels):
        drawn = 0
        for v in (*claim.variants, *(extras or [])):
            if panel.group is not None and v.group != panel.group and not v.yours:
                continue
            o = outcomes[v.label]
            label = mark(v) + (f" (diverged {o.diverged}/{o.n})" if o.diverged else "")
            b = band(o.curves, panel.metric, v.x_scale, log=panel.log, x_axis=claim.x_axis)
            if b is None:
                if o.diverged:
                    ax.plot([], [], label=label, color=colors[v.label])  # in the legend, nothing to draw
                continue
            x, m, lo, hi = b
            ax.plot(x, m, label=label, lw=2.0 if v.yours else 1.5, ls=styles[v.label], color=colors[v.label])
            ax.fill_between(x, lo, hi, color=colors[v.label], alpha=0.2, lw=0)
            drawn += 1
        if drawn == 0:
            ax.text(0.5, 0.5, f"{panel.metric}: no completed run records it", ha="center", va="center",
                    transform=ax.transAxes, fontsize=9)
        if panel.log and drawn:
            ax.set_yscale("log")
        if "acc" in panel.metric and drawn:
            ax.set_ylim(-0.02, 1.02)  # accuracies: a wide band (few seeds) must not hide the curves
        ax.set_title(panel.title, fontsize=10)
        ax.set_xlabel(COST_LABELS[claim.x_axis] if claim.x_axis else claim.x_label)
        ax.set_ylabel(panel.metric + (" (geometric mean)" if panel.log else ""))
        ax.grid(alpha=0.3)
        handles = ax.get_legend_handles_labels()
        drawn_labels.append(list(handles[1]))
        if handles[0]:
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(claim.panels):]:
        ax.axis("off")
    fig.suptitle(f"{claim.source}: {claim.title}" + (f"\n{subtitle}" if subtitle else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return drawn_labels


def write_all(claim: Claim, jobs: list[Job], out: Path, header: dict[str, Any]) -> str:
    """Writes table.csv, table.md, figure.png, commands.sh, verdict.txt; returns the verdict."""
    outcomes = collect(claim, jobs)
    extras = extras_of(jobs)
    line = verdict(claim, outcomes)
    header = {**header, "verdict": line}
    table(claim, outcomes, extras).to_csv(out / "table.csv", index=False)
    (out / "table.md").write_text(markdown(claim, outcomes, header, extras))
    (out / "verdict.txt").write_text(line + "\n")
    figure(claim, outcomes, out / "figure.png",
           subtitle=f"task {header['task']}, mean over {header['seeds']} seeds, band: 95% CI"
           + ("; dashed: yours, not in the verdict" if extras else ""), extras=extras)
    return line
