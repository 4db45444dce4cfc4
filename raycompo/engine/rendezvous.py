"""A rendezvous of P threads: each brings a request, the last to arrive answers them all at
once (a population's trials meet here at every exchange: engine/population.py).

A thread that is done (its run ended, diverged or failed) `leave`s; those still waiting are
then answered without it. Nothing waits forever: a wait longer than `timeout` seconds
raises `RendezvousTimeout`, naming who never came; `cancel` wakes every waiting thread
with the given exception (an interrupted population).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class RendezvousTimeout(RuntimeError):
    """A member waited longer than the rendezvous' timeout for the others."""


class Rendezvous:
    """`answer({member: request}) -> {member: result or exception}` is called, in the thread
    of the last member to arrive, with the requests of every member still taking part."""

    def __init__(self, members: int, answer: Callable[[dict[int, Any]], dict[int, Any]], timeout: float = 3600.0):
        self.answer = answer
        self.timeout = timeout
        self.active = set(range(members))
        self.pending: dict[int, Any] = {}
        self.results: dict[int, Any] = {}
        self.cancelled: BaseException | None = None
        self.cond = threading.Condition()

    def call(self, member: int, request: Any) -> Any:
        """Member `member`'s answer to `request`, once every active member has brought one
        (or left); an exception answered for it is raised here."""
        with self.cond:
            if self.cancelled is not None:
                raise self.cancelled
            self.pending[member] = request
            self._answer_if_complete()
            if not self.cond.wait_for(lambda: member in self.results or self.cancelled is not None, self.timeout):
                missing = sorted(self.active - set(self.pending))
                self.pending.pop(member, None)  # its request is not answered later
                raise RendezvousTimeout(f"member {member} of the population waited {self.timeout:.0f} s for members "
                                        f"{missing} (their runs neither exchanged nor ended)")
            if member not in self.results:
                self.pending.pop(member, None)
                raise self.cancelled  # type: ignore[misc]
            result = self.results.pop(member)
        if isinstance(result, BaseException):
            raise result
        return result

    def leave(self, member: int) -> None:
        """Member `member` takes no further part; the others are answered without it."""
        with self.cond:
            self.active.discard(member)
            self.pending.pop(member, None)
            self._answer_if_complete()

    def cancel(self, exc: BaseException) -> None:
        """Every waiting member (and any that comes) raises `exc`."""
        with self.cond:
            self.cancelled = exc
            self.cond.notify_all()

    def _answer_if_complete(self) -> None:
        if not self.pending or not self.active <= set(self.pending):
            return
        requests, self.pending = self.pending, {}
        try:
            results = self.answer(requests)
        except BaseException as exc:  # every member of this round hears of it
            results = {m: exc for m in requests}
        self.results.update(results)
        self.cond.notify_all()
