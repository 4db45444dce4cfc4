"""Who pays: every evaluated client's metrics, and their spread over clients.

Robust and fair federated learning reports how a model's quality is spread over the
clients, not only its mean and its worst client: q-FedAvg's paper (Li et al. 2020) gives
the variance of the clients' accuracies and the accuracy of the worst 10%. At each
evaluation the driver (`Federation.evaluate_clients`) therefore

* adds to the row, for every metric the task ranks clients by (`Task.worst`), the
  distribution columns `<metric>_std` (the population standard deviation over the
  evaluated clients, numpy's `std` with ddof=0), `<metric>_p10`, `<metric>_p50` and
  `<metric>_p90` (numpy's `percentile`, linear interpolation): for a metric whose worst
  client is the lowest (accuracies) the worst 10% lie below p10, for one whose worst is
  the highest (losses) above p90;
* hands the evaluated clients' values on as one `ClientMetrics`, under the key
  `CLIENTS_KEY` of the row of `Federation.initial_row` / `run_round`; the run loop (engine/loop.py) takes it out of the row before any observer
  sees the row and gives it to `Observer.on_clients`, which writes `clients.csv`
  (raycompo/runfolder/clients_file.py). It travels from a driver actor to the caller inside the
  rows, so the inline and the Ray backend hand on the same records.

Everything here is O(clients evaluated) per evaluation (`eval_clients` of them, or all).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

CLIENTS_KEY = "_clients"
"""The row key under which an evaluated row carries its `ClientMetrics` from the driver to
the run loop (never a column: the loop removes it before the observers see the row)."""

N_SAMPLES_KEY = "_n_samples"
"""The key a host adds to each client's evaluation result: the client's number of training
samples n_i (`num_samples` of its data). Keys starting with '_' are never columns."""

EVALUATE = "evaluate"
"""The client phase whose per-client results are these."""

SPREAD = (("std", None), ("p10", 10.0), ("p50", 50.0), ("p90", 90.0))
"""The distribution columns: `<metric>_<name>`, the standard deviation (None) or the
percentile over the evaluated clients."""

ClientColumns = Callable[[list[int]], dict[int, dict[str, Any]]]
"""`Federation.client_columns`: more per-client columns for the clients given (with a
simulated system: the client's device, how often it was online, selected and dropped)."""


def spread(per_client: dict[int, dict[str, Any]], worst: dict[str, str]) -> dict[str, float]:
    """The distribution columns (`SPREAD`) of the metrics in `worst` (`Task.worst`) that the
    clients report, in the order the clients report them."""
    first = next(iter(per_client.values()))
    out: dict[str, float] = {}
    for key in (k for k in first if k in worst):
        values = np.array([float(m[key]) for m in per_client.values()], dtype=np.float64)
        for name, q in SPREAD:
            out[f"{key}_{name}"] = float(np.std(values) if q is None else np.percentile(values, q))
    return out


@dataclass(eq=False)
class ClientMetrics:
    """One evaluation's per-client results: the rows `clients.csv` gains for it.
    Every array is aligned with `clients` (sorted client ids)."""

    round: int
    """The row's round (0: the initial model)."""
    clients: np.ndarray
    """The evaluated client ids (int64)."""
    n_samples: np.ndarray
    """Each client's number of training samples n_i (float64: NaN where the client's data
    does not say)."""
    metrics: dict[str, np.ndarray] = field(default_factory=dict)
    """Metric name -> each client's value (float64), the metrics the task's `evaluate` returns."""
    columns: dict[str, list[Any]] = field(default_factory=dict)
    """More per-client columns (`Federation.client_columns`, e.g. with a simulated system)."""

    def __eq__(self, other: object) -> bool:
        """The same evaluation, value for value (NaN equal to NaN): rows holding a record
        compare as rows of plain numbers do."""
        if not isinstance(other, ClientMetrics):
            return NotImplemented
        return (self.round == other.round and np.array_equal(self.clients, other.clients)
                and np.array_equal(self.n_samples, other.n_samples, equal_nan=True)
                and list(self.metrics) == list(other.metrics)
                and all(np.array_equal(v, other.metrics[k], equal_nan=True) for k, v in self.metrics.items())
                and self.columns == other.columns)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    @classmethod
    def build(cls, round_: int, per_client: dict[int, dict[str, Any]],
              extra: dict[int, dict[str, Any]] | None = None) -> ClientMetrics:
        """From the evaluate phase's {client: metrics} (its '_' keys left out, except
        `N_SAMPLES_KEY`) and the optional extra columns by client."""
        ids = sorted(per_client)
        first = per_client[ids[0]]
        keys = [k for k in first if not k.startswith("_")]
        metrics = {k: np.array([float(per_client[c][k]) for c in ids], dtype=np.float64) for k in keys}
        n = np.array([_number(per_client[c].get(N_SAMPLES_KEY)) for c in ids], dtype=np.float64)
        columns: dict[str, list[Any]] = {}
        if extra:
            names = list(dict.fromkeys(k for c in ids for k in extra.get(c, {})))
            columns = {k: [extra.get(c, {}).get(k) for c in ids] for k in names}
        return cls(round_, np.array(ids, dtype=np.int64), n, metrics, columns)

    def columns_of_rows(self) -> dict[str, list[Any]]:
        """The tidy rows column by column (plain Python lists, as the CSV writer wants
        them): round, client, metric, value, n_samples (None where unknown), then the extra
        columns; one row per (client, metric), client by client."""
        names = list(self.metrics)
        k, m = len(self.clients), len(names)
        n = np.repeat(self.n_samples, m)
        cols: dict[str, list[Any]] = {
            "round": [self.round] * (k * m),
            "client": np.repeat(self.clients, m).tolist(),
            "metric": names * k,
            "value": np.column_stack([self.metrics[x] for x in names]).ravel().tolist() if m else [],
            "n_samples": [None if v != v else int(v) for v in n.tolist()],  # NaN: unknown
        }
        for name, values in self.columns.items():
            cols[name] = [v for v in values for _ in range(m)]
        return cols

    def frame(self) -> Any:
        """The tidy rows as a pandas DataFrame (`columns_of_rows`; n_samples as Int64)."""
        import pandas as pd

        frame = pd.DataFrame(self.columns_of_rows())
        frame["n_samples"] = frame["n_samples"].astype("Int64")
        return frame


def n_samples(data: Any) -> int | None:
    """A client's number of training samples n_i (its data's `num_samples`; None when the
    data does not say, e.g. a plugin's own client type)."""
    n = getattr(data, "num_samples", None)
    return None if n is None else int(n)


def _number(v: Any) -> float:
    return float("nan") if v is None else float(v)
