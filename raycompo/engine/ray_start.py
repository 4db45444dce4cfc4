"""Starting or joining Ray for a run: one place, with a time limit and a clear message.

Without an address, raycompo starts a *private* local Ray (`ray.init(address="local")`):
it never joins a cluster that `ray start` left on the machine (RAY_ADDRESS,
/tmp/ray/ray_current_cluster), alive or dead. Every listening socket of that instance is
on the loopback interface: GCS, raylet, object manager, the workers' and this process's
gRPC servers, the dashboard and its agent, the runtime-env agent, the metrics export port
and the autoscaler monitor. Ray decides each of those binds from the *node IP* (it binds
to loopback when the node IP is a loopback address, to all interfaces or to the node IP
otherwise), and on Linux `ray.init` rewrites a loopback `_node_ip_address` to the
machine's outside address (ray/_private/services.py, `resolve_ip_for_localhost` ->
`get_node_ip_address`) unless Ray's own switch `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`
(`ray_constants.ENABLE_RAY_CLUSTER`) is off, the single-machine mode Ray uses on macOS
and Windows. `_start_local` turns it off while Ray starts. To serve other machines, start
a cluster yourself (`ray start --head` or `ray up`) and join it with `--address`.

With an address, the address is probed first (TCP, then a gRPC health check that Ray's
GCS answers), so an address where nothing or something else answers fails with one
message within RAYCOMPO_CONNECT_TIMEOUT seconds instead of Ray's minutes of retries.
From the first wait on Ray on, SIGTERM raises `signals.Interrupted` in the main thread
(SIGINT raises KeyboardInterrupt, as always): a CLI ends cleanly with exit 143 / 130.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import sys
import threading
import time

from raycompo.configuration import plugins
from raycompo.engine import dashboard_start
from raycompo.engine.signals import Interrupted, raise_interrupted
from raycompo.errors import ConfigError

CONNECT_TIMEOUT_S = float(os.environ.get("RAYCOMPO_CONNECT_TIMEOUT", "30"))
LOCAL_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch (ray/_private/ray_constants.py) that keeps a node's IP on loopback."""


def _split(address: str) -> tuple[str, int] | None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _resolve(address: str) -> str:
    """'auto' (and a bare None-like value) as Ray resolves it: RAY_ADDRESS, or the
    address file of the cluster `ray start` left on this machine."""
    if address != "auto":
        return address
    try:
        from ray._private.services import canonicalize_bootstrap_address

        found = canonicalize_bootstrap_address("auto")
    except (ConnectionError, ValueError) as exc:
        raise ConfigError(f"--address auto: {exc}".strip()) from None
    except Exception:  # a Ray whose internals moved: let ray.init resolve it
        return address
    return found or address


def _grpc_answers(address: str, timeout_s: float) -> str | None:
    """None when a gRPC server (Ray's GCS) answers a health check at `address` within
    `timeout_s`; otherwise what went wrong."""
    import grpc

    with grpc.insecure_channel(address) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        try:
            check(b"", timeout=timeout_s)
            return None
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                return None  # a Ray with token authentication: ray.init says what is missing
            return f"{exc.code().name}: {exc.details()}"


