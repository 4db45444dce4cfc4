"""Tune searchers: the paper's grid as a list, and Optuna TPE without repeated trials.

* `ListSearcher` hands out a fixed list of configs (the grid points not yet run), once each.
* `UniqueSearcher` wraps a searcher (OptunaSearch) over a finite categorical space: a
  config that has already run in this sweep (this session or an earlier one resumed) is
  answered from its recorded result instead of being run again, and the wrapped searcher
  is asked for another. When it keeps proposing known configs the space is exhausted and
  the search ends (FINISHED), so no configuration ever runs twice.
* `PerAlgorithmSearcher` runs one searcher per algorithm and records the configs it hands to
  Tune with the population each came from (`handed`), which `raycompo.tune.population` groups.

Optuna asked a population at a time (`--population P`) is `batched_search.BatchedOptunaSearch`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ray.tune.search import Searcher


def point_key(config: dict[str, Any]) -> str:
    return json.dumps({k: config[k] for k in sorted(config)}, sort_keys=True, default=str)


class ListSearcher(Searcher):
    def __init__(self, points: list[dict[str, Any]], metric: str, mode: str):
        super().__init__(metric=metric, mode=mode)
        self._todo = list(points)

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return True

    def suggest(self, trial_id: str):
        if not self._todo:
            return Searcher.FINISHED
        return dict(self._todo.pop(0))

    def on_trial_complete(self, trial_id: str, result=None, error: bool = False) -> None:
        pass


class UniqueSearcher(Searcher):
    def __init__(self, inner: Searcher, known: dict[str, float], metric: str, mode: str,
                 max_tries: int = 200, on_skip: Callable[[dict[str, Any]], None] | None = None,
                 first: list[dict[str, Any]] | None = None):
        """`known`: point_key -> metric value of the configs already run in this sweep.
        `first`: configs handed out before the inner searcher is asked (a resumed sweep's
        trials that hold a checkpoint: tune/trial_checkpoints.py); the inner searcher hears
        of them when it suggests one of them itself (skipped then, with its value)."""
        super().__init__(metric=metric, mode=mode)
        self.first = [dict(c) for c in first or []]
        self.inner = inner
        self.known = dict(known)
        self.max_tries = max_tries
        self.on_skip = on_skip
        self._inner_id: dict[str, str] = {}
        self._key: dict[str, str] = {}
        self._running: set[str] = set()
        self._n = 0

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return self.inner.set_search_properties(metric, mode, config, **spec)

    @property
    def batch(self) -> int:
        """The population of the inner searcher's last suggestion (0 when it asks one at a time)."""
        return getattr(self.inner, "batch", 0)

    def suggest(self, trial_id: str):
        while self.first:
            config = self.first.pop(0)
            key = point_key(config)
            if key not in self.known and key not in self._running:
                self._key[trial_id] = key
                self._running.add(key)
                return config
        for _ in range(self.max_tries):
            self._n += 1
            sub = f"u{self._n}-{trial_id}"
            config = self.inner.suggest(sub)
            if config is None or config == Searcher.FINISHED:
                return config
            key = point_key(config)
            if key in self.known or key in self._running:
                value = self.known.get(key)
                # tell the searcher what that config scored (or that it is running) and ask again
                self.inner.on_trial_complete(sub, result={self.metric: value} if value is not None else None)
                if self.on_skip is not None:
                    self.on_skip(config)
                continue
            self._inner_id[trial_id] = sub
            self._key[trial_id] = key
            self._running.add(key)
            return config
        return Searcher.FINISHED

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        if trial_id in self._inner_id:
            self.inner.on_trial_result(self._inner_id[trial_id], result)

    def on_trial_complete(self, trial_id: str, result=None, error: bool = False) -> None:
        if trial_id in self._inner_id:
            self.inner.on_trial_complete(self._inner_id.pop(trial_id), result=result, error=error)
        key = self._key.pop(trial_id, None)
        if key is None:
            return
        self._running.discard(key)
        if result and not error and result.get(self.metric) is not None:
            self.known[key] = result[self.metric]


class PerAlgorithmSearcher(Searcher):
    """One Tune run for all algorithms: each algorithm has its own searcher and trial
    budget; suggestions go round-robin over the algorithms and carry an `algorithm` key.
    Results go back to the searcher of the trial's algorithm. `handed` lists (batch, config)
    of every config handed to Tune, in order: `batch` is the population that the algorithm's
    searcher asked it in (its `batch` attribute; 0 for a searcher that has none)."""

    KEY = "algorithm"

    def __init__(self, searchers: dict[str, Searcher], budgets: dict[str, int], metric: str, mode: str):
        super().__init__(metric=metric, mode=mode)
        self.searchers = searchers
        self.budgets = dict(budgets)
        self._owner: dict[str, str] = {}
        self._turn = 0
        self.handed: list[tuple[int, dict[str, Any]]] = []

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return True

    def suggest(self, trial_id: str):
        algos = [a for a in self.searchers if self.budgets.get(a, 0) > 0]
        if not algos:
            return Searcher.FINISHED
        for i in range(len(algos)):
            algo = algos[(self._turn + i) % len(algos)]
            config = self.searchers[algo].suggest(trial_id)
            if config == Searcher.FINISHED:
                self.budgets[algo] = 0
                continue
            if config is None:
                continue
            self._turn = (self._turn + i + 1) % max(1, len(algos))
            self.budgets[algo] -= 1
            self._owner[trial_id] = algo
            self.handed.append((getattr(self.searchers[algo], "batch", 0), {self.KEY: algo, **config}))
            return {self.KEY: algo, **config}
        if all(self.budgets.get(a, 0) <= 0 for a in self.searchers):
            return Searcher.FINISHED
        return None

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        if trial_id in self._owner:
            self.searchers[self._owner[trial_id]].on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result=None, error: bool = False) -> None:
        if trial_id in self._owner:
            self.searchers[self._owner.pop(trial_id)].on_trial_complete(trial_id, result=result, error=error)
