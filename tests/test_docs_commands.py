"""Every command that README.md and docs/*.md show in a fenced ```bash block runs (the slow
tier: `python -m pytest -m slow`; tests/test_docs.py parses each in the default run).

tests/test_docs.py parses the commands; this file runs them, each in a process of its own
with a time limit (forked from a server that has imported torch, Ray and raycompo once:
tests/fork_server.py; a fresh `python -m` costs 6 s before it starts), in the order of the pages (README.md, then docs/*.md by name), the way a new
user follows the pages in one fresh clone: one workspace folder for all pages (a temp folder
holding links to the repository's examples/, sweeps/ and cluster/, and an empty docs/img/),
so that a command reading what an earlier one wrote (a plot of a run folder, a `--resume`)
finds it. The pages are parsed when the tests are collected: a command added to a page is
run too. A command that fails reports its page, its line and the tail of its output.

A command runs as printed, except for these documented shortenings (docs/index.md,
"Every command on these pages runs"), applied while RAYCOMPO_DOCS_SCALE (default 100) is
above 1; RAYCOMPO_DOCS_SCALE=1 runs every command in full:

- `--rounds N` becomes `--rounds ceil(N / SCALE)`; a `run`, `tune` or `reproduce` without
  `--rounds` (and not `--resume`, `--list`) gets `--rounds 1`;
- `tune`: `--samples 1` (Optuna trials per algorithm); a grid search and a sweep's
  `--resume` get `--stop-after 2` and may end with its exit code, 130 (stopped, resumable);
- `reproduce`: `--seeds 1` (a claim's table and verdict from one seed);
- a benchmark: its size options capped by BENCH_CAPS (cohort sizes, clients, rounds,
  repeats, ...), and its Ray columns left out where it has an option for it, `ops` at its
  two small cohorts (BENCH_ONLY);
- Ray: a command that would start a private Ray joins the test session's instance
  (`--address`, loopback): starting Ray costs 30-60 s on 2 cores;
- the benchmarks of HEAVY_BENCHES (they start Ray or fresh processes themselves) run only
  with RAYCOMPO_DOCS_ALL=1.

`python -m raycompo.grafana` installs into a folder of the workspace
(RAY_METRICS_GRAFANA_DASHBOARD_OUTPUT_DIR), the stand-in for the page's `ray start --head`.

Identical commands (after shortening) run once. A command that reads a folder no earlier
command of the pages wrote first runs the command that writes it (its `--out`; a sweep
folder `sweep_results/SPACE-<timestamp>` is the newest one that `tune --space SPACE` wrote),
so any single test runs alone (`-k`). HOME is a folder of the workspace (nothing is
written to ~), and no command needs the network (downloads are in tests/doc_pages.py's
NOT_RUN and SKIPPED_OPTIONS).
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.doc_pages import DOCS, ROOT, Doc, not_run, split_env
from tests.fork_server import ForkServer, ForkServerError

SCALE = max(1, int(os.environ.get("RAYCOMPO_DOCS_SCALE", "100")))
TIMEOUT_S = 600  # a command; damaml-fig5's 14 one-round runs took over 300 s at load 19
EXIT_STOPPED = 130  # tune --stop-after: stopped as Ctrl-C does, resumable

#: options that make a command unrunnable here, with the reason
SKIPPED_OPTIONS: dict[str, str] = {
    "--full": "the full data set: downloads (no test touches the network)",
    "--address": "joins the cluster that the page's `ray start --head` started",
    "--check": "queries the page's Prometheus server",
}

#: a benchmark's size options and their caps (the values the command gives, or added)
BENCH_CAPS: dict[str, dict[str, int]] = {
    "cohort": {"--m": 4, "--rounds": 1, "--repeats": 1, "--floor-repeats": 1},
    "vectorize": {"--rounds": 1},
    "scale": {"--n": 2000, "--m": 10, "--rounds": 1},
    "startup": {"--repeats": 1},
    "round": {"--rounds": 1, "--warmup": 1, "--repeats": 1},
    "feddro": {"--rounds": 1, "--pings": 2},
    "sweep": {"--samples": 1, "--rounds": 1},
    "recovery": {"--rounds": 6, "--kill-after": 4, "--checkpoint-every": 3},
    "ledger": {"--n": 1000, "--m": 10, "--pairs": 1},
    "checkpoint": {},
    "state_store": {},
    "per_client": {},
    "plugin": {},
    "population": {"--rounds": 2, "--clients": 24, "--m": 8, "--seeds": 1},
}

#: benchmarks that start Ray themselves or spawn fresh processes per measurement: minutes
#: even shortened (a Ray start alone is 30-60 s on 2 busy cores, and times out past load ~20).
#: They run with RAYCOMPO_DOCS_ALL=1; without it they are skipped with this reason.
HEAVY_BENCHES: dict[str, str] = {
    "startup": "starts fresh processes, each with its own Ray",
    "round": "starts its own Ray",
    "feddro": "starts its own Ray",
    "sweep": "starts its own Ray",
    "recovery": "starts its own Ray and kills a host actor",
    "vectorize": "six workloads client by client and vectorized: minutes even at one round",
    "gpu": "starts its own Ray and runs 24 federations (tests/test_bench_gpu.py runs it shortened)",
}
RUN_ALL = os.environ.get("RAYCOMPO_DOCS_ALL", "") not in ("", "0")

#: options added to a benchmark: its Ray columns left out where it has the option; `ops`
#: counts at its two small cohorts (--quick: m = 4 and 8; m = 1,000 takes minutes per algorithm)
BENCH_ONLY: dict[str, list[str]] = {
    "cohort": ["--no-ray"],
    "sweep": ["--modes", "inline", "--no-startup"],
    "ops": ["--quick"],
}

SWEEP_FOLDER = re.compile(r"^sweep_results/([\w.-]+?)-(<[^>]*>|\d{8}-\d{6})$")


def skip_reason(argv: list[str]) -> str | None:
    if module_of(argv) == "raycompo.bench" and not RUN_ALL:
        name = argv[3] if len(argv) > 3 else ""
        if name in HEAVY_BENCHES or ("scale" == name and option(argv, "--backends") == "ray"):
            return f"benchmark {name}: {HEAVY_BENCHES.get(name, 'starts its own Ray')} (RAYCOMPO_DOCS_ALL=1 runs it)"
    why = not_run(argv)
    if why is not None:
        return why
    for flag, why in SKIPPED_OPTIONS.items():
        if flag in argv:
            return why
    return None


def module_of(argv: list[str]) -> str | None:
    if argv[:2] == ["python", "-m"] and len(argv) > 2 and argv[2].startswith("raycompo."):
        return argv[2]
    return None


def option(argv: list[str], name: str) -> str | None:
    """The value of `name VALUE` or `name=VALUE` in argv (first one), else None."""
    for i, word in enumerate(argv):
        if word == name and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


def values_after(argv: list[str], name: str) -> tuple[int, int] | None:
    """(start, end) of the values of `name V1 V2 ...` (up to the next option)."""
    if name not in argv:
        return None
    start = argv.index(name) + 1
    end = start
    while end < len(argv) and not argv[end].startswith("--"):
        end += 1
    return start, end


def shrink(value: str, cap: float) -> str:
    number = float(value)
    return str(int(min(number, cap))) if number == int(number) else value


def cap_option(argv: list[str], name: str, cap: int) -> list[str]:
    """Every value of `name` capped at `cap` (equal values merged); added when absent."""
    span = values_after(argv, name)
    if span is None:
        return [*argv, name, str(cap)]
    start, end = span
    values = list(dict.fromkeys(shrink(v, cap) for v in argv[start:end]))
    return [*argv[:start], *values, *argv[end:]]


def scaled_rounds(value: str) -> str:
    return str(max(1, math.ceil(int(value) / SCALE)))


@dataclass
class Plan:
    """How a documented command runs here."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    exits: tuple[int, ...] = (0,)
    ray: bool = False  # joins this file's Ray instance (--address added at run time)


