"""The Ray that raycompo starts or joins (issue 19): loopback only, private, bounded waits,
SIGTERM always ends a command cleanly (143).

Each subprocess has a timeout and is killed (with its process group) if a test fails; the
runs use fractional CPUs of a 2-CPU machine. Only loopback addresses are contacted."""

from __future__ import annotations

import http.server
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from raycompo.engine import ray_start, signals
from tests.helpers import SMALL_DRO

SETS = [f"{k}={v}" for k, v in SMALL_DRO.items()]
RAY_RUN = ["--backend", "ray", "--threads", "1", "--quiet", "--task", "dro-mnist5k", "--algo", "fedavg",
           "--clients-per-actor", "2", "--cpus-per-actor", "0.25", "--checkpoint-every", "1", "--set", *SETS]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the with ends: nothing listens there


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return {**env, "PYTHONUNBUFFERED": "1", "RAY_DEDUP_LOGS": "0", "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", **extra}


def _start(module: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", module, *args], env=env or _env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _finish(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)


def _reap(proc: subprocess.Popen) -> None:
    """Whatever the test did: the command's process group is gone afterwards."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # Ray processes left in its group
    except ProcessLookupError:
        pass


def _rows(folder: Path) -> int:
    try:
        return max(0, len((folder / "metrics.csv").read_text().splitlines()) - 1)
    except FileNotFoundError:
        return 0


def _wait(predicate, proc: subprocess.Popen, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, (what, proc.communicate())
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.1)


# --- listening sockets of a process tree (from /proc: no extra dependency) ---------------


def _tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _address(hex_addr: str) -> tuple[str, int]:
    host, port = hex_addr.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        ip = ipaddress.IPv4Address(raw[::-1])
    else:  # four little-endian 32-bit words
        ip = ipaddress.IPv6Address(b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
    return str(ip), int(port, 16)


def _listening() -> dict[int, tuple[str, int]]:
    """inode -> (ip, port) of every TCP socket in LISTEN state (and bound UDP socket)."""
    found = {}
    for table, state in (("tcp", "0A"), ("tcp6", "0A"), ("udp", "07"), ("udp6", "07")):
        try:
            lines = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == state:
                found[int(f[9])] = _address(f[1])
    return found


def listening_sockets(root: int) -> list[tuple[int, str, str, int]]:
    """(pid, command, ip, port) of every listening socket of `root` and its descendants."""
    table = _listening()
    out = []
    for pid in _tree(root):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:80]
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inode = int(link[8:-1])
                if inode in table:
                    out.append((pid, cmd, *table[inode]))
    return out


def _loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    mapped = getattr(addr, "ipv4_mapped", None)
    return (mapped or addr).is_loopback


@pytest.mark.slow
def test_the_cli_s_own_ray_listens_on_loopback_only_and_ignores_ray_address(tmp_path):
    """A `--backend ray` run with its dashboard: every socket of the CLI, GCS, raylet,
    workers, dashboard, agents is on loopback. RAY_ADDRESS names a dead cluster (as a
    `ray start` that crashed leaves): without --address the run must not try it. SIGTERM
    mid-run: exit 143, status 'interrupted'."""
    out = tmp_path / "run"
    env = _env(RAY_ADDRESS=f"127.0.0.1:{_closed_port()}")
    proc = _start("raycompo.run", *RAY_RUN, "--rounds", "4000", "--out", str(out), env=env)

    def cmdline(pid: int) -> bytes:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:  # ended meanwhile
            return b""

    def dashboard_listens() -> bool:  # it starts once the actors are up (engine/dashboard_start.py)
        return any(b"dashboard/dashboard.py" in cmdline(pid) for pid, _, _, _ in listening_sockets(proc.pid))

    try:
        _wait(lambda: _rows(out) >= 2, proc, 400, "two rounds")
        _wait(dashboard_listens, proc, 120, "the dashboard listening")
        time.sleep(2)  # the dashboard agent and monitor are up by now; look again below
        socks = listening_sockets(proc.pid)
        assert any(cmd.startswith("ray::") or "raylet" in cmd for _, cmd, _, _ in socks), socks
        exposed = [s for s in socks if not _loopback(s[2])]
        assert exposed == [], exposed
        proc.send_signal(signal.SIGTERM)
        _, err = _finish(proc, 120)
        assert proc.returncode == 143, err
        assert "--resume" in err
        assert json.loads((out / "config.json").read_text())["status"] == "interrupted"
    finally:
        _reap(proc)


@pytest.mark.slow
def test_sigterm_during_actor_start_up_exits_143(tmp_path):
    out = tmp_path / "run"
    proc = _start("raycompo.run", *RAY_RUN, "--rounds", "50", "--out", str(out))
    try:
        # The run folder is written once Ray is up, before the placement check and the actors.
        _wait(lambda: (out / "config.json").exists(), proc, 300, "the run folder")
        proc.send_signal(signal.SIGTERM)
        _, err = _finish(proc, 120)
        assert proc.returncode == 143, err
        assert "Traceback" not in err
        assert json.loads((out / "config.json").read_text())["status"] == "interrupted"
    finally:
        _reap(proc)


class _Http(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def http_port():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Http)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.mark.slow
@pytest.mark.parametrize("command", [["raycompo.run", "--backend", "ray", "--rounds", "1"],
                                     ["raycompo.tune", "--space", "dro"]])
def test_an_address_that_is_not_ray_fails_within_the_timeout_and_leaves_no_folder(command, tmp_path, http_port):
    out = tmp_path / "out"
    t0 = time.monotonic()
    proc = _start(*command, "--address", f"127.0.0.1:{http_port}", "--out", str(out),
                  env=_env(RAYCOMPO_CONNECT_TIMEOUT="3"))
    try:
        _, err = _finish(proc, 120)
        assert proc.returncode == 2, err
        assert "not as a Ray cluster" in err and "Traceback" not in err
        assert time.monotonic() - t0 < 60
        assert not out.exists()  # nothing blocks the same --out next time
    finally:
        _reap(proc)


def test_sigterm_while_waiting_for_the_address_exits_143_and_leaves_no_folder(tmp_path):
    """A port that accepts TCP but never answers: the command waits (up to
    RAYCOMPO_CONNECT_TIMEOUT); SIGTERM ends it at once."""
    out = tmp_path / "out"
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        silent.settimeout(120)
        port = silent.getsockname()[1]
        proc = _start("raycompo.run", "--backend", "ray", "--rounds", "1", "--address", f"127.0.0.1:{port}",
                      "--out", str(out), env=_env(RAYCOMPO_CONNECT_TIMEOUT="300"))
        try:
            conn, _ = silent.accept()  # the probe is connected: it waits for an answer now
            conn.close()
            time.sleep(0.5)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            _, err = _finish(proc, 60)
            assert proc.returncode == 143, err
            assert time.monotonic() - t0 < 30
            assert not out.exists()
        finally:
            _reap(proc)


@pytest.mark.slow
def test_sigterm_stops_a_sweep_cleanly_with_143_and_the_resume_command(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text("task: dro-mnist5k\nrounds: 300\nalgorithms:\n  fedavg: {lr: [0.001, 0.01, 0.1], tau: [1, 5]}\n")
    out = tmp_path / "sweep"
    proc = _start("raycompo.tune", "--space", str(space), "--search", "grid", "--max-concurrent", "1",
                  "--num-cpus", "1", "--out", str(out), "--set", *SETS)
    try:
        _wait(lambda: (out / "sweep.json").exists(), proc, 300, "the sweep to start")
        time.sleep(8)  # a trial under way
        proc.send_signal(signal.SIGTERM)
        stdout, err = _finish(proc, 180)
        assert proc.returncode == 143, err[-3000:]
        assert f"--resume {out}" in err
        assert "Aborted" not in err and "core dumped" not in err and "*** " not in err, err[-3000:]
    finally:
        _reap(proc)


# --- in-process: what ensure_ray and the signal helpers do --------------------------------


class _Stop(Exception):
    pass


def _what_ray_init_sees(monkeypatch, *args, **kwargs) -> dict:
    """ensure_ray(*args, **kwargs) up to its ray.init: the arguments it passes, and Ray's
    single-machine switch (`flag`, `env`) at that moment."""
    import ray
    from ray._private import ray_constants

    seen: dict = {}

    def fake_init(**given):
        seen.update(given, flag=ray_constants.ENABLE_RAY_CLUSTER, env=os.environ.get(ray_start.LOCAL_ONLY_ENV))
        raise _Stop

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", fake_init)
    old_term = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(_Stop):
            ray_start.ensure_ray(*args, **kwargs)
    finally:
        signal.signal(signal.SIGTERM, old_term)
    return seen


def test_no_address_starts_a_private_local_ray_on_loopback(monkeypatch):
    from ray._private import ray_constants

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")
    flag = ray_constants.ENABLE_RAY_CLUSTER
    seen = _what_ray_init_sees(monkeypatch, None, include_dashboard=False, num_cpus=0.5)
    assert seen["address"] == "local" and seen["num_cpus"] == 0.5
    assert seen["_node_ip_address"] == "127.0.0.1" and seen["dashboard_host"] == "127.0.0.1"
    assert seen["flag"] is False and seen["env"] == "0"
    assert ray_constants.ENABLE_RAY_CLUSTER == flag  # restored


@pytest.mark.parametrize("address, loopback", [("127.0.0.1:6379", True), ("localhost:6379", True),
                                               ("[::1]:6379", True), ("10.1.2.3:6379", False),
                                               ("head.example:6379", False)])
def test_joining_a_loopback_cluster_keeps_this_driver_on_loopback(monkeypatch, address, loopback):
    """A second process joining raycompo's own Ray (loopback only) with --address: its
    node IP stays 127.0.0.1 (Ray would rewrite it to the machine's outside address, where
    the cluster cannot reach it, and ray.init then waits for minutes); other addresses are
    joined as Ray resolves them."""
    from ray._private import ray_constants

    monkeypatch.setattr(ray_start, "wait_for_address", lambda address, timeout_s: None)
    monkeypatch.delenv(ray_start.LOCAL_ONLY_ENV, raising=False)
    flag = ray_constants.ENABLE_RAY_CLUSTER
    seen = _what_ray_init_sees(monkeypatch, address)
    assert seen["address"] == address
    if loopback:
        assert seen["_node_ip_address"] == "127.0.0.1" and seen["flag"] is False and seen["env"] == "0"
    else:
        assert "_node_ip_address" not in seen and seen["flag"] == flag and seen["env"] is None
    assert ray_constants.ENABLE_RAY_CLUSTER == flag and ray_start.LOCAL_ONLY_ENV not in os.environ  # restored


def test_reproduce_starts_ray_through_ensure_ray(monkeypatch, tmp_path):
    import ray

    from raycompo.reproduce import runner

    calls = []

    def fake(address, **kwargs):
        calls.append((address, kwargs))
        raise _Stop

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray_start, "ensure_ray", fake)
    job = runner.Job.__new__(runner.Job)
    monkeypatch.setattr(runner, "is_done", lambda j: False)
    monkeypatch.setattr(runner, "plugin_classes", lambda jobs: {})
    with pytest.raises(_Stop):
        runner.run_jobs([job], workers=2, log=lambda m: None)
    assert calls == [(None, {"include_dashboard": False, "num_cpus": 2, "quiet": True})]


def test_a_keyboard_interrupt_made_by_ray_from_sigterm_becomes_interrupted():
    """Ray's C++ waits turn the handler's exception into a plain KeyboardInterrupt."""
    with pytest.raises(signals.Interrupted) as info:
        with signals.interruptible():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            except signals.Interrupted:
                raise KeyboardInterrupt from None  # what ray._raylet.check_signals does
    assert info.value.exit_code == 143
    assert signals.exit_code(KeyboardInterrupt()) == 143  # the last signal received


def test_a_signal_while_the_run_folder_is_made_marks_it_interrupted(tmp_path, monkeypatch):
    """SIGTERM just after config.json says 'running' (the CI flake of
    test_sigterm_during_actor_start_up_exits_143, made certain here): `signals.deferred`
    holds it until the observers that mark the folder exist, so it says 'interrupted'."""
    from raycompo.engine import run
    from raycompo.runfolder import results
    from tests.helpers import small_config

    made = results.RunWriter.__init__

    def made_then_signalled(self, *args, **kwargs):
        made(self, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # delivered here: held, not raised

    monkeypatch.setattr(results.RunWriter, "__init__", made_then_signalled)
    old = signal.signal(signal.SIGTERM, signals.raise_interrupted)  # as after Ray's start
    try:
        with pytest.raises(signals.Interrupted) as info:
            run(small_config("fedavg", rounds=2), out=tmp_path / "run")
    finally:
        signal.signal(signal.SIGTERM, old)
        signals.forget()
    assert info.value.exit_code == 143
    assert json.loads((tmp_path / "run" / "config.json").read_text())["status"] == "interrupted"


def test_deferred_holds_a_signal_until_the_block_ends():
    reached = []
    with pytest.raises(signals.Interrupted):
        with signals.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)
            reached.append("end of the block")
    assert reached == ["end of the block"]
    signals.forget()


def test_sigterm_as_sigint_calls_the_sigint_handler_of_the_moment():
    got, calls = [], []
    old = signal.signal(signal.SIGINT, lambda s, f: calls.append(s))  # as Tune's fit installs
    try:
        with signals.sigterm_as_sigint(got):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)
    finally:
        signal.signal(signal.SIGINT, old)
    assert got == [signal.SIGTERM] and calls == [signal.SIGINT]


DASHBOARD_CHILD = r"""
import json, time, urllib.request
import ray
import psutil  # Ray's bundled copy, on sys.path once ray is imported
from raycompo.engine import dashboard_start, ray_start
dashboard_start.DEFER_MAX_S = 600  # a slow machine must not reach the fallback start before `before`
t0 = time.perf_counter()
ray_start.ensure_ray(None, None)
init_s = time.perf_counter() - t0
time.sleep(1)
before = dashboard_start.url()  # deferred until the run's actors are up
dashboard_start.actors_started()
up = dashboard_start.wait(90)
url = dashboard_start.url()
time.sleep(3)  # serving for a while: the thread that started it has long returned from Ray's call
status = urllib.request.urlopen(url, timeout=30).status
pids = [p.process.pid for p in ray._private.worker._global_node.all_processes["dashboard"]]
ray.shutdown()
time.sleep(1)
alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
print("RESULT " + json.dumps({"init_s": init_s, "before": before, "up": up, "url": url, "status": status, "pids": pids, "alive": alive}))
"""


@pytest.mark.slow
def test_the_dashboard_starts_beside_ray_and_ends_with_it():
    """engine/dashboard_start.py: ray.init does not wait for the dashboard, which starts once
    the run's actors are up (`actors_started`), comes up on loopback, answers HTTP, and is a
    process Ray knows and ends at shutdown."""
    proc = subprocess.Popen([sys.executable, "-c", DASHBOARD_CHILD], env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = _finish(proc, 240)
    finally:
        _reap(proc)
    line = next((x for x in out.splitlines() if x.startswith("RESULT ")), None)
    assert line, err[-2000:]
    r = json.loads(line[len("RESULT "):])
    assert r["before"] is None  # not started while the actors would start
    assert r["up"] and r["url"].startswith("http://127.0.0.1:") and r["status"] == 200
    assert len(r["pids"]) == 1 and r["alive"] == []
