"""Progress of a run, a sweep or a claim, as a person watching sees it.

`RunProgress` is an `Observer` of one run: on a terminal one tqdm bar (rounds done / total,
the task's headline metric, seconds per round and an ETA from the rounds run so far; the
start-up before the first row does not count); in a notebook the same bar as a widget
(`tqdm.auto`); anywhere else (a pipe, a CI log, nohup) plain lines, at most about
`max_lines` of them (every ceil(rounds / max_lines)-th round, the last row and any
diverged row), so a 3,000-round run writes ~100 lines, not 3,000.

`SweepProgress` is the same for a sweep's trials or a claim's runs: a bar of trials done /
total with the best value so far and an ETA on a terminal, with one line per finished
trial printed above it; the lines alone elsewhere.

`mode`: 'auto' (the above), 'bar' (a terminal bar whatever the stream), 'notebook',
'lines' (plain lines), or 'none'. The environment variable RAYCOMPO_PROGRESS sets the
default ('lines' in a CI job that fakes a terminal, for instance).
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Any

from raycompo.watch.observers import Observer, Row, RunInfo

MODES = ("auto", "bar", "notebook", "lines", "none")
MAX_LINES = 100
"""Plain lines per run (besides the last row) when the output is not a terminal."""


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()  # type: ignore[attr-defined]
    except Exception:
        return False
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except Exception:
        return False


def _width_args(stream: Any) -> dict[str, Any]:
    """tqdm's width: follow the terminal, unless it reports no size (a bare pty, where tqdm would hide the bar): 100 x 24."""
    try:
        if os.get_terminal_size(stream.fileno()).columns > 0:
            return {"dynamic_ncols": True}
    except (OSError, AttributeError, ValueError):
        pass
    return {"ncols": 100, "nrows": 24}


def pick_mode(mode: str = "auto", stream: Any = None) -> str:
    """'bar', 'notebook', 'lines' or 'none' for `mode` on `stream` (default stderr)."""
    if mode not in MODES:
        from raycompo.errors import ConfigError

        raise ConfigError(f"unknown progress mode {mode!r}; choose one of: {', '.join(MODES)}")
    if mode == "auto":
        mode = os.environ.get("RAYCOMPO_PROGRESS", "auto").strip().lower() or "auto"
        if mode not in MODES:
            mode = "auto"
    if mode != "auto":
        return mode
    if _in_notebook():
        return "notebook"
    return "bar" if _isatty(stream if stream is not None else sys.stderr) else "lines"


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or v in (None, ""):
        return None
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _fmt(v: Any) -> str:
    x = _num(v)
    return "-" if x is None else f"{x:.4f}"


def headline(metric: str, row: Row) -> str:
    """'val_acc 0.8123 (worst client 0.7000)': the task's main metric and its worst client."""
    worst = f"{metric}_worst"
    return f"{metric} {_fmt(row.get(metric))}" + (f" (worst client {_fmt(row.get(worst))})" if worst in row else "")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(round(seconds))
    return f"{s}s" if s < 60 else (f"{s // 60}m{s % 60:02d}s" if s < 3600 else f"{s // 3600}h{s % 3600 // 60:02d}m")


