"""Run `python -m raycompo.X ...` commands without paying for Python's start each time.

A command line's own process costs about 6 s here before it does anything (`import torch`
alone is 5.8 s of a one-round run's 8.3 s). `ForkServer` starts one process that imports
torch, Ray, pandas and raycompo's command lines once, and forks a child per command: the
child has a fresh process of its own (its folder, environment, signal handlers, exit code,
stdout and stderr in a log file, its own Ray driver), exactly as `python -m` would give it,
but starts in milliseconds. The parent never computes anything and never connects to Ray,
so nothing a fork would copy half-done (thread pools, sockets) exists when it forks.

Every wait has a limit: a command past its `timeout` is killed with its process group and
reported as exit -9; a server that does not answer is killed and the caller told why.

Run as `python -m tests.fork_server`: it reads one JSON request per line on stdin
({"argv", "cwd", "env", "log", "timeout"}) and answers one JSON line on stdout
({"rc", "seconds"}).
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

PRELOAD = ("torch", "numpy", "pandas", "ray", "raycompo.api", "raycompo.run", "raycompo.tune.cli",
           "raycompo.reproduce.runner", "raycompo.plot", "raycompo.bench", "raycompo.engine.runner",
           "matplotlib")
"""Imported once by the server (importing only: no module of these starts a thread or a
connection when imported)."""

START_TIMEOUT_S = 180.0
"""The server's imports on a busy 2-core machine (about 10 s idle)."""


def _child(request: dict) -> None:
    """In the forked child: become the command, then leave without returning."""
    import atexit
    import runpy

    code = 1
    try:
        os.setsid()  # its own process group: a timeout kills it and whatever it started
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        argv = request["argv"]
        assert argv[1] == "-m", argv
        sys.argv = [argv[2], *argv[3:]]
        sys.path[0] = request["cwd"]  # as `python -m` puts the working folder first
        sys.modules.pop(argv[2], None)  # run afresh as __main__, as `python -m` does
        try:
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, int) and exc.code is not None:
                print(exc.code, file=sys.stderr)
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 - reported in the log as a traceback, as python would
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _wait(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            return -9
        time.sleep(0.02)


def serve() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        started = time.monotonic()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request)
        rc = _wait(pid, float(request["timeout"]))
        print(json.dumps({"rc": rc, "seconds": time.monotonic() - started}), flush=True)


class ForkServerError(RuntimeError):
    """The fork server did not start or stopped answering."""


class ForkServer:
    """The test side: starts the server (lazily), sends it commands, stops it."""

    def __init__(self, cwd: Path, env: dict[str, str]):
        self.cwd, self.env = cwd, env
        self.process: subprocess.Popen | None = None
        self.stderr_log = cwd / "fork-server.log"

    def _readline(self, timeout: float, what: str) -> dict:
        assert self.process is not None and self.process.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.process.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                self.close(kill=True)
                raise ForkServerError(f"the fork server did not answer {what} within {timeout:.0f} s "
                                      f"(its log: {self.stderr_log})")
        line = self.process.stdout.readline()
        if not line:
            self.close(kill=True)
            raise ForkServerError(f"the fork server ended while {what}: {self.stderr_log.read_text()[-2000:]}")
        return json.loads(line)

    def start(self) -> None:
        if self.process is not None:
            return
        root = Path(__file__).resolve().parents[1]
        with self.stderr_log.open("w") as err:
            self.process = subprocess.Popen([sys.executable, "-m", "tests.fork_server"], cwd=root, env=self.env,
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)
        self._readline(START_TIMEOUT_S, "its imports")

    def run(self, argv: list[str], env: dict[str, str], log: Path, timeout: float) -> tuple[int, float]:
        """(exit code, seconds) of `python -m ...` argv, run in the server's folder with `env`;
        its output is in `log`. -9: killed at `timeout`."""
        self.start()
        assert self.process is not None and self.process.stdin is not None
        request = {"argv": argv, "cwd": str(self.cwd), "env": env, "log": str(log), "timeout": timeout}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self._readline(timeout + 60, f"on {' '.join(argv[:4])}")
        return int(answer["rc"]), float(answer["seconds"])

    def close(self, kill: bool = False) -> None:
        if self.process is None:
            return
        process, self.process = self.process, None
        if not kill:
            try:
                process.communicate("", timeout=30)
                return
            except subprocess.TimeoutExpired:
                pass
        process.kill()
        process.wait(timeout=30)


if __name__ == "__main__":
    serve()
