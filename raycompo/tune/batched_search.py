"""Optuna through batched ask/tell: a Tune `Searcher` that asks its study for a whole
population of P configurations at once and tells each result when its trial ends.

`BatchedOptunaSearch.suggest` hands out the configurations of the current population one
by one; when none is left it asks the study P times (`study.ask`) before any of them is
told, so the P trials of a population are chosen together, as a batched engine runs them.
`on_trial_complete` tells the study (`study.tell`) the trial's value of the metric (the
study maximizes or minimizes it as `mode` says):

* a value, including the worst value (-inf for max, +inf for min) that a diverged trial
  reports (trainable.py), as a resumed sweep's warm start tells it: COMPLETE;
* a trial that raised (error=True) or whose value is NaN: FAIL;
* no value (no result, e.g. a duplicate that `UniqueSearcher` skips while it runs): PRUNED,
  as Ray Tune's OptunaSearch does.

With P = 1 it asks and tells as Ray Tune's OptunaSearch over the same distributions
(the same TPE seed gives the same configurations). For P > 1 the samplers whose
suggestion does not read the results (RandomSampler, GridSampler: a running trial's grid
point counts as taken) give the same configurations as sequential ask/tell; TPE chooses a
population from the results told before it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from typing import Any

from ray.tune.search import Searcher


class BatchedOptunaSearch(Searcher):
    """A Tune searcher over `space` ({name: optuna distribution}) that asks an Optuna study
    `population` configurations at a time (the module docstring says how results are told).

    sampler: an Optuna sampler (default TPESampler(seed=seed), as Ray Tune's OptunaSearch).
    finished: (point, value) pairs already run, added to the study as COMPLETE trials."""

    def __init__(
        self,
        space: dict[str, Any],
        metric: str,
        mode: str,
        population: int = 1,
        sampler: Any = None,
        seed: int | None = 0,
        finished: Iterable[tuple[dict[str, Any], float]] = (),
    ):
        import optuna

        super().__init__(metric=metric, mode=mode)
        if population < 1:
            raise ValueError(f"population must be >= 1, got {population}")
        self.space = dict(space)
        self.population = population
        self.study = optuna.create_study(
            direction="minimize" if mode == "min" else "maximize",
            pruner=optuna.pruners.NopPruner(),
            sampler=sampler if sampler is not None else optuna.samplers.TPESampler(seed=seed),
        )
        for point, value in finished:
            self.study.add_trial(
                optuna.trial.create_trial(
                    state=optuna.trial.TrialState.COMPLETE,
                    value=value,
                    params=point,
                    distributions=self.space,
                )
            )
        self.asked = 0
        """Populations asked so far."""
        self.batch = -1
        """The index of the population that the last configuration handed out belongs to."""
        self._queue: deque[tuple[int, Any]] = deque()
        self._trials: dict[str, tuple[int, Any]] = {}

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return True  # the space, metric and mode are fixed at construction

    def ask_population(self) -> None:
        """Ask the study for the next population: P trials, none of them told yet."""
        index, self.asked = self.asked, self.asked + 1
        self._queue.extend(
            (index, self.study.ask(fixed_distributions=self.space)) for _ in range(self.population)
        )

    def suggest(self, trial_id: str) -> dict[str, Any]:
        if trial_id not in self._trials:
            if not self._queue:
                self.ask_population()
            self._trials[trial_id] = self._queue.popleft()
        self.batch, trial = self._trials[trial_id]
        return dict(trial.params)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        import optuna

        if trial_id not in self._trials:
            return
        _, trial = self._trials.pop(trial_id)
        value = result.get(self.metric) if result else None
        states = optuna.trial.TrialState
        if error or (value is not None and math.isnan(value)):
            state, value = states.FAIL, None
        else:
            state = states.PRUNED if value is None else states.COMPLETE
        try:
            self.study.tell(trial, None if value is None else float(value), state=state)
        except RuntimeError as exc:
            # GridSampler asks the study to stop once every grid point has been told, which
            # only an optimize() loop allows; the trial's state is stored before that
            if "Study.stop" not in str(exc):
                raise