def wait_for_address(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise ConfigError unless a Ray cluster (its GCS: TCP, then a gRPC health check)
    answers at `address` within `timeout_s` (Ray itself retries a dead address for many
    minutes, and an address where something else answers for ever). 'ray://' addresses
    (Ray Client) are left to Ray."""
    target = _resolve(address)
    parts = _split(target)
    if parts is None:
        return  # 'ray://...' or a form Ray resolves itself
    deadline = time.monotonic() + timeout_s
    while True:
        left = max(0.1, deadline - time.monotonic())
        try:
            with socket.create_connection(parts, timeout=min(5.0, left)):
                pass
            problem = _grpc_answers(target, min(5.0, left))
            if problem is None:
                return
            what = f"something answers there, but not as a Ray cluster ({problem})"
        except OSError as exc:
            what = f"no Ray cluster answers ({exc.strerror or exc})"
        if time.monotonic() >= deadline:
            shown = address if target == address else f"{address} ({target})"
            raise ConfigError(
                f"--address {shown}: {what} after {timeout_s:.0f} s (RAYCOMPO_CONNECT_TIMEOUT); "
                "start one with `ray start --head` (or `ray up cluster.yaml`) or leave --address out to run locally"
            ) from None
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


def ensure_ray(address: str | None = None, include_dashboard: bool | None = None, namespace: str | None = None,
               timeout_s: float | None = None, num_cpus: float | None = None, quiet: bool = False,
               num_gpus: float | None = None) -> None:
    """Join the cluster at `address` ('auto': the one on this machine), or, without one,
    start a private local Ray whose sockets are all on loopback (with `num_cpus` CPUs and
    `num_gpus` GPUs: default all it finds); no-op when Ray is already initialized in this process. `quiet`: workers'
    output and Ray's INFO lines stay out of this terminal (sweeps print one line per
    trial instead).

    Raises ConfigError when the cluster does not answer within `timeout_s` (default
    RAYCOMPO_CONNECT_TIMEOUT, 30 s) and `signals.Interrupted` on SIGINT / SIGTERM while
    waiting. Afterwards SIGTERM raises `Interrupted` in this process (Ray's own handler
    would `sys.exit(15)` wherever the main thread is)."""
    import ray
    import ray.cloudpickle

    plugins.add_pickler(ray.cloudpickle.register_pickle_by_value)  # the user's code travels to the workers
    if ray.is_initialized():
        return
    timeout_s = CONNECT_TIMEOUT_S if timeout_s is None else timeout_s
    logs: dict = {"log_to_driver": not quiet}
    if quiet:
        os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
        logs.update(configure_logging=True, logging_level="WARNING")
    _sigterm_interrupts()
    if address:
        wait_for_address(address, timeout_s)
        if _is_loopback(_resolve(address)):
            # a cluster on loopback only (raycompo's own, or `ray start --node-ip-address
            # 127.0.0.1`): this driver's sockets must be there too, or the cluster's
            # processes cannot reach them and ray.init waits for minutes
            logs["_node_ip_address"] = "127.0.0.1"
        try:
            with _loopback_kept(logs.get("_node_ip_address") is not None):
                _init(ray, address=address, namespace=namespace, **logs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"could not join the Ray cluster at --address {address}: {exc}") from None
        return
    _start_local(ray, include_dashboard=include_dashboard, namespace=namespace, num_cpus=num_cpus, num_gpus=num_gpus,
                 **logs)


def _start_local(ray, **kwargs) -> None:
    """A fresh Ray on this machine only (never one that `ray start` left running)."""
    with _loopback_kept(), dashboard_start.in_background():  # the raylet and the run's actors do not wait for it
        _init(ray, address="local", dashboard_host="127.0.0.1", _node_ip_address="127.0.0.1", **kwargs)
    shown = dashboard_start.url() is not None  # ray.init printed it: the dashboard was up first
    if not shown and kwargs.get("log_to_driver", True) and kwargs.get("include_dashboard") is not False:
        threading.Thread(target=_announce_dashboard, name="raycompo-dashboard-url", daemon=True).start()


def _is_loopback(address: str) -> bool:
    """Whether a 'host:port' address names this machine's loopback interface."""
    parts = _split(address)
    if parts is None:
        return False
    try:
        return ipaddress.ip_address(parts[0]).is_loopback
    except ValueError:
        return parts[0] == "localhost"


@contextlib.contextmanager
def _loopback_kept(on: bool = True):
    """While Ray starts or joins: a `_node_ip_address` on loopback stays there (Ray's
    single-machine switch, off otherwise on Linux: see the module's docstring)."""
    if not on:
        yield
        return
    from ray._private import ray_constants

    saved_flag = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    saved_env = os.environ.get(LOCAL_ONLY_ENV)
    ray_constants.ENABLE_RAY_CLUSTER = False  # read by services.get_node_ip_address in this process
    os.environ[LOCAL_ONLY_ENV] = "0"  # and in the processes Ray starts (ray_constants reads it at import)
    try:
        yield
    finally:
        if saved_flag is not None:
            ray_constants.ENABLE_RAY_CLUSTER = saved_flag
        if saved_env is None:
            os.environ.pop(LOCAL_ONLY_ENV, None)
        else:
            os.environ[LOCAL_ONLY_ENV] = saved_env


def _announce_dashboard() -> None:
    """One line on stderr once the dashboard (started in the background) answers."""
    if dashboard_start.wait() and dashboard_start.url():
        print(f"raycompo: Ray dashboard at {dashboard_start.url()}", file=sys.stderr, flush=True)


def _init(ray, **kwargs) -> None:
    """ray.init; SIGTERM during it or afterwards raises Interrupted (ray.init installs a
    handler that calls sys.exit(15))."""
    try:
        ray.init(**kwargs)
    except SystemExit as exc:
        if exc.code == signal.SIGTERM:
            raise Interrupted(signal.SIGTERM) from None
        raise
    finally:
        _sigterm_interrupts()


def _sigterm_interrupts() -> None:
    """SIGTERM raises Interrupted in the main thread, from now on (as SIGINT raises
    KeyboardInterrupt); set before ray.init and again after it replaced it."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, raise_interrupted)