def plan(argv: list[str], env: dict[str, str]) -> Plan:
    """The command as it runs here: the documented shortenings (module docstring)."""
    module = module_of(argv)
    argv = list(argv)
    result = Plan(argv, dict(env))
    if module == "raycompo.grafana":  # the page's `ray start --head` made the folder: one of its own
        result.env.setdefault("RAY_METRICS_GRAFANA_DASHBOARD_OUTPUT_DIR", "grafana-dashboards")
    if SCALE == 1 or module is None:
        result.argv = argv
        return result
    listing = "--list" in argv or "--help" in argv
    resume = option(argv, "--resume") is not None or (module == "raycompo.reproduce" and "--resume" in argv)
    if module in ("raycompo.run", "raycompo.tune", "raycompo.reproduce") and not listing:
        if "--rounds" in argv:
            i = argv.index("--rounds") + 1
            argv[i] = scaled_rounds(argv[i])
        elif not resume:
            argv += ["--rounds", "1"]
    if module == "raycompo.run" and not listing:
        result.ray = option(argv, "--backend") != "inline"
    if module == "raycompo.tune" and not listing:
        if not resume:
            argv = cap_option(argv, "--samples", 1)
        if option(argv, "--search") == "grid" or resume:
            argv += ["--stop-after", "2"]
            result.exits = (0, EXIT_STOPPED)
        result.ray = True
    if module == "raycompo.reproduce" and not listing:
        argv = cap_option(argv, "--seeds", 1)
        result.ray = option(argv, "--workers") != "1"
    if module == "raycompo.bench" and len(argv) > 3:
        name = argv[3]
        for name_option, cap in BENCH_CAPS.get(name, {}).items():
            argv = cap_option(argv, name_option, cap)
        for extra in BENCH_ONLY.get(name, []):
            if extra not in argv:
                argv.append(extra)
    result.argv = argv
    return result


