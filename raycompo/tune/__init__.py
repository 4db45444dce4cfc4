"""Hyper-parameter sweeps with Ray Tune and Optuna: `python -m raycompo.tune --space NAME`.

* `space`      loads and checks a `sweeps/<name>.yaml` file (format in its docstring);
* `trainable`  one Tune trial = one whole federation (`raycompo.engine.run`) in a
               placement group: a bundle for the driver and one per client host;
* `searchers`  the grid as a list, and Optuna TPE that never runs a config twice;
* `batched_search`  Optuna asked a population of P configurations at a time (ask/tell);
* `population` which trials may share a population (`population_key`, `group_populations`);
* `sweep`      one Tune run per algorithm, recorded in one result folder, resumable;
* `results`    trials.csv, metrics.parquet, best.json;
* `cli`        the command line.

From Python, this package is callable: `raycompo.tune(space, ...)` is `raycompo.tune.api.tune`
(`api`: the function and its `SweepResult`).
"""

from raycompo.tune.api import SweepResult, tune
from raycompo.tune.space import Space, available_spaces, load_space, validate
from raycompo.tune.sweep import SweepOptions, prepare, run_sweep

__all__ = ["Space", "SweepOptions", "SweepResult", "available_spaces", "load_space", "prepare", "run_sweep", "tune",
           "validate"]


def _callable() -> None:
    from raycompo.api import callable_module

    callable_module(__name__, tune)


_callable()
