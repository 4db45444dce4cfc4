"""The searcher of a sweep with `--population P` (issue 42): each Tune trial is a population.

`PopulationSearcher` wraps the sweep's searcher (`PerAlgorithmSearcher`: a grid's points or
Optuna's samples, `BatchedOptunaSearch` asking P at a time). Asked for a Tune trial, it asks
the wrapped searcher for configurations, each under a member id of its own, until P of one
structure (`population_key`: the same algorithm, task and shapes) are there (or it has none
ready, or `PENDING` x P wait), and hands Tune the fullest group, first seen first, as one
config `{"algorithm": algo, "population": [point, ...]}`; the others wait for the next trials. The trainable (`tune/trainable.py`:
`run_population_trial`) runs them as one population and reports each member's rows with its
index (`member`); each member's last row goes back to the wrapped searcher as that member's
result, so Optuna is told each configuration's own value, as without populations.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from ray.tune.search import Searcher

MEMBERS = "population"
"""The key of a population trial's config: its members' points (each without `algorithm`)."""

PENDING = 4
"""At most this many times P configurations are asked ahead to fill a population of one
structure (the others wait for the next trials)."""

MEMBER = "member"
"""The key of a report of a population trial: the index of the member whose row it is."""


class PopulationSearcher(Searcher):
    """See the module doc. `key(config)`: the structural key of a wrapped searcher's config."""

    def __init__(self, inner: Searcher, size: int, key: Callable[[dict[str, Any]], Hashable], metric: str, mode: str):
        super().__init__(metric=metric, mode=mode)
        self.inner, self.size, self.key = inner, size, key
        self.pending: list[tuple[str, dict[str, Any]]] = []
        self.members: dict[str, list[str]] = {}
        self.last: dict[str, dict[str, Any]] = {}
        self.handed: list[list[dict[str, Any]]] = []
        """Every population handed to Tune, its members' configs (with `algorithm`), in order."""
        self._asked = 0

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return True

    def suggest(self, trial_id: str):
        finished = False
        while max(self._sizes().values(), default=0) < self.size and len(self.pending) < PENDING * self.size:
            self._asked += 1
            member_id = f"{trial_id}-member{self._asked}"
            config = self.inner.suggest(member_id)
            if config == Searcher.FINISHED:
                finished = True
                break
            if config is None:
                break
            self.pending.append((member_id, config))
        if not self.pending:
            return Searcher.FINISHED if finished else None
        sizes = self._sizes()
        chosen_key = max(sizes, key=lambda k: min(sizes[k], self.size))  # the first of the fullest groups
        group = [entry for entry in self.pending if self.key(entry[1]) == chosen_key][: self.size]
        chosen = {member_id for member_id, _ in group}
        self.pending = [entry for entry in self.pending if entry[0] not in chosen]
        self.members[trial_id] = [member_id for member_id, _ in group]
        self.handed.append([config for _, config in group])
        algo = group[0][1]["algorithm"]
        return {"algorithm": algo, MEMBERS: [{k: v for k, v in c.items() if k != "algorithm"} for _, c in group]}

    def _sizes(self) -> dict[Hashable, int]:
        """The pending configurations' count per structural key, in the order first seen."""
        sizes: dict[Hashable, int] = {}
        for _, config in self.pending:
            key = self.key(config)
            sizes[key] = sizes.get(key, 0) + 1
        return sizes

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        members = self.members.get(trial_id)
        if members is None or not isinstance(result.get(MEMBER), int) or not 0 <= result[MEMBER] < len(members):
            return
        member_id = members[result[MEMBER]]
        self.last[member_id] = result
        self.inner.on_trial_result(member_id, result)

    def on_trial_complete(self, trial_id: str, result=None, error: bool = False) -> None:
        for member_id in self.members.pop(trial_id, []):  # a member that had ended keeps its result
            last = self.last.pop(member_id, None)
            ended = last is not None and last.get("status") in ("completed", "diverged", "stopped")  # stopped: ASHA
            failed = last is None or last.get("status") == "error" or (error and not ended)
            self.inner.on_trial_complete(member_id, result=None if failed else last, error=failed)
