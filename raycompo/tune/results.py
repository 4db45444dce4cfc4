"""A sweep's result folder (default `sweep_results/<space>-<timestamp>/`):

* `sweep.json`   the sweep's options and its space (what `--resume` continues);
* `trials.csv`   one row per trial: trial_id, algorithm, task, each swept setting, status
                 (completed / diverged / stopped (by the early-stopping scheduler) /
                 error), rounds_done, final_<column> of the last round, best_<metric>,
                 best_round, time_s, settings (JSON of every override) and `command`,
                 the `python -m raycompo.run` line that re-runs the trial;
* `metrics.parquet`  every trial's per-round rows with a trial_id column
                 (`pandas.read_parquet`); `metrics.jsonl` is its append log;
* `best.json`    the best trial per algorithm: settings, value, command (with
                 `--rank-at`, the value at equal cost and where it was read:
                 tune/equal_cost.py);
* `tune/`        Ray Tune's own experiment folders, one per run of the sweep (the first,
                 each --resume): result.json and progress.csv per trial, which
                 `tune.ExperimentAnalysis(<folder>)` reads, and TensorBoard event files.

A trial's rows are written only when it ends, trials.csv last: a sweep stopped midway
keeps every finished trial, and `--resume` reruns only trials that have no row (or an
'error' row). Before it writes anything, `--resume` checks that these files read back
(`SweepStore.check`); a damaged one is one message naming it, and nothing is changed.
A last metrics.jsonl line cut short by a kill is the remains of an unfinished trial's
rows: it is dropped with them.
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Any

import pandas as pd

from raycompo.errors import ConfigError
from raycompo.runfolder.results import write_json_atomic
from raycompo.tune.equal_cost import at_equal_cost

DONE = ("completed", "diverged", "stopped")
FIRST_COLUMNS = ["trial_id", "algorithm", "task", "status", "rounds_done"]
BACK_COLUMNS = ["best_round", "time_s", "seed", "rounds", "settings", "command", "error"]
META_KEYS = ("space", "options", "algorithms", "metric", "mode", "task", "rounds", "seed", "samples")
"""What sweep.json holds (written by `sweep.prepare`); `--resume` reads every one."""
TRIAL_COLUMNS = ("trial_id", "algorithm", "status", "settings")
"""The trials.csv columns `--resume` reads to know what is done."""


RUN_OPTION_NAMES = {"state_memory_gb": "state_memory", "host_timeout_s": "host_timeout",
                    "vectorize_memory_mb": "vectorize_memory"}
"""RunConfig fields whose `raycompo.run` keyword (and `--option`) is not the field's name."""


def run_options(cfg: dict[str, Any]) -> dict[str, Any]:
    """The trial's RunConfig keys beyond the sweep's own (`space.run_keys`: system, budget,
    an aggregation and its settings, ...) whose value differs from RunConfig's default, by
    `raycompo.run` keyword: what its re-run command must repeat."""
    import dataclasses

    from raycompo.configuration.config import RunConfig
    from raycompo.tune.space import run_keys

    defaults = RunConfig()
    return {RUN_OPTION_NAMES.get(k, k): cfg[k] for k in run_keys()
            if k in cfg and cfg[k] != getattr(defaults, k) and not dataclasses.is_dataclass(cfg[k])}