class RunProgress(Observer):
    """One run's progress (see the module docstring). `total`: the run's rounds; `metric`:
    the headline column without `_worst` (e.g. 'val_acc'); `stream`: default stderr,
    looked up when the run starts."""

    def __init__(self, total: int, metric: str, *, mode: str = "auto", stream: Any = None,
                 max_lines: int = MAX_LINES):
        self.total = int(total)
        self.metric = metric
        self.stream = stream
        self.mode = pick_mode(mode, stream)
        self.every = max(1, math.ceil(self.total / max(1, max_lines)))
        self.bar: Any = None
        self.lines = 0
        self._first: tuple[int, float] | None = None  # (round, time) of the first row seen
        self._shown: Row = {}
        self._last_printed = -1

    # --- timing -------------------------------------------------------------------------
    def _rate(self, rnd: int) -> float | None:
        """Seconds per round over the rounds since the first row (start-up excluded)."""
        if self._first is None or rnd <= self._first[0]:
            return None
        return (time.perf_counter() - self._first[1]) / (rnd - self._first[0])

    def on_start(self, info: RunInfo) -> None:
        self._first = None
        self.lines = 0

    def on_row(self, row: Row) -> None:
        rnd = int(row.get("round", 0))
        if self._first is None:
            self._first = (rnd, time.perf_counter())
        for k in (self.metric, f"{self.metric}_worst", "train_loss"):
            if k in row and (_num(row[k]) is not None or k not in self._shown):
                self._shown[k] = row[k]  # a round without evaluation keeps the last values
        if self.mode in ("bar", "notebook"):
            self._bar_row(rnd, row)
        elif self.mode == "lines":
            if rnd % self.every == 0 or rnd >= self.total or row.get("diverged") or rnd == self._first[0]:
                self._line(rnd, row)

    def on_end(self, status: str, final: Row) -> None:
        if self.bar is not None:
            if status != "completed":
                self.bar.set_description_str(status)
            self.bar.close()
            self.bar = None
        elif self.mode == "lines" and final and int(final.get("round", -1)) != self._last_printed:
            self._line(int(final["round"]), final)  # the last row, always

    def on_failure(self, exc: BaseException, final: Row) -> None:
        self.on_end("failed", final)

    # --- output -------------------------------------------------------------------------
    def _postfix(self, rnd: int, row: Row) -> str:
        rate = self._rate(rnd)
        loss = self._shown.get("train_loss")
        text = f"{rate:.3f}s/round" if rate is not None else "-s/round"
        text += f"  train_loss {_fmt(loss)}  {headline(self.metric, self._shown)}"
        return text + ("  DIVERGED" if row.get("diverged") else "")

    def _bar_row(self, rnd: int, row: Row) -> None:
        if self.bar is None:
            if self.mode == "notebook":
                from tqdm.auto import tqdm
            else:
                from tqdm import tqdm
            # Made at the first row: tqdm's rate and ETA count the rounds, not the start-up.
            stream = self.stream or sys.stderr
            self.bar = tqdm(total=self.total, initial=rnd, unit="round", file=stream, smoothing=0, leave=True,
                            **_width_args(stream),
                            bar_format="round {n_fmt}/{total_fmt} |{bar}| eta {remaining}{postfix}")
        self.bar.set_postfix_str(self._postfix(rnd, row), refresh=False)
        step = rnd - self.bar.n
        if step > 0:
            self.bar.update(step)  # redraws at most every 0.1 s
        else:
            self.bar.refresh()

    def _line(self, rnd: int, row: Row) -> None:
        rate = self._rate(rnd)
        eta = None if rate is None else rate * max(0, self.total - rnd)
        loss = row.get("train_loss")
        print(
            f"round {rnd:>4}/{self.total}  train_loss {_fmt(loss)}  {headline(self.metric, row)}  "
            + (f"{rate:.3f}s/round  eta {_duration(eta)}" if rate is not None else f"{_num(row.get('round_time')) or 0:.3f}s/round")
            + ("  DIVERGED" if row.get("diverged") else ""),
            file=self.stream or sys.stderr, flush=True,
        )
        self.lines += 1
        self._last_printed = rnd


class SweepProgress:
    """Trials (or a claim's runs) done / total: `done(line, value=..., label=...)` after
    each one. On a terminal a bar (best so far, ETA) with the lines printed above it; the
    lines alone elsewhere. `mode` 'higher' / 'lower' (max / min) picks the best value."""

    def __init__(self, total: int, *, metric: str | None = None, mode: str = "max", unit: str = "trial",
                 display: str = "auto", stream: Any = None):
        self.total, self.metric, self.better, self.unit = total, metric, mode, unit
        self.display = pick_mode(display, stream)
        self.stream = stream
        self.n = 0
        self.best: tuple[float, str] | None = None
        self.start = time.perf_counter()
        self.bar: Any = None

    def __getstate__(self) -> dict[str, Any]:  # a bar (a lock, a stream) does not pickle
        return {**self.__dict__, "bar": None}

    def _out(self) -> Any:
        return self.stream or sys.stderr  # looked up now: the stream may change (pytest's capture)

    def _make_bar(self) -> None:
        if self.bar is None and self.display in ("bar", "notebook") and self.total:
            if self.display == "notebook":
                from tqdm.auto import tqdm
            else:
                from tqdm import tqdm
            self.bar = tqdm(total=self.total, unit=self.unit, file=self._out(), smoothing=0, **_width_args(self._out()),
                            bar_format=f"{self.unit}s {{n_fmt}}/{{total_fmt}} |{{bar}}| {{elapsed}}, eta {{remaining}}{{postfix}}")
            self.bar.set_postfix_str(self._postfix(), refresh=True)

    def begin(self) -> None:
        """Show the (empty) bar: the sweep starts."""
        self.start = time.perf_counter()
        self._make_bar()

    def _postfix(self) -> str:
        if self.best is None or self.metric is None:
            return ""
        return f"best {self.metric} {self.best[0]:.4f} ({self.best[1]})"

    def eta(self) -> float | None:
        if self.n == 0:
            return None
        return (time.perf_counter() - self.start) / self.n * max(0, self.total - self.n)

    def done(self, line: str, value: Any = None, label: str = "") -> None:
        self.n += 1
        v = _num(value)
        if v is not None and (self.best is None or (v > self.best[0] if self.better == "max" else v < self.best[0])):
            self.best = (v, label)
        if self.display == "none":
            return
        self._make_bar()
        if self.bar is not None:
            self.bar.write(line, file=self._out())
            self.bar.set_postfix_str(self._postfix(), refresh=False)
            self.bar.update(1)
            self.bar.refresh()  # trials are seconds apart: always show the count
        else:
            best = self._postfix()
            tail = (f"  | {best}" if best else "") + (f"  eta {_duration(self.eta())}" if self.n < self.total else "")
            print(line + tail, file=self._out(), flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
