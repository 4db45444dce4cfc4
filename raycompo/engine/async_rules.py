"""The asynchronous closing rules' server step (engine/asynchronous.py): how a full buffer of
accepted updates becomes the new server values, one policy object per aggregation.

* `FedBuff` (Nguyen et al., AISTATS 2022; `--aggregation buffered`):
  z <- z - eta_g (1/K) sum_k s(tau_k) Delta_k, Delta_k = z^{v_k} - y_k;
* `FedAsync` (Xie et al. 2019; `--aggregation async`, K = 1):
  z <- (1 - alpha s(tau)) z + alpha s(tau) y;

for the model and each shared estimate z the algorithm declares (`Buffered.estimates`). An
update is {'y': {quantity: y or Delta}, 'delta': the quantities given as Delta}; a quantity
the server has no value of yet (e.g. m-bar before the first step) becomes the mean of the y's.
"""

from __future__ import annotations

from typing import Any

import torch

from raycompo.system.aggregation import AggregationSettings, Plan


def f64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.float64)


class FedBuff:
    """Sends Deltas (`deltas`): the client's z^{v} - y, computed by the server that kept z^{v}."""

    deltas = True

    def __init__(self, settings: AggregationSettings):
        self.s = settings

    def merge(self, z: torch.Tensor, name: str, accepted: list[tuple[int, dict[str, Any]]]) -> torch.Tensor:
        acc = torch.zeros_like(z)
        for tau, r in accepted:
            delta = r["y"][name] if name in r["delta"] else z - r["y"][name]
            acc += self.s.weight(tau) * delta
        return z - self.s.server_lr / len(accepted) * acc


class FedAsync:
    """Mixes the one arrival's y into z with weight alpha s(tau)."""

    deltas = False

    def __init__(self, settings: AggregationSettings):
        self.s = settings

    def merge(self, z: torch.Tensor, name: str, accepted: list[tuple[int, dict[str, Any]]]) -> torch.Tensor:
        tau, r = accepted[0]
        a = self.s.async_alpha * self.s.weight(tau)
        return (1 - a) * z + a * r["y"][name]


def make_rule(plan: Plan) -> FedBuff | FedAsync:
    """The rule of a resolved asynchronous aggregation."""
    return FedBuff(plan.settings) if plan.kind == "buffered" else FedAsync(plan.settings)


def apply(rule: FedBuff | FedAsync, accepted: list[tuple[int, dict[str, Any]]], current: dict[str, Any],
          dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The new value of every server quantity of `current` ({name: z or None}) at `dtype`."""
    new: dict[str, torch.Tensor] = {}
    for name, z in current.items():
        if z is None:
            new[name] = sum(r["y"][name] for _, r in accepted) / len(accepted)
        else:
            new[name] = rule.merge(f64(z), name, accepted)
    return {k: v.to(dtype) for k, v in new.items()}
