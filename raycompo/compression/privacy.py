"""Client-level differential privacy as DP-FedAvg does it (McMahan et al., ICLR 2018):
each member's contribution clipped to L2 norm C over all the keys it sends up
(raycompo/compression/uplink.py, on the hosts), Gaussian noise N(0, z^2 C^2 I) added to
the server's sum of every key (here, on the driver), the weights fixed to 1 so that the
algorithm's average divides by the cohort size m (a fixed denominator).

Accounting: the cohort is a uniform sample of m of the n clients WITHOUT replacement
(fixed size: `ctx.sample`), so a round is the sampled-without-replacement Gaussian
mechanism under the replace-one neighbouring relation (n public): replacing one client's
data moves a clipped sum by at most 2C, so the noise multiplier the accountant sees is
z C / (2 C) = z / 2. A round with E noised exchanges on its cohort (ComFedL's values then
models, FedDRO's I + 1 exchanges) composes E Gaussians on one sample. T rounds compose T
such events. Google's dp-accounting computes epsilon at `delta` with its RDP accountant
(`SampledWithoutReplacementDpEvent`, Wang, Balle and Kasiviswanathan 2019, Theorem 27).
Not modelled: secure aggregation, local DP, a simulated system's non-uniform selection
(the accountant assumes the uniform draw).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from raycompo.errors import ConfigError

SAMPLING = "fixed-size"
"""The cohort's sampling as the accountant models it: m of n clients without replacement."""


@dataclass(frozen=True)
class DpSettings:
    """C (`--dp-clip`), z (`--dp-noise`), delta (`--dp-delta`)."""

    clip: float
    noise: float
    delta: float

    @property
    def sigma(self) -> float:
        """The noise's standard deviation z C."""
        return self.noise * self.clip


def check_dp(clip: Any, noise: Any, delta: Any) -> DpSettings | None:
    """The DP settings, or None without `--dp-clip`; one-line ConfigError for a bad value."""
    if clip is None:
        if noise is not None:
            raise ConfigError("--dp-noise needs --dp-clip C (the L2 norm each client's contribution is clipped to)")
        return None
    for name, value in (("--dp-clip", clip), ("--dp-noise", noise), ("--dp-delta", delta)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)):
            raise ConfigError(f"{name} must be a finite number, got {value!r}")
    if clip <= 0:
        raise ConfigError(f"--dp-clip C must be > 0, got {clip}")
    noise = 0.0 if noise is None else noise
    if noise < 0:
        raise ConfigError(f"--dp-noise z must be >= 0 (the noise's standard deviation is z C), got {noise}")
    if not 0 < delta < 1:
        raise ConfigError(f"--dp-delta must be in (0, 1), got {delta}")
    return DpSettings(float(clip), float(noise), float(delta))


def noised(sums: dict[str, Any], sigma: float, gens: dict[str, torch.Generator], skip: set[str]) -> dict[str, Any]:
    """`sums` with N(0, sigma^2) added to every entry of every key but `skip` (the
    weights): tensors in float64, numbers as numbers. `gens`: a generator per key."""
    out = dict(sums)
    for key, v in sums.items():
        if key in skip or key not in gens:
            continue
        if isinstance(v, torch.Tensor):
            z = torch.randn(v.shape, generator=gens[key], dtype=torch.float64)
            out[key] = v + (sigma * z).to(v.device, v.dtype)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[key] = float(v) + sigma * float(torch.randn(1, generator=gens[key], dtype=torch.float64))
    return out


class Accountant:
    """The run's privacy loss: one event per round (see the module's docstring) accounted
    by dp-accounting's `RdpAccountant`; `state()` (each round's cohort size m and noised
    exchanges E) goes into checkpoints and rebuilds it.

    The RDP of one round's event is the library's (an `RdpAccountant` that composed it
    once), computed once per distinct (m, E): the sampled-without-replacement bound takes
    seconds per event. Rounds compose additively in RDP (as the library composes them);
    epsilon at delta is the library's `compute_epsilon` of the sum."""

    def __init__(self, n_clients: int, dp: DpSettings):
        self.n = n_clients
        self.dp = dp
        self.rounds: list[tuple[int, int, int]] = []
        """(round, m, E) of every round with a noised exchange."""
        self._open: dict[int, list[int]] = {}
        self._per_event: dict[tuple[int, int], Any] = {}
        self._rdp: Any = None
        self._epsilon = 0.0

    @staticmethod
    def _accountant() -> Any:
        from dp_accounting import rdp

        return rdp.RdpAccountant(neighboring_relation=rdp.rdp_privacy_accountant.NeighborRel.REPLACE_ONE)

    def event(self, m: int, exchanges: int) -> Any:
        """One round's `DpEvent`: m of n sampled without replacement, then `exchanges`
        Gaussians of noise multiplier z / 2 (sensitivity 2C under replace-one). With m = n
        (every client: no sampling) the Gaussians themselves."""
        from dp_accounting import dp_event

        gaussian = dp_event.GaussianDpEvent(self.dp.noise / 2)
        inner = gaussian if exchanges == 1 else dp_event.SelfComposedDpEvent(gaussian, exchanges)
        return inner if m >= self.n else dp_event.SampledWithoutReplacementDpEvent(self.n, m, inner)

    def exchange(self, round_: int, m: int) -> None:
        """A noised exchange of round `round_` (1-based) with m members."""
        acc = self._open.setdefault(round_, [0, 0])
        acc[0] = max(acc[0], m)
        acc[1] += 1

    def close_round(self, round_: int) -> None:
        """Compose round `round_`'s event (if it had a noised exchange)."""
        found = self._open.pop(round_, None)
        if found is not None:
            self._compose(round_, found[0], found[1])

    def _compose(self, round_: int, m: int, exchanges: int) -> None:
        self.rounds.append((round_, m, exchanges))
        if self.dp.noise == 0:
            self._epsilon = math.inf
            return
        from dp_accounting.rdp import rdp_privacy_accountant as lib

        one = self._per_event.get((m, exchanges))
        if one is None:
            acc = self._accountant()
            acc.compose(self.event(m, exchanges))
            one = self._per_event[(m, exchanges)] = (acc._orders, acc._rdp.copy())
        orders, rdp = one
        self._rdp = rdp.copy() if self._rdp is None else self._rdp + rdp
        self._epsilon = float(lib.compute_epsilon(orders, self._rdp, self.dp.delta)[0])

    def epsilon(self) -> float:
        """epsilon at `delta` of the rounds composed so far (0 before any; inf with z = 0)."""
        return self._epsilon

    def columns(self) -> dict[str, float]:
        """The metrics.csv column: cumulative `epsilon`."""
        return {"epsilon": self.epsilon()}

    def state(self) -> list[list[int]]:
        return [list(r) for r in self.rounds]

    def load(self, state: list[list[int]], round_: int) -> None:
        """Continue from `state()` taken at round `round_`: the same events composed again."""
        self.rounds, self._open, self._rdp, self._epsilon = [], {}, None, 0.0
        for r, m, e in state:
            if int(r) <= round_:
                self._compose(int(r), int(m), int(e))
