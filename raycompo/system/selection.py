"""Selection policies: how a round's cohort of m is chosen among the clients online.

A policy sees the system through a `SelectionView` (the run's `System`): it draws online
candidates, asks the clock's prediction of each one's round and when each one goes
offline, and says whom it keeps and whom it drops (with the work each wasted); the view
moves the clock and the counters. The built-in policy:

* `deadline` (over-selection, as production federated learning does it; Bonawitz et al.
  2019, "Towards federated learning at scale"): `ceil(over_selection * m)` online
  candidates; the m predicted to report first are kept, provided the m-th is within
  `deadline_s`. A candidate whose online interval ends before it would finish leaves
  mid-round: it never reports (its work until it left is wasted). When fewer than m would
  report in time the attempt is abandoned (it costs the deadline, or, without one, until
  the last candidate reported or left) and drawn again, at most `max_attempts` times in a
  row. The algorithm sees exactly m clients (its maths, e.g. dividing by len(cohort), is
  unchanged); the others are reported as dropped.

Your own policy is one file: a subclass of `SelectionPolicy` with a `name`, a `Settings`
dataclass (its fields are the YAML keys of the profile's `selection` section beside
`policy`) and `select(m, view)`; a profile names it `policy: my_policy.py:MyPolicy` (or
`package.module:Class`, or an entry point of the group `raycompo.selection`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from raycompo.errors import ConfigError
from raycompo.system.availability import bounded
from raycompo.system.deadline import candidates_for, choose_many
from raycompo.system.ranges import RANGES

MAX_ATTEMPTS = 1000
"""The most abandoned rounds in a row `selection.max_attempts` may allow: each attempt
draws a cohort again, so a deadline no client meets is reported within bounded work."""


def integer(low: int, high: int | None = None) -> dict[str, Any]:
    """A settings field that must be an integer in [low, high] (None: no highest), written
    in any form of an integral number (20, 20.0, '1e3'); read by the profile's checks."""
    return {"integer": low, "integer_max": high}


class SelectionView(Protocol):
    """What a selection policy sees of the system at the start of a round (`System`)."""

    profile_name: str
    """The profile's name (for messages)."""
    round: int
    """The round being selected, 1-based."""
    now: float
    """Simulated seconds now."""
    always: bool
    """Every client always online (the availability model's `always`)."""
    population_size: int
    """How many clients can ever be online (all n, or a trace's clients)."""

    def plain_draw(self, m: int) -> list[int]:
        """The engine's own uniform draw of m clients (the cohort of a run without --system)."""

    def candidates(self, k: int, m: int, attempt: int) -> tuple[list[int], float]:
        """k distinct candidates online at `now`, drawn uniformly (keyed by seed, round,
        stream, attempt); when too few are online, the first to check in, and the time the
        last of them does. ConfigError when fewer than m can ever be."""

    def predict_many(self, clients: list[int]) -> list[float]:
        """The clock's predicted seconds of this round's work for each client."""

    def online_until_many(self, clients: list[int], t: float) -> list[float]:
        """When each client's online interval holding t ends (inf: it never leaves)."""

    def wait_until(self, t: float) -> None:
        """The clock moves to t (waiting for check-ins counts)."""

    def advance(self, seconds: float) -> None:
        """The clock moves by `seconds` (an abandoned attempt)."""

    def drop(self, c: int, wasted_s: float, left: bool) -> None:
        """Candidate c is not used this round; it worked `wasted_s` seconds for nothing
        (`left`: it went offline before it finished)."""

    def drop_many(self, clients: list[int], wasted_s: list[float], left: list[bool]) -> None:
        """`drop` of each candidate of `clients`, in that order, at once."""

    def keep(self, clients: list[int]) -> list[int]:
        """The cohort (sorted ids): counted as selected, and returned."""