# --- what a command reads, and which command writes it --------------------------------------

def reads(argv: list[str]) -> list[str]:
    """Folders of the workspace that the command reads: a plot's sources, a `--resume DIR`."""
    module = module_of(argv)
    found = []
    if module == "raycompo.plot":
        i = 3
        while i < len(argv) and not argv[i].startswith("-"):
            found.append(argv[i])
            i += 1
    resume = option(argv, "--resume")
    if module in ("raycompo.run", "raycompo.tune") and resume:
        found.append(resume)
    return found


def writes(argv: list[str]) -> str | None:
    return option(argv, "--out")


@dataclass
class Outcome:
    argv: list[str]
    rc: int
    output: str
    seconds: float


class Workspace:
    """The folder the commands run in, the Ray instance they join, what already ran."""

    def __init__(self, root: Path, ray_address: str | None = None):
        self.root = root
        self.ran: dict[tuple[str, ...], Outcome] = {}
        self.ray_address = ray_address
        self.ray_tmp = tempfile.mkdtemp(prefix="rcdoc-", dir="/tmp")  # short: Ray's socket paths
        for name in ("examples", "sweeps", "cluster"):
            (root / name).symlink_to(ROOT / name)
        (root / "docs" / "img").mkdir(parents=True)
        (root / "home").mkdir()
        (root / "logs").mkdir()
        self.env = {
            **os.environ,
            "HOME": str(root / "home"),
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            "RAY_TMPDIR": self.ray_tmp,
            "RAY_DEDUP_LOGS": "0",
            "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
            "RAY_USAGE_STATS_ENABLED": "0",
            "MPLBACKEND": "Agg",
            "RAYCOMPO_PROGRESS": "lines",
            "WANDB_SILENT": "true",
        }
        for name in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI"):
            self.env.pop(name, None)
        self.server = ForkServer(root, self.env)  # started by the first `python -m` command

    def close(self) -> None:
        self.server.close()

    def command_line(self, p: Plan) -> list[str]:
        argv = list(p.argv)
        if p.ray:
            assert self.ray_address, "a command that joins Ray, in a workspace without the test session's Ray"
            argv += ["--address", self.ray_address]
        return argv

    def execute(self, argv: list[str], env: dict[str, str], log: Path) -> int:
        """Run one command: `python -m ...` forked from the server (a fresh process, as
        `python -m` gives, without its start), anything else as a subprocess."""
        if argv[:2] == ["python", "-m"]:
            try:
                rc, _ = self.server.run(argv, env, log, TIMEOUT_S)
            except ForkServerError as exc:
                log.write_text(str(exc))
                return -1
            return rc
        with log.open("w") as out:
            try:
                return subprocess.run(argv, cwd=self.root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                      timeout=TIMEOUT_S, stdin=subprocess.DEVNULL).returncode
            except subprocess.TimeoutExpired:
                return -9

    def run(self, doc: Doc) -> Outcome:
        env, words = split_env(doc.text)
        p = plan(words, env)
        for path in reads(p.argv):
            self.provide(path, doc)
        p.argv = [self.resolve(w) for w in p.argv]
        key = tuple(f"{k}={v}" for k, v in sorted(p.env.items())) + tuple(p.argv)
        if key not in self.ran:
            argv = self.command_line(p)
            log = self.root / "logs" / f"{doc.page.replace('/', '_')}-{doc.line}.log"
            started = time.monotonic()
            rc = self.execute(argv, {**self.env, **p.env}, log)
            seconds = time.monotonic() - started
            output = log.read_text(errors="replace") + (f"\nTIMEOUT after {TIMEOUT_S} s" if rc == -9 else "")
            self.ran[key] = Outcome(argv, rc, output, seconds)
        outcome = self.ran[key]
        if outcome.rc not in p.exits:
            tail = outcome.output[-3000:]
            raise AssertionError(f"{doc.where()}: exit {outcome.rc} (expected {p.exits})\n  as printed: {doc.text}\n"
                                 f"  ran: {shlex.join(outcome.argv)}\n--- output tail ---\n{tail}")
        return outcome

    # prerequisites: a folder a command reads that no earlier command wrote
    def resolve(self, word: str) -> str:
        """A sweep folder named by a placeholder (`<timestamp>` or an example date) is the
        newest `sweep_results/SPACE-*` of the workspace."""
        match = SWEEP_FOLDER.match(word)
        if not match:
            return word
        found = sorted((self.root / "sweep_results").glob(f"{match.group(1)}-*"), key=lambda p: p.stat().st_mtime)
        return found[-1].relative_to(self.root).as_posix() if found else word

    def provide(self, path: str, reader: Doc) -> None:
        if (self.root / self.resolve(path)).exists():
            return
        match = SWEEP_FOLDER.match(path)
        producers = []
        for doc in DOCS:
            if doc == reader:
                continue
            _, argv = split_env(doc.text)
            if skip_reason(argv) is not None:
                continue
            out = writes(argv)
            if match:
                if module_of(argv) == "raycompo.tune" and option(argv, "--space") == match.group(1) and out is None \
                        and option(argv, "--resume") is None:
                    producers.append(doc)
                    break
            elif out and (out == path or out.startswith(path.rstrip("/") + "/") or path.startswith(out + "/")):
                producers.append(doc)
        assert producers, f"{reader.where()}: {path} is read, but no command of the pages writes it"
        for doc in producers:
            self.run(doc)


