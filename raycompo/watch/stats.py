"""Mean and 95% confidence interval over seeds (Student's t, n - 1 degrees of freedom)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def t_quantile(q: float, df: int) -> float:
    from scipy.stats import t  # scipy comes with scikit-learn

    return float(t.ppf(q, df))


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float, int]:
    """(mean, half-width, n) of the finite values: mean +- t_{(1+level)/2, n-1} * sd / sqrt(n),
    sd the sample standard deviation (ddof 1). n = 1 gives a NaN half-width; n = 0 NaN mean."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = len(x)
    if n == 0:
        return math.nan, math.nan, 0
    if n == 1:
        return float(x[0]), math.nan, 1
    half = t_quantile(0.5 + level / 2, n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
    return float(x.mean()), half, n