def option_args(keyword: str, value: Any) -> list[str]:
    """`--system mobile`, `--budget sim_time=3600`: a `raycompo.run` keyword as its command-line option."""
    flag = "--" + keyword.replace("_", "-")
    if isinstance(value, dict):
        return [flag] + [f"{k}={_number(v)}" for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [flag] + [str(v) for v in value]
    if isinstance(value, bool):
        return [flag] if value else []
    return [flag, str(value)]


def _number(v: Any) -> str:
    """3600.0 -> '3600', 1e6 -> '1e+06', 1234567.5 -> '1234567.5': short, and read back exactly."""
    if isinstance(v, float) and math.isfinite(v) and float(f"{v:g}") == v:
        return f"{v:g}"
    return str(v)


def command_line(cfg: dict[str, Any]) -> str:
    """The `python -m raycompo.run` command that re-runs a trial's RunConfig, with its
    system, budget and the engine's other options (`run_options`); for a task or
    algorithm that only a Python session can make (`plugins.session_only`: a notebook's
    class, one from task_from_arrays), the `raycompo.run(...)` call to make in that
    session, with a comment naming the class to re-create."""
    from raycompo.configuration.plugins import session_only

    extra = run_options(cfg)
    session = [(arg, cfg[arg]) for arg in ("task", "algo") if session_only(cfg[arg])]
    if session:
        names = {arg: _class_name(spec) for arg, spec in session}
        args = [names.get(arg) or repr(cfg[arg]) for arg in ("task", "algo")]
        kwargs = [f"{k}={cfg[k]!r}" for k in ("rounds", "seed", "backend")]
        if cfg.get("eval_every", 1) != 1:
            kwargs.append(f"eval_every={cfg['eval_every']!r}")
        if cfg.get("data_dir"):
            kwargs.append(f"data_dir={cfg['data_dir']!r}")
        kwargs += [f"{k}={v!r}" for k, v in extra.items()]
        if cfg.get("settings"):
            kwargs.append(f"settings={dict(cfg['settings'])!r}")
        made = "; ".join(f"{names[arg]} = the {arg} class of your session ({spec})" for arg, spec in session)
        return f"raycompo.run({', '.join(args + kwargs)})  # in Python, where {made}"
    parts = ["python", "-m", "raycompo.run", "--task", cfg["task"], "--algo", cfg["algo"], "--rounds", str(cfg["rounds"]),
             "--seed", str(cfg["seed"]), "--backend", cfg["backend"]]
    if cfg.get("eval_every", 1) != 1:
        parts += ["--eval-every", str(cfg["eval_every"])]
    if cfg.get("data_dir"):
        parts += ["--data-dir", cfg["data_dir"]]
    for keyword, value in extra.items():
        parts += option_args(keyword, value)
    if cfg.get("settings"):
        parts += ["--set"] + [f"{k}={v}" for k, v in cfg["settings"].items()]
    return " ".join(shlex.quote(p) for p in parts)


def _class_name(spec: str) -> str:
    """'MyTask' for '__main__:MyTask'; 'ArraysTask' for 'mod:task_from_arrays.<locals>.ArraysTask'."""
    return spec.rpartition(":")[2].rpartition(".")[2] or "TheClass"


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


class SweepStore:
    def __init__(self, out: str | Path):
        self.dir = Path(out)
        self.trials_path = self.dir / "trials.csv"
        self.jsonl_path = self.dir / "metrics.jsonl"
        self.parquet_path = self.dir / "metrics.parquet"
        self.best_path = self.dir / "best.json"
        self.meta_path = self.dir / "sweep.json"

    def lock(self):
        """`with store.lock():` this process is the one that writes the sweep folder
        (raycompo/runfolder/lockfile.py); a ConfigError names the live process that holds it."""
        from raycompo.runfolder.lockfile import hold

        return hold(self.dir, "sweep")

    # --- metadata ----------------------------------------------------------------
    def exists(self) -> bool:
        return self.meta_path.exists()

    def write_meta(self, meta: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.meta_path, meta)

    def read_meta(self) -> dict[str, Any]:
        try:
            meta = json.loads(self.meta_path.read_text())
        except (OSError, ValueError) as exc:  # JSONDecodeError, UnicodeDecodeError are ValueErrors
            raise self.damaged(self.meta_path, f"not readable as JSON ({type(exc).__name__}: {exc})") from None
        if not isinstance(meta, dict):
            raise self.damaged(self.meta_path, f"a JSON {type(meta).__name__}, not an object")
        missing = [k for k in META_KEYS if k not in meta]
        if missing:
            raise self.damaged(self.meta_path, f"missing {', '.join(missing)}")
        return meta

    def damaged(self, path: Path, why: str) -> ConfigError:
        fix = {self.meta_path: "Repair it", self.trials_path: "Repair or remove it (then every trial runs again)",
               self.jsonl_path: "Repair or remove it (the finished trials' per-round rows are then lost)"}[path]
        return ConfigError(f"--resume {self.dir}: {path.name} is damaged ({why}); nothing was changed. {fix}, "
                           f"or start a new sweep with --space and --out")

    def check(self) -> None:
        """trials.csv and metrics.jsonl read back as `--resume` reads them (reads only);
        a ConfigError names the damaged file."""
        if self.trials_path.exists() and self.trials_path.stat().st_size:
            try:
                df = pd.read_csv(self.trials_path)
            except (OSError, ValueError) as exc:  # pandas' ParserError, EmptyDataError, UnicodeDecodeError
                raise self.damaged(self.trials_path, f"not readable as CSV ({type(exc).__name__})") from None
            missing = [c for c in TRIAL_COLUMNS if c not in df.columns]
            if missing:
                raise self.damaged(self.trials_path, f"no column {', '.join(missing)}")
            for i, r in df[df["status"].isin(DONE)].iterrows():
                try:
                    ok = isinstance(json.loads(r["settings"]), dict)
                except (TypeError, ValueError):
                    ok = False
                if not ok:
                    raise self.damaged(self.trials_path, f"row {i + 1} (trial {r['trial_id']}): settings are not a JSON object")
        for _ in self._log():
            pass

    def _log(self):
        """(line, trial_id) of each metrics.jsonl line. A last line cut short (no newline,
        not JSON) is skipped: a kill during an append, of a trial not yet recorded."""
        if not self.jsonl_path.exists():
            return
        try:
            text = self.jsonl_path.read_text()
        except (OSError, ValueError) as exc:
            raise self.damaged(self.jsonl_path, f"not readable ({type(exc).__name__})") from None
        lines = text.split("\n")
        for n, line in enumerate(lines, 1):
            if not line:
                continue
            try:
                rec = json.loads(line)
                yield line, rec["trial_id"]
            except (ValueError, TypeError, KeyError):
                if n == len(lines):  # the unterminated last line
                    continue
                raise self.damaged(self.jsonl_path, f"line {n} is not a JSON row with a trial_id") from None

    def logged_rows(self) -> list[dict[str, Any]]:
        """metrics.jsonl's rows, in the order they were written (a cut last line skipped)."""
        return [json.loads(line) for line, _ in self._log()]

    # --- trials ------------------------------------------------------------------
    def trials(self) -> pd.DataFrame:
        if not self.trials_path.exists() or self.trials_path.stat().st_size == 0:
            return pd.DataFrame(columns=FIRST_COLUMNS)
        df = pd.read_csv(self.trials_path)
        return df.drop_duplicates("trial_id", keep="last").reset_index(drop=True)

    def done_rows(self) -> pd.DataFrame:
        df = self.trials()
        return df[df["status"].isin(DONE)].reset_index(drop=True)

    def record(self, row: dict[str, Any], rounds: list[dict[str, Any]], order: list[str] | None = None) -> None:
        """Append one finished trial: its rounds to metrics.jsonl, then its trials.csv row."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.jsonl_path, "a") as f:
            for r in rounds:
                f.write(json.dumps({"trial_id": row["trial_id"], **{k: _clean(v) for k, v in r.items()}}) + "\n")
        df = pd.concat([self.trials_raw(), pd.DataFrame([{k: _clean(v) for k, v in row.items()}])], ignore_index=True)
        front = [c for c in FIRST_COLUMNS + list(order or []) if c in df.columns]
        back = [c for c in BACK_COLUMNS if c in df.columns]
        middle = [c for c in df.columns if c not in front and c not in back]
        df = df[front + sorted(middle, key=lambda c: (not c.startswith("final_"), c)) + back]
        tmp = self.trials_path.with_suffix(".csv.tmp")
        df.to_csv(tmp, index=False)
        tmp.replace(self.trials_path)

    def trials_raw(self) -> pd.DataFrame:
        if not self.trials_path.exists() or self.trials_path.stat().st_size == 0:
            return pd.DataFrame()
        return pd.read_csv(self.trials_path)

    def forget_unfinished(self) -> None:
        """Drop metrics.jsonl lines of trials without a finished row (before a resume)."""
        if not self.jsonl_path.exists():
            return
        keep = set(self.done_rows()["trial_id"])
        lines = [ln for ln, tid in self._log() if tid in keep]
        # a trial recorded twice (error, then rerun) keeps only its last run's rows
        tmp = self.jsonl_path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(ln + "\n" for ln in lines))
        tmp.replace(self.jsonl_path)  # atomic: a kill now leaves the old log or the new one

    # --- final files ---------------------------------------------------------------
    def write_metrics(self) -> pd.DataFrame:
        if not self.jsonl_path.exists():
            df = pd.DataFrame(columns=["trial_id", "round"])
        else:
            df = pd.read_json(self.jsonl_path, lines=True, dtype=False)
            if len(df):
                # keep the last recorded run of each trial (a rerun after an error)
                df["_run"] = (df["round"] == 0).cumsum()
                last = df.groupby("trial_id")["_run"].transform("max")
                df = df[df["_run"] == last].drop(columns="_run").reset_index(drop=True)
                for c in df.columns:
                    if df[c].dtype == object and c not in ("trial_id", "status"):
                        df[c] = _to_numeric(df[c])
        df.to_parquet(self.parquet_path, index=False)
        return df

    def write_best(self, meta: dict[str, Any]) -> dict[str, Any]:
        """best.json: per algorithm its best trial, by the metric after the last round or,
        with `meta["rank_at"]` (a cost axis), at equal cost (tune/equal_cost.py: read from
        metrics.parquet, which `write_metrics` writes first)."""
        metric, mode = meta["metric"], meta["mode"]
        df = self.done_rows()
        best: dict[str, Any] = {"space": meta["space"], "task": meta["task"], "metric": metric, "mode": mode,
                                "algorithms": {}}
        col = f"final_{metric}"
        equal = None
        if meta.get("rank_at"):
            rows = pd.read_parquet(self.parquet_path) if self.parquet_path.exists() else pd.DataFrame()
            equal = at_equal_cost(df, rows, metric, meta["rank_at"])
            best["rank_at"] = equal.record()
        for algo in meta["algorithms"]:
            rows = df[df["algorithm"] == algo] if len(df) else df
            entry: dict[str, Any] = {"trials": int(len(rows)), "completed": int((rows["status"] == "completed").sum()) if len(rows) else 0,
                                     "diverged": int((rows["status"] == "diverged").sum()) if len(rows) else 0}
            vals = _to_numeric(rows[col]).astype(float) if len(rows) and col in rows else pd.Series(dtype=float)
            if equal is not None and len(vals):  # the metric at the common cost; a diverged trial keeps its +-inf
                vals = pd.Series([v if math.isinf(v) else equal.values.get(t, {}).get("value", math.nan)
                                  for t, v in zip(rows["trial_id"], vals)], index=vals.index, dtype=float)
            finite = vals[vals.abs() < math.inf] if len(vals) else vals
            if len(finite):
                # ranked by the metric after the last round (a scheduler-stopped trial: its last round)
                i = finite.idxmax() if mode == "max" else finite.idxmin()
                r = rows.loc[i]
                entry.update(
                    trial_id=r["trial_id"], value=float(finite[i]), rounds_done=int(r["rounds_done"]),
                    best_value=_num(r.get(f"best_{metric}")), best_round=int(r["best_round"]),
                    status=r["status"], settings=json.loads(r["settings"]), command=r["command"],
                )
                if equal is not None:  # where the value was read
                    entry.update(value_round=equal.values[r["trial_id"]]["round"],
                                 value_cost=equal.values[r["trial_id"]]["cost"])
            best["algorithms"][algo] = entry
        write_json_atomic(self.best_path, best)
        return best


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _to_numeric(s: pd.Series) -> pd.Series:
    s2 = s.replace({"inf": math.inf, "-inf": -math.inf})
    try:
        return pd.to_numeric(s2)
    except (ValueError, TypeError):
        return s


def best_table(best: dict[str, Any], swept: dict[str, list[str]]) -> str:
    """A plain-text table: one line per algorithm with its best settings. Ranked at equal
    cost (best.json's "rank_at"), a first line says at which cost and the metric column
    gives the round it was read at."""
    metric = best["metric"]
    at = best.get("rank_at")
    head = ["algorithm", f"{metric}", "rounds", "best over rounds (round)", "trials", "diverged", "settings"]
    if at:
        head[1], head[2] = f"{metric} at {at['axis']} <= {_cost_text(at['cost'])} (round)", "rounds done"
    lines = []
    for algo, e in best["algorithms"].items():
        if "value" not in e:
            why = "(no finished trial)" if not e["trials"] else "(every trial diverged)"
            if at and e.get("trials", 0) > e.get("diverged", 0):
                why = f"(no evaluated row at {at['axis']} <= {_cost_text(at['cost'])})"
            lines.append([algo, "-", "-", "-", str(e["trials"]), str(e.get("diverged", 0)), why])
            continue
        settings = " ".join(f"{k}={e['settings'][k]}" for k in swept.get(algo, []) if k in e["settings"])
        bv = "-" if e.get("best_value") is None else f"{e['best_value']:.4f} ({e['best_round']})"
        value = f"{e['value']:.4f}" + (f" ({e.get('value_round')})" if at else "")
        lines.append([algo, value, str(e["rounds_done"]), bv, str(e["trials"]), str(e.get("diverged", 0)), settings])
    widths = [max(len(h), *(len(r[i]) for r in lines)) if lines else len(h) for i, h in enumerate(head)]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    intro = []
    if at:
        cols = " + ".join(at["columns"])
        intro = [f"ranked at equal {at['axis']} ({cols}): each trial's {metric} at its last evaluated row with "
                 f"{at['axis']} <= {_cost_text(at['cost'])}, the smallest final {at['axis']} of the completed trials"]
    return "\n".join(intro + [fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in lines])


def _cost_text(c: float | None) -> str:
    if c is None:
        return "- (no completed trial has the cost columns)"
    return f"{c:.6g}"