RUNNABLE = [d for d in DOCS if skip_reason(split_env(d.text)[1]) is None]
SKIPPED_DOCS = [d for d in DOCS if skip_reason(split_env(d.text)[1]) is not None]


@pytest.fixture(scope="module")
def workspace(ray_session):
    """A folder of its own, not under pytest's basetemp: another pytest session on the
    machine prunes old basetemps, and these commands run for minutes. Commands that would
    start a Ray join the test session's (loopback)."""
    root = Path(tempfile.mkdtemp(prefix="raycompo-docs-"))
    ws = Workspace(root, ray_session.get_runtime_context().gcs_address)
    yield ws
    ws.close()
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(ws.ray_tmp, ignore_errors=True)


def test_the_pages_show_commands_to_run():
    assert len(RUNNABLE) >= 40
    assert {d.page for d in RUNNABLE} >= {"README.md", "docs/running.md", "docs/costs.md", "docs/system.md"}


@pytest.mark.slow
@pytest.mark.parametrize("doc", RUNNABLE, ids=[f"{d.where()} {d.text[:80]}" for d in RUNNABLE])
def test_documented_command_runs(doc, workspace):
    workspace.run(doc)


def test_commands_not_run_have_their_reason():
    """What is not run here is named with its reason (NOT_RUN, SKIPPED_OPTIONS, the heavy
    benchmarks): no skipped test per command, and most commands run."""
    assert all(skip_reason(split_env(d.text)[1]) for d in SKIPPED_DOCS)
    assert len(SKIPPED_DOCS) < len(RUNNABLE) / 2


BUDGETED = [d for d in RUNNABLE if "--budget" in split_env(d.text)[1] and "--rounds" in split_env(d.text)[1]]


@pytest.mark.slow
@pytest.mark.parametrize("doc", BUDGETED, ids=[f"{d.where()} {d.text[:80]}" for d in BUDGETED])
def test_a_documented_budget_is_reached(doc, workspace):
    """A page's `--rounds N --budget KEY=V` run reaches its budget within its N rounds: the
    cost per round of its shortened run (the ledger's cumulative column over the rounds it
    ran; the docs' runs draw the same work every round) times N is at least V."""
    import pandas as pd

    workspace.run(doc)
    _, argv = split_env(doc.text)
    rounds = int(option(argv, "--rounds"))
    start, end = values_after(argv, "--budget")
    budget = {key: float(value) for key, value in (word.split("=", 1) for word in argv[start:end])}
    last = pd.read_csv(workspace.root / option(argv, "--out") / "metrics.csv").iloc[-1]
    projected = {key: last[key] / last["round"] * rounds for key in budget}
    assert any(projected[key] >= value for key, value in budget.items()), (
        f"{doc.where()}: {doc.text}\n  never reaches its budget {budget} in {rounds} rounds: "
        f"{ {k: round(v) for k, v in projected.items()} } at round {rounds} ({last['round']} rounds ran here)")
