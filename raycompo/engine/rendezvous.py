"""A rendezvous of P threads: each brings a request, and once all have, one answer is computed
for them all (a population's trials meet here at every exchange: engine/population.py). The
answer runs in one thread of the rendezvous' own (`answerer`), not in whichever member came
last: the batched work then allocates from one allocator arena (glibc keeps freed heap per
arena, so P answering threads held up to P heaps: measured by `bench population --memory`).

A thread that is done (its run ended, diverged or failed) `leave`s; those still waiting are
then answered without it. A thread that waits elsewhere for a while `step_aside`s and
`step_back`s (the same, for a while). Nothing waits forever: a wait longer than `timeout` seconds
raises `RendezvousTimeout`, naming who never came; `cancel` wakes every waiting thread
with the given exception (an interrupted population).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

ANSWERER_WAKE_S = 60.0
"""How often the answering thread wakes while no set of requests is complete."""


class RendezvousTimeout(RuntimeError):
    """A member waited longer than the rendezvous' timeout for the others."""


class Rendezvous:
    """`answer({member: request}) -> {member: result or exception}` is called, in the
    rendezvous' answering thread, with the requests of every member still taking part. The
    thread starts with the first call and ends once every member has left or on `cancel`."""

    def __init__(self, members: int, answer: Callable[[dict[int, Any]], dict[int, Any]], timeout: float = 3600.0):
        self.answer = answer
        self.timeout = timeout
        self.active = set(range(members))
        self.pending: dict[int, Any] = {}
        self.results: dict[int, Any] = {}
        self.cancelled: BaseException | None = None
        self.cond = threading.Condition()
        self.answerer: threading.Thread | None = None
        self.aside: set[int] = set()

    def call(self, member: int, request: Any) -> Any:
        """Member `member`'s answer to `request`, once every active member has brought one
        (or left); an exception answered for it is raised here."""
        with self.cond:
            if self.cancelled is not None:
                raise self.cancelled
            self.pending[member] = request
            self._start_answerer()
            self.cond.notify_all()
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
            self.cond.notify_all()

    def step_aside(self, member: int) -> None:
        """Member `member` waits elsewhere for a while (tune/member_asha.py: its turn at a
        rung): the others are answered without it until it `step_back`s."""
        with self.cond:
            if member in self.active:
                self.active.discard(member)
                self.aside.add(member)
                self.cond.notify_all()

    def step_back(self, member: int) -> None:
        """Member `member`, aside, takes part again from its next call."""
        with self.cond:
            if member in self.aside:
                self.aside.discard(member)
                self.active.add(member)

    def cancel(self, exc: BaseException) -> None:
        """Every waiting member (and any that comes) raises `exc`."""
        with self.cond:
            self.cancelled = exc
            self.cond.notify_all()

    def _start_answerer(self) -> None:
        if self.answerer is None:
            self.answerer = threading.Thread(target=self._answer_loop, name="raycompo-rendezvous", daemon=True)
            self.answerer.start()

    def _complete(self) -> bool:
        return bool(self.pending) and self.active <= set(self.pending)

    def _answer_loop(self) -> None:
        """Answer each complete set of requests, until every member has left or a cancel."""
        with self.cond:
            while True:
                if not self.cond.wait_for(lambda: self._complete() or not (self.active or self.aside)
                                          or self.cancelled is not None,
                                          ANSWERER_WAKE_S):
                    continue  # members still computing (each of their waits has its own timeout)
                if not self._complete():
                    return  # every member left, or cancelled
                requests, self.pending = self.pending, {}
                try:
                    results = self.answer(requests)
                except BaseException as exc:  # every member of this round hears of it
                    results = {m: exc for m in requests}
                self.results.update(results)
                self.cond.notify_all()
