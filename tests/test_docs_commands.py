"""Every command that README.md and docs/*.md show in a fenced ```bash block runs.

tests/test_docs.py parses the commands; this file runs them, each in a subprocess with a
time limit, in the order of the pages (README.md, then docs/*.md by name), the way a new
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
- `reproduce`: `--seeds 2`;
- a benchmark: its size options capped by BENCH_CAPS (cohort sizes, clients, rounds,
  repeats, ...), and its Ray columns left out where it has an option for it (BENCH_ONLY);
- Ray: a command that would start a private Ray joins the one instance this file starts
  (`--address`, loopback, its own RAY_TMPDIR): starting Ray costs 30-60 s on 2 cores;
- the benchmarks of HEAVY_BENCHES (they start Ray or fresh processes themselves) run only
  with RAYCOMPO_DOCS_ALL=1.

`python -m raycompo.grafana` installs into a folder of the workspace
(RAY_METRICS_GRAFANA_DASHBOARD_OUTPUT_DIR), the stand-in for the page's `ray start --head`.

Identical commands (after shortening) run once. A command that reads a folder no earlier
command of the pages wrote first runs the command that writes it (its `--out`; a sweep
folder `sweep_results/SPACE-<timestamp>` is the newest one that `tune --space SPACE` wrote),
so any single test runs alone (`-k`). HOME is a folder of the workspace (nothing is
written to ~), and no command needs the network (downloads are in SKIPPED).
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.doc_pages import bash_blocks

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SCALE = max(1, int(os.environ.get("RAYCOMPO_DOCS_SCALE", "100")))
TIMEOUT_S = 600  # a command; damaml-fig5's 14 one-round runs took over 300 s at load 19
EXIT_STOPPED = 130  # tune --stop-after: stopped as Ctrl-C does, resumable

#: commands (prefixes of their words) not run here, with the reason
SKIPPED: dict[str, str] = {
    "python3 -m venv": "the install: .ci/run runs it in a fresh environment",
    "pip install": "installs packages (network): .ci/run installs the extras",
    "python -m pytest": "the test suite itself",
    "python -m mkdocs": "the docs build: tests/test_docs.py::test_docs_build_strict runs it",
    "lint-imports": "the layers check: .ci/run runs it at the repository's root (and tests/test_layers.py)",
    "python -m mypy": "the static check of the engine contract: .ci/run runs it at the repository's root",
    "mlflow ui": "MLflow's own server (needs a browser)",
    "ray start": "Ray's own command line: a long-lived cluster for the whole machine",
    "ray metrics": "Ray's own command line: downloads and starts Prometheus",
    "grafana-server": "Grafana's server: not installed here",
    "prometheus ": "Prometheus's own server: tests/test_prometheus.py starts one the same way",
    "export ": "sets an environment variable for the server commands after it",
}

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

#: options added to a benchmark: its Ray columns left out where it has the option
BENCH_ONLY: dict[str, list[str]] = {
    "cohort": ["--no-ray"],
    "sweep": ["--modes", "inline", "--no-startup"],
}

ENV_ASSIGNMENT = re.compile(r"^([A-Z_][A-Z0-9_]*)=(\S*)$")
SWEEP_FOLDER = re.compile(r"^sweep_results/([\w.-]+?)-(<[^>]*>|\d{8}-\d{6})$")


@dataclass(frozen=True)
class Doc:
    """One command of a page: where it is and its text (continuations joined)."""

    page: str
    line: int
    text: str

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def page_commands(path: Path) -> list[Doc]:
    """The command lines of the page's fenced bash blocks, with the line each starts on
    (continuations joined, comments dropped: tests/doc_pages.py, as tests/test_docs.py reads them)."""
    page = path.relative_to(ROOT).as_posix()
    return [Doc(page, start, text) for start, text in bash_blocks(path)]


DOCS = [d for p in PAGES for d in page_commands(p)]


def split_env(text: str) -> tuple[dict[str, str], list[str]]:
    """(leading VAR=value assignments, the command's words), without its comment."""
    argv = shlex.split(text, comments=True)
    env = {}
    while argv and ENV_ASSIGNMENT.match(argv[0]):
        name, value = ENV_ASSIGNMENT.match(argv.pop(0)).groups()
        env[name] = value
    return env, argv


def skip_reason(argv: list[str]) -> str | None:
    text = " ".join(argv)
    if module_of(argv) == "raycompo.bench" and not RUN_ALL:
        name = argv[3] if len(argv) > 3 else ""
        if name in HEAVY_BENCHES or ("scale" == name and option(argv, "--backends") == "ray"):
            return f"benchmark {name}: {HEAVY_BENCHES.get(name, 'starts its own Ray')} (RAYCOMPO_DOCS_ALL=1 runs it)"
    for prefix, why in SKIPPED.items():
        if text.startswith(prefix) or (text + " ").startswith(prefix):
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
        argv = cap_option(argv, "--seeds", 2)
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

    def __init__(self, root: Path):
        self.root = root
        self.ran: dict[tuple[str, ...], Outcome] = {}
        self.ray_process: subprocess.Popen | None = None
        self.ray_address: str | None = None
        self.ray_error: str | None = None
        self.ray_tmp = tempfile.mkdtemp(prefix="rcdoc-", dir="/tmp")  # short: Ray's socket paths
        for name in ("examples", "sweeps", "cluster"):
            (root / name).symlink_to(ROOT / name)
        (root / "docs" / "img").mkdir(parents=True)
        (root / "home").mkdir()
        self.env = {
            **os.environ,
            "HOME": str(root / "home"),
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            "RAY_TMPDIR": self.ray_tmp,
            "RAY_DEDUP_LOGS": "0",
            "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
            "RAY_USAGE_STATS_ENABLED": "0",
            # Ray's single-machine switch: a driver joining the loopback-only instance keeps
            # 127.0.0.1 (else ray.init rewrites it to the machine's outside address)
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            "MPLBACKEND": "Agg",
            "RAYCOMPO_PROGRESS": "lines",
            "WANDB_SILENT": "true",
        }
        for name in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI"):
            self.env.pop(name, None)

    # Ray: one private instance on loopback, for every command that would start its own
    def address(self) -> str:
        if self.ray_address is None:
            code = ("import sys\n"
                    "from raycompo.engine.ray_start import ensure_ray\n"
                    "ensure_ray(None, include_dashboard=False, num_cpus=2, quiet=True)\n"
                    "import ray\n"
                    "print('ADDRESS', ray.get_runtime_context().gcs_address, flush=True)\n"
                    "sys.stdin.read()\n"
                    "ray.shutdown()\n")
            assert self.ray_error is None, self.ray_error
            for _ in range(3):  # Ray gives its raylet 30 s to register: a busy machine may need a retry
                log = self.root / "ray-start.log"
                with log.open("w") as err:
                    self.ray_process = subprocess.Popen([sys.executable, "-c", code], cwd=self.root, env=self.env,
                                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                                        text=True)
                line = self.ray_process.stdout.readline()  # ADDRESS ..., or '' when it ended
                if line.startswith("ADDRESS"):
                    self.ray_address = line.split()[1]
                    break
                try:
                    self.ray_process.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    self.ray_process.kill()
                    self.ray_process.communicate()
                self.ray_process = None
                self.ray_error = f"the docs tests' Ray instance did not start: {log.read_text()[-1500:]}"
            assert self.ray_address is not None, self.ray_error
        return self.ray_address

    def close(self) -> None:
        if self.ray_process is not None:
            try:
                self.ray_process.communicate("", timeout=60)
            except subprocess.TimeoutExpired:
                self.ray_process.kill()
                self.ray_process.wait(timeout=30)

    def command_line(self, p: Plan) -> list[str]:
        argv = [sys.executable if p.argv[0] == "python" else p.argv[0], *p.argv[1:]]
        if p.ray:
            argv += ["--address", self.address()]
        return argv

    def run(self, doc: Doc) -> Outcome:
        env, words = split_env(doc.text)
        p = plan(words, env)
        for path in reads(p.argv):
            self.provide(path, doc)
        p.argv = [self.resolve(w) for w in p.argv]
        key = tuple(f"{k}={v}" for k, v in sorted(p.env.items())) + tuple(p.argv)
        if key not in self.ran:
            argv = self.command_line(p)
            started = time.monotonic()
            try:
                proc = subprocess.run(argv, cwd=self.root, env={**self.env, **p.env}, capture_output=True,
                                      text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
                rc, output = proc.returncode, proc.stdout + proc.stderr
            except subprocess.TimeoutExpired as exc:
                rc = -1
                text = [o.decode(errors="replace") if isinstance(o, bytes) else (o or "") for o in (exc.stdout, exc.stderr)]
                output = f"{text[0]}{text[1]}\nTIMEOUT after {TIMEOUT_S} s"
            self.ran[key] = Outcome(argv, rc, output, time.monotonic() - started)
            log = self.root / "logs" / f"{doc.page.replace('/', '_')}-{doc.line}.log"
            log.parent.mkdir(exist_ok=True)
            log.write_text(f"$ {shlex.join(argv)}\n# exit {rc} after {self.ran[key].seconds:.1f} s\n{output}")
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
def workspace():
    """A folder of its own, not under pytest's basetemp: another pytest session on the
    machine prunes old basetemps, and these commands run for minutes."""
    root = Path(tempfile.mkdtemp(prefix="raycompo-docs-"))
    ws = Workspace(root)
    yield ws
    ws.close()
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(ws.ray_tmp, ignore_errors=True)


def test_the_pages_show_commands_to_run():
    assert len(RUNNABLE) >= 40
    assert {d.page for d in RUNNABLE} >= {"README.md", "docs/running.md", "docs/costs.md", "docs/system.md"}


@pytest.mark.parametrize("doc", RUNNABLE, ids=[f"{d.where()} {d.text[:80]}" for d in RUNNABLE])
def test_documented_command_runs(doc, workspace):
    workspace.run(doc)


@pytest.mark.parametrize("doc", SKIPPED_DOCS, ids=[f"{d.where()} {d.text[:80]}" for d in SKIPPED_DOCS])
def test_skipped_command(doc):
    pytest.skip(skip_reason(split_env(doc.text)[1]))


BUDGETED = [d for d in RUNNABLE if "--budget" in split_env(d.text)[1] and "--rounds" in split_env(d.text)[1]]


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