class SelectionPolicy:
    """How a cohort of m is chosen: the base of every policy (a plugin subclasses it)."""

    name = ""

    @dataclass(frozen=True)
    class Settings:
        """No setting."""

        def check(self, where: str) -> None:
            """Raise ConfigError (naming `where`) for settings that cannot run together."""

    @classmethod
    def create(cls, settings: Any, seed: int) -> SelectionPolicy:
        """The policy of one run: `cls(settings, seed)` unless overridden."""
        return cls(settings, seed)

    def __init__(self, settings: Any, seed: int):
        self.settings = settings
        self.seed = seed

    @property
    def plain(self) -> bool:
        """With every client always online, the cohort is the engine's own draw (the same
        clients as a run without --system)."""
        return False

    def select(self, m: int, view: SelectionView) -> list[int]:
        raise NotImplementedError(f"selection policy {type(self).__name__} must define select(m, view)")


class Deadline(SelectionPolicy):
    """Over-selection and a deadline (see the module docstring)."""

    name = "deadline"

    @dataclass(frozen=True)
    class Settings:
        over_selection: float = field(default=1.0, metadata=bounded(1.0, 100.0, strict=False))
        """Candidates per member of the cohort: ceil(over_selection * m) are drawn."""
        deadline_s: float | None = field(default=None, metadata=bounded(*RANGES["deadline_s"]))
        """Seconds within which the m-th member must be predicted to report (None: none)."""
        max_attempts: int = field(default=20, metadata=integer(1, MAX_ATTEMPTS))
        """Rounds abandoned in a row (fewer than m candidates report in time) before the run
        stops with an error: a deadline no client meets (at most `MAX_ATTEMPTS`)."""

        def check(self, where: str) -> None:
            pass

    @property
    def plain(self) -> bool:
        return self.settings.over_selection == 1.0 and self.settings.deadline_s is None

    def select(self, m: int, view: SelectionView) -> list[int]:
        s = self.settings
        if self.plain and view.always:
            return view.keep(view.plain_draw(m))
        fastest = math.inf
        for attempt in range(s.max_attempts):
            k = candidates_for(m, s.over_selection, view.population_size)
            candidates, start = view.candidates(k, m, attempt)
            view.wait_until(start)  # waiting for check-ins counts
            ids = np.array(candidates, dtype=np.int64)
            predicted = np.array(view.predict_many(candidates), dtype=np.float64)
            # how long each stays online from `start` (a candidate that checked in earlier and left
            # before the last one checked in is gone at the round's start: 0 s, never negative)
            stays = (np.full(len(ids), math.inf) if view.always
                     else np.maximum(np.array(view.online_until_many(candidates, start), dtype=np.float64) - start, 0.0))
            # a candidate that goes offline before it finishes never reports
            reports = np.where(predicted <= stays, predicted, math.inf)
            kept, dropped, close = choose_many(ids, reports, m, s.deadline_s)
            if not len(kept) and s.deadline_s is None:  # until the last one reported or left
                close = float(np.minimum(predicted, stays).max())
            # each dropped one worked until the round closed, or it left
            p, st = predicted[dropped], stays[dropped]
            view.drop_many(ids[dropped].tolist(), np.minimum(np.minimum(p, st), close).tolist(),
                           (st < np.minimum(p, close)).tolist())
            if len(kept):
                return view.keep(ids[kept].tolist())
            fastest = min(fastest, float(predicted.min()))  # (for the message when every attempt fails)
            view.advance(close)
        deadline = f"within deadline_s={s.deadline_s:g} s" if s.deadline_s is not None else "before going offline"
        raise ConfigError(
            f"system profile {view.profile_name!r}: round {view.round} was abandoned {s.max_attempts} times in a "
            f"row: fewer than {m} of the candidates were predicted to finish {deadline} (the fastest was "
            f"predicted to take {fastest:.3g} s). Raise selection.deadline_s or selection.over_selection")


BUILTINS: dict[str, type[SelectionPolicy]] = {cls.name: cls for cls in (Deadline,)}
"""The built-in selection policies by name: a profile's `selection.policy`."""
