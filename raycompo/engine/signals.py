"""SIGINT and SIGTERM end a run cleanly: both raise `Interrupted` in the main thread, the
runner marks the run 'interrupted' (its last checkpoint stays resumable) and the CLI
exits 130 / 143. Ray installs its own handlers when it starts, so the runner installs
these after Ray is up (and `ray_start.ensure_ray` makes SIGTERM raise `Interrupted` from
the first wait on Ray on).

Ray turns an exception raised by a signal handler while its C++ code waits (an actor
starting, `ray.get`) into a plain `KeyboardInterrupt`: `interruptible` turns that back
into the `Interrupted` of the signal received, and `exit_code` finds the signal for a
CLI that caught one outside such a block."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

_received: list[int] = []
"""Signals that `raise_interrupted` turned into Interrupted in this process, in order."""


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def raise_interrupted(signum: int, frame: object) -> None:
    """A signal handler: raise Interrupted(signum) (and remember the signal)."""
    _received.append(signum)
    raise Interrupted(signum)


def exit_code(exc: BaseException) -> int:
    """A CLI's exit status for an interruption: 128 + the signal (143 for SIGTERM), also
    when Ray turned the `Interrupted` into a plain KeyboardInterrupt; 130 otherwise. The
    signals seen so far are forgotten (a later Ctrl-C is a Ctrl-C)."""
    code = exc.exit_code if isinstance(exc, Interrupted) else 128 + (_received[-1] if _received else signal.SIGINT)
    forget()
    return code


def forget() -> None:
    """Forget the signals received so far: a run starting now is not interrupted by them
    (the runner calls it first; a long-lived process, e.g. a notebook, runs many)."""
    _received.clear()


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise Interrupted (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    seen = len(_received)
    old = {s: signal.signal(s, raise_interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    except Interrupted:
        raise
    except KeyboardInterrupt as exc:
        if len(_received) > seen:  # ours, turned into a plain KeyboardInterrupt by Ray
            raise Interrupted(_received[-1]) from exc
        raise
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM are held and raised as Interrupted when it ends
    (main thread only): a step that must not be cut in half (the run folder made and the
    observers that will mark it 'interrupted' set up) completes first."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    old = {s: signal.signal(s, lambda signum, frame: held.append(signum)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if held:
        raise_interrupted(held[0], None)


@contextlib.contextmanager
def sigterm_as_sigint(received: list[int]) -> Iterator[None]:
    """Within the block, SIGTERM does what SIGINT's handler of the moment does (Ray Tune's
    `fit` stops the experiment gracefully on the first SIGINT), and is appended to
    `received`; where SIGINT would raise KeyboardInterrupt, SIGTERM raises Interrupted."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: object) -> None:
        received.append(signum)
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler) and handler is not signal.default_int_handler:
            handler(signal.SIGINT, frame)
        else:
            raise_interrupted(signum, frame)

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
