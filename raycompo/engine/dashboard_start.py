"""Ray's dashboard starts beside the rest of a local Ray, not before it.

`ray.init` starts the GCS, then the dashboard's API server, and polls until that server
has published its address (about 3 s on 2 busy cores) before it starts the raylet; only
then can a run start its actors. Nothing a run does needs the dashboard, so while a
private local Ray starts (engine/ray_start.py), Ray's own `Node.start_api_server` runs
unchanged in a thread, and only once the run's driver and hosts are up (`actors_started`,
called by `engine/driver.start_driver`; at the latest DEFER_MAX_S after `ray.init`): on 2 cores the
dashboard's own start (its imports, ~3 s of CPU) would otherwise slow the actors' start
by as much. The dashboard comes up a few seconds after the actors at its usual address
(127.0.0.1:8265), which `python -m raycompo.run` prints once it answers. A run that ends
before its dashboard began to start never starts it; one that ends while it is starting
waits for it at shutdown (Ray must know the process to end it).

The thread that started the dashboard stays alive (parked) until Ray shuts down: Ray
starts its processes with the kernel's parent-death signal, which Linux sends when the
*thread* that forked the process ends, so a finished thread would take the dashboard with
it. Before Ray shuts down (an `atexit` hook registered after Ray's, so it runs first, and a
wrapped `ray.shutdown`), a dashboard still starting is waited for, so the dashboard process
is always one Ray knows and ends. A Ray whose internals moved (no `Node.start_api_server`)
starts as usual.
"""

from __future__ import annotations

import atexit
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

JOIN_TIMEOUT_S = 60.0
"""How long shutting down waits for a dashboard still starting (Ray's own limit is 60 s)."""

DEFER_MAX_S = 10.0
"""How long the dashboard waits for the run's actors (`actors_started`) before it starts anyway."""

_go = threading.Event()
"""Set when the run's driver and hosts are up (or Ray shuts down): a deferred dashboard may start."""
_cancelled = threading.Event()
"""Set when Ray shuts down before the dashboard began to start: it does not start at all."""

_started: list[threading.Event] = []
"""One event per dashboard being started in this process, set once it has started (or failed)."""
_release = threading.Event()
"""Set when Ray has shut down: the parked threads end."""
_hooked = False


@contextmanager
def in_background() -> Iterator[None]:
    """Within this block, a local `ray.init` starts its dashboard in a thread."""
    try:
        from ray._private.node import Node

        original = Node.start_api_server
    except (ImportError, AttributeError):
        yield
        return

    def start_later(node, **kwargs):
        started = threading.Event()
        _started.append(started)
        _release.clear()
        _go.clear()
        _cancelled.clear()
        threading.Thread(target=_start, args=(original, node, kwargs, started), name="raycompo-dashboard",
                         daemon=True).start()

    Node.start_api_server = start_later
    try:
        yield
    finally:
        Node.start_api_server = original
        _hook_shutdown()


def _start(original, node, kwargs, started: threading.Event) -> None:
    _go.wait(DEFER_MAX_S)  # on 2 cores its start would slow the actors' imports by seconds
    try:
        if not _cancelled.is_set():
            original(node, **kwargs)
    except Exception as exc:  # the run goes on without a dashboard, as Ray's default would
        print(f"raycompo: the Ray dashboard did not start: {exc}", file=sys.stderr)
    finally:
        started.set()
    _release.wait()  # parked: the dashboard process lives as long as this thread (see above)


def actors_started() -> None:
    """The run's driver and hosts are up: a dashboard deferred until then starts now (at the
    latest DEFER_MAX_S after `ray.init`, for callers that never say)."""
    _go.set()


def wait(timeout_s: float = JOIN_TIMEOUT_S) -> bool:
    """Wait until a dashboard being started has started (or failed); whether none is still
    starting."""
    for started in list(_started):
        started.wait(timeout_s)
    _started[:] = [e for e in _started if not e.is_set()]
    return not _started


def _cancel_and_wait() -> None:
    _cancelled.set()
    _go.set()
    wait()


def url() -> str | None:
    """The dashboard's address once it has started (None before, or without one)."""
    try:
        import ray

        node = ray._private.worker._global_node
        found = node.webui_url if node is not None else None
    except Exception:
        return None
    return f"http://{found}" if found and "://" not in found else found


def _hook_shutdown() -> None:
    """Join a starting dashboard before Ray's own exit hook shuts Ray down (atexit runs hooks
    last-registered first, and ray.init has registered Ray's by now); `ray.shutdown` is
    wrapped to wait as well."""
    global _hooked
    if _hooked:
        return
    _hooked = True
    atexit.register(_cancel_and_wait)
    import ray

    shutdown = ray.shutdown

    def shutdown_after_dashboard(*args, **kwargs):
        _cancelled.set()  # a dashboard not yet starting never will
        _go.set()
        wait()
        try:
            return shutdown(*args, **kwargs)
        finally:
            _release.set()

    shutdown_after_dashboard.__wrapped__ = shutdown  # type: ignore[attr-defined]
    ray.shutdown = shutdown_after_dashboard
