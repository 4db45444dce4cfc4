"""How an algorithm's contribution keys travel: declared beside the algorithm
(`Algorithm.contributions`), read by the payload transforms (compression, client-level DP)
and by `--list`.

A key is one of:

* a value (`VALUE`, the default): sent as it is (a gradient, an inner estimate, a loss);
  compressed and clipped as it is;
* an update (`update(of, weight=None)`): the key carries weight * (payload[of] + delta),
  a local model the server could rebuild from the model it sent and the client's update
  delta (FedAvg's n_i w_i = n_i (w + (w_i - w))); the client sends delta, so delta is what
  is compressed and clipped (DP-FedAvg clips the update, McMahan et al. 2018);
* a weight (`WEIGHT`): the client's aggregation weight (FedAvg's n_i, a count of 1):
  neither compressed nor clipped; under DP it is 1 (the fixed denominator m of DP-FedAvg:
  a data-dependent weight would itself leak).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sent:
    """How one contribution key travels (see the module's docstring)."""

    of: str | None = None
    """For an update: the payload key it is the update of (None: a value or a weight)."""
    weight: str | None = None
    """For an update: the contribution key that scales it (FedAvg's 'n'), or None."""
    is_weight: bool = False
    """A weight: never compressed nor clipped; 1 under DP."""

    def describe(self) -> str:
        """'update of w (times n)', 'weight', 'value': the --list text."""
        if self.is_weight:
            return "weight"
        if self.of is not None:
            return f"update of {self.of}" + (f" (times {self.weight})" if self.weight else "")
        return "value"


VALUE = Sent()
"""A key sent as it is."""

WEIGHT = Sent(is_weight=True)
"""An aggregation weight."""


def update(of: str, weight: str | None = None) -> Sent:
    """A key that carries weight * (payload[of] + delta): delta is what travels."""
    return Sent(of=of, weight=weight)


def keys_of(contributions: dict[str, dict[str, Sent]]) -> list[str]:
    """Every contribution key of an algorithm's declaration, in order, once."""
    seen: dict[str, None] = {}
    for keys in contributions.values():
        seen.update(dict.fromkeys(keys))
    return list(seen)


def compressible(contributions: dict[str, dict[str, Sent]]) -> list[str]:
    """The keys `--compress` may name (every declared key but the weights)."""
    weights = {k for keys in contributions.values() for k, s in keys.items() if s.is_weight}
    return [k for k in keys_of(contributions) if k not in weights]
