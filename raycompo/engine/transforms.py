"""The payload transforms at the exchange (raycompo/compression/): where the engine applies
them, in one place.

* Up, on the hosts (`make_uplink`, applied by `Host.map` and `engine/batched.py` to what
  each member returns): the ordered steps of `compression/uplink.Uplink`: compression per
  key with error feedback, DP clipping, then the user's `--uplink` steps.
* On the driver (`Transforms`, called by the one exchange, engine/exchange.py, for every
  exchange of a server step, synchronous or asynchronous): the payload compressed down (`--compress-down`, error feedback kept by the
  server), the DP noise added to the sums (or to each member's contribution for
  `map_each`: the same Gaussian mechanism, one client's value per release), the
  accountant told; the encoded sizes go to the ledger's record (engine/ledger.exchange_cost).

Without `--compress`, `--compress-down`, `--dp-clip` and `--uplink` none of this exists
(None): the exchanges are what they were, bit for bit.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from raycompo.algorithms.client_rows import ClientRows
from raycompo.compression.methods import Method, parse_method
from raycompo.compression.privacy import Accountant, DpSettings, check_dp, noised
from raycompo.compression.uplink import Uplink, key_tag
from raycompo.configuration.config import Resolved
from raycompo.seeding import PRIVACY, SERVER, generator

DOWN_STREAM = 11
"""Server random stream (with the exchange and key) of `--compress-down`'s draws."""


def methods_of(spec: dict[str, str] | None) -> dict[str, Method]:
    """{key: Method} of a validated `compress` / `compress_down` mapping."""
    return {str(k): parse_method(v, str(k)) for k, v in (spec or {}).items()}


def dp_of(r: Resolved) -> DpSettings | None:
    c = r.config
    return check_dp(c.dp_clip, c.dp_noise, c.dp_delta)


def make_uplink(r: Resolved, algorithm: Any) -> Uplink | None:
    """The hosts' steps of what members send up (`Uplink.steps`: compress, clip, the user's
    `--uplink` steps, one of each class made here), or None (no --compress, no DP, none)."""
    methods = methods_of(r.config.compress)
    dp = dp_of(r)
    extra = [cls() for cls in r.uplink_steps]
    if not methods and dp is None and not extra:
        return None
    return Uplink(methods, None if dp is None else dp.clip, getattr(algorithm, "contributions", {}) or {},
                  r.config.seed, extra, keyed=r.config.sampler == "keyed")


class Transforms:
    """The driver's part (see the module's docstring). `state()` / `load()`: the server's
    error-feedback residuals and the accountant, in checkpoints."""

    def __init__(self, r: Resolved, n_clients: int, algorithm: Any):
        self.seed = r.config.seed
        self.down = methods_of(r.config.compress_down)
        self.up = methods_of(r.config.compress)
        self.dp = dp_of(r)
        self.accountant = Accountant(n_clients, self.dp) if self.dp is not None else None
        declared = getattr(algorithm, "contributions", {}) or {}
        self.weights = {(phase, key) for phase, keys in declared.items() for key, s in keys.items() if s.is_weight}
        self.residuals: dict[str, torch.Tensor] = {}
        """The server's error-feedback residual of each compressed payload key, 'phase:key'."""

    @classmethod
    def make(cls, r: Resolved, n_clients: int, algorithm: Any, model_dim: int) -> Transforms | None:
        """The driver's transforms, or None without any option. Checks, before the first
        round, that topk / randk keep no more entries than the model has, for the payload's
        model `w` and the contribution keys declared its updates (other keys' sizes are
        checked at their first exchange)."""
        c = r.config
        if not c.compress and not c.compress_down and c.dp_clip is None:
            return None
        declared = getattr(algorithm, "contributions", {}) or {}
        for key, method in methods_of(c.compress).items():
            if any(s.of == "w" for keys in declared.values() for k, s in keys.items() if k == key or key == "*"):
                method.check_size(model_dim, key)
        for key, method in methods_of(c.compress_down).items():
            if key in ("w", "*"):
                method.check_size(model_dim, key)
        return cls(r, n_clients, algorithm)

    # --- down ------------------------------------------------------------------------------
    def payload(self, phase: str, round_: int, index: int, payload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
        """The payload as the members decode it, and {key: encoded bytes} of each
        compressed key (one message per member: the payload is broadcast)."""
        if not self.down:
            return payload, {}
        out, encoded = dict(payload), {}
        for key, v in payload.items():
            method = self.down.get(key, self.down.get("*"))
            if method is None or not isinstance(v, torch.Tensor) or not v.is_floating_point() or v.numel() == 0:
                continue
            x = v.detach().reshape(1, -1)
            method.check_size(x.shape[1], key)
            name = f"{phase}:{key}"
            if method.feedback and name in self.residuals:
                x = x + self.residuals[name].to(x.device, x.dtype)
            gens = [generator(self.seed, SERVER, round_, DOWN_STREAM, index, key_tag(phase, key))]
            c = method.compress_rows(x, gens)
            if method.feedback:
                self.residuals[name] = (x - c).reshape(-1).cpu()
            out[key] = c.reshape(v.shape).to(v.dtype)
            encoded[key] = math.ceil(method.bits(x.shape[1]) / 8)
        return out, encoded

    # --- DP ------------------------------------------------------------------------------
    def noise(self, phase: str, round_: int, index: int, result: Any, reduce: bool, members: int) -> Any:
        """The sums with N(0, z^2 C^2) on every non-weight key (`reduce`), or each member's
        contribution noised (`map_each`); the accountant hears of the exchange."""
        if self.dp is None or self.accountant is None:
            return result
        self.accountant.exchange(round_ + 1, members)
        skip = {key for p, key in self.weights if p == phase}
        sigma = self.dp.sigma

        def gens(keys: Any, who: int) -> dict[str, torch.Generator]:
            return {key: generator(self.seed, PRIVACY, round_, index, who, key_tag(phase, key)) for key in keys}

        if reduce:
            return noised(result, sigma, gens(result, 0), skip)
        each = result.as_dict() if isinstance(result, ClientRows) else result  # each member's own noise
        return ClientRows.of({cid: noised(out, sigma, gens(out, cid + 1), skip) for cid, out in each.items()})

    def close_round(self, round_: int) -> None:
        if self.accountant is not None:
            self.accountant.close_round(round_)

    def columns(self) -> dict[str, float]:
        """`epsilon` with DP; nothing otherwise."""
        return self.accountant.columns() if self.accountant is not None else {}

    def state(self) -> dict[str, Any]:
        return {"residuals": dict(self.residuals),
                "accountant": self.accountant.state() if self.accountant is not None else None}

    def load(self, state: dict[str, Any], round_: int) -> None:
        self.residuals = dict(state.get("residuals") or {})
        if self.accountant is not None and state.get("accountant") is not None:
            self.accountant.load(state["accountant"], round_)
