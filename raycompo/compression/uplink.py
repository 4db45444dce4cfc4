"""A contribution on its way up: compressed per key (with error feedback), then clipped
for client-level DP. Applied by the engine where a client's contribution leaves it (one
member on the per-client path, a chunk's (k, ...) rows at once on the batched path),
never inside an algorithm.

For each key of a member's contribution, with x its rows (k, d):

1. what travels: the update delta = x / weight - payload[of] for a key declared an update
   (raycompo/compression/keys.py), x itself otherwise;
2. compression (`--compress KEY=METHOD`): c = C(delta + e), and with error feedback the
   member keeps e <- delta + e - c (Karimireddy et al. 2019; e starts at zeros), in its
   client state under `RESIDUALS` (checkpointed with it);
3. clipping (`--dp-clip C`): every non-weight key's c of a member, concatenated, scaled
   by min(1, C / ||c||_2) (DP-FedAvg, McMahan et al. 2018), and each weight set to 1;
4. what the server decodes: weight * (payload[of] + c) for an update, c otherwise.

Clipping follows compression so that what the server sums is what is bounded (a QSGD
draw can be longer than its input). Keys whose values are neither tensors nor numbers
(a list of tensors of different sizes) travel unchanged. A key with no method, without
DP, is left bit for bit as the algorithm returned it.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Any

import torch

from raycompo.compression.keys import VALUE, Sent
from raycompo.compression.methods import Method
from raycompo.errors import ConfigError
from raycompo.seeding import COMPRESS, generator

RESIDUALS = "_uplink"
"""The client-state key of a member's error-feedback residuals: {'phase:key': e (d,)}. The
algorithm never sees it (the engine takes it out before a phase and puts it back after)."""


def key_tag(phase: str, key: str) -> int:
    """A stable 32-bit number of (phase, key) for the random streams (crc32)."""
    return zlib.crc32(f"{phase}:{key}".encode())


def split_residuals(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(the state the algorithm sees, the member's residuals)."""
    if RESIDUALS not in state:
        return state, {}
    return {k: v for k, v in state.items() if k != RESIDUALS}, state[RESIDUALS]


def with_residuals(state: dict[str, Any], residuals: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The algorithm's new state with the member's residuals (none: the state as it is)."""
    return {**state, RESIDUALS: residuals} if residuals else state


@dataclass
class Uplink:
    """The transforms of what clients send up: `methods` by key ('*': every non-weight
    key not named), `clip` the DP clipping norm C (None: no clipping), `contributions` the
    algorithm's declaration (`Algorithm.contributions`)."""

    methods: dict[str, Method]
    clip: float | None
    contributions: dict[str, dict[str, Sent]]
    seed: int
    _checked: set[tuple[str, str]] = field(default_factory=set)

    def sent(self, phase: str, key: str) -> Sent:
        return self.contributions.get(phase, {}).get(key, VALUE)

    def method_of(self, phase: str, key: str, is_tensor: bool) -> Method | None:
        """The key's method: named, else '*' for a tensor that is not a weight."""
        if self.sent(phase, key).is_weight:
            return None
        if key in self.methods:
            return self.methods[key]
        return self.methods.get("*") if is_tensor else None

    def apply(self, phase: str, round_: int, members: list[tuple[int, int]], out: dict[str, Any],
              payload: dict[str, Any], residuals: list[dict[str, torch.Tensor]],
              batched: bool) -> tuple[dict[str, Any], list[dict[str, torch.Tensor]], dict[str, list[int]]]:
        """The decoded contribution of k members (`members`: (client id, its exchange
        number in this round)); `out` one member's contribution (`batched` False) or a
        chunk's, each value (k, ...) or a list of k numbers. Returns (decoded contribution,
        each member's new residuals, {key: each member's encoded bytes} for the compressed
        keys)."""
        k = len(members)
        if batched and any(isinstance(v, list) and any(isinstance(x, torch.Tensor) for x in v) for v in out.values()):
            return self._member_by_member(phase, round_, members, out, payload, residuals)
        rows = as_rows(out, k, batched)
        methods = {key: m for key in rows if (m := self.method_of(phase, key, isinstance(out[key], torch.Tensor)))}
        self._check_compressible(phase, out, rows)
        touched = set(methods) | (set(rows) if self.clip is not None else set())
        if not touched:
            return out, residuals, {}
        sent = {key: self.sent(phase, key) for key in rows}
        weights = {key: rows[s.weight] for key, s in sent.items() if s.weight in rows}
        moved, refs = what_travels(touched, sent, rows, weights, payload)
        new_res, encoded = self._compress(phase, round_, members, methods, moved, residuals)
        if self.clip is not None:
            moved, weights = clipped(moved, weights, self.clip)
        return decode(out, moved, sent, refs, weights, rows, k, batched, self.clip is not None), new_res, encoded

    def _check_compressible(self, phase: str, out: dict[str, Any], rows: dict[str, torch.Tensor]) -> None:
        """ConfigError for a key named by --compress that `phase` sends as neither a tensor nor a number."""
        for key in self.methods:
            if key != "*" and key in out and key not in rows:
                raise ConfigError(f"--compress {key}: phase {phase!r} sends {key} as "
                                  f"{type(out[key]).__name__}, which is not compressed (tensors and numbers are)")

    def _compress(self, phase: str, round_: int, members: list[tuple[int, int]], methods: dict[str, Method],
                  moved: dict[str, torch.Tensor], residuals: list[dict[str, torch.Tensor]]
                  ) -> tuple[list[dict[str, torch.Tensor]], dict[str, list[int]]]:
        """Step 2: each key of `methods` compressed in `moved`, with error feedback where the
        method keeps it; (each member's new residuals, {key: each member's encoded bytes})."""
        k = len(members)
        new_res = [dict(r) for r in residuals]
        encoded: dict[str, list[int]] = {}
        for key, method in methods.items():
            x = moved[key]
            d = x.shape[1]
            if (phase, key) not in self._checked:
                method.check_size(d, key)
                self._checked.add((phase, key))
            name = f"{phase}:{key}"
            if method.feedback:
                e = [r.get(name) for r in residuals]
                if any(v is not None for v in e):
                    x = x + torch.stack([v.to(x.device, x.dtype) if v is not None else torch.zeros(d, dtype=x.dtype,
                                         device=x.device) for v in e])
            gens = None
            if method.name in ("qsgd", "randk"):
                tag = key_tag(phase, key)
                gens = [generator(self.seed, COMPRESS, cid, round_, call, tag) for cid, call in members]
            c = method.compress_rows(x, gens)
            if method.feedback:
                left = x - c
                for i, r in enumerate(new_res):
                    r[name] = left[i].clone()
            moved[key] = c
            encoded[key] = [math.ceil(method.bits(d) / 8)] * k
        return new_res, encoded

    def _member_by_member(self, phase: str, round_: int, members: list[tuple[int, int]], out: dict[str, Any],
                          payload: dict[str, Any], residuals: list[dict[str, torch.Tensor]]) -> Any:
        """`apply` of a chunk whose output holds a list of per-member tensors of their own
        sizes (FastDRO's per-sample losses): each member as the per-client path does it."""
        decoded: list[dict[str, Any]] = []
        new_res: list[dict[str, torch.Tensor]] = []
        encoded: dict[str, list[int]] = {}
        for i, member in enumerate(members):
            one = {key: v[i] for key, v in out.items()}
            dec, (res,), enc = self.apply(phase, round_, [member], one, payload, [residuals[i]], batched=False)
            decoded.append(dec)
            new_res.append(res)
            for key, (size,) in enc.items():
                encoded.setdefault(key, []).append(size)
        joined = {key: torch.stack([d[key] for d in decoded]) if isinstance(v, torch.Tensor)
                  else [d[key] for d in decoded] for key, v in out.items()}
        return joined, new_res, encoded


def as_rows(out: dict[str, Any], k: int, batched: bool) -> dict[str, torch.Tensor]:
    """The values of `out` that can be compressed, as rows (k, d): tensors, and numbers (a
    list of k numbers when `batched`) as float64; any other value is left out."""
    rows: dict[str, torch.Tensor] = {}
    for key, v in out.items():
        if isinstance(v, torch.Tensor):
            rows[key] = v.detach().reshape(k, -1)
        elif not batched and isinstance(v, (int, float)) and not isinstance(v, bool):
            rows[key] = torch.tensor([[float(v)]], dtype=torch.float64)
        elif batched and isinstance(v, list) and all(isinstance(x, (int, float)) for x in v):
            rows[key] = torch.tensor([float(x) for x in v], dtype=torch.float64).view(k, 1)
    return rows


def what_travels(touched: set[str], sent: dict[str, Sent], rows: dict[str, torch.Tensor], weights: dict[str, torch.Tensor],
                 payload: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor | None]]:
    """Step 1, for each touched key but the weights: the update x / weight - payload[of] for
    a key declared an update, x itself otherwise; (those rows, each update's payload[of] as
    one row, None where the payload lacks it)."""
    moved: dict[str, torch.Tensor] = {}  # what travels: updates or values
    refs: dict[str, torch.Tensor | None] = {}
    for key in touched:
        s = sent[key]
        if s.is_weight:
            continue
        x = rows[key]
        if s.of is not None:
            ref = payload.get(s.of)
            refs[key] = ref.detach().reshape(1, -1).to(x.device, x.dtype) if isinstance(ref, torch.Tensor) else None
            if key in weights:
                x = x / weights[key].to(x.device, x.dtype)
            if refs[key] is not None:
                x = x - refs[key]
        moved[key] = x
    return moved, refs


def clipped(moved: dict[str, torch.Tensor], weights: dict[str, torch.Tensor],
            clip: float) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Each member's rows of every key scaled by min(1, clip / ||all its rows||_2), and
    its weights set to 1 (DP-FedAvg's fixed denominator)."""
    if moved:
        sq = sum(v.to(torch.float64).pow(2).sum(1, keepdim=True).cpu() for v in moved.values())
        assert isinstance(sq, torch.Tensor)
        scale = (clip / sq.sqrt().clamp_min(1e-300)).clamp(max=1.0)
        moved = {key: v * scale.to(v.device, v.dtype) for key, v in moved.items()}
    return moved, {key: torch.ones_like(w) for key, w in weights.items()}


def decode(out: dict[str, Any], moved: dict[str, torch.Tensor], sent: dict[str, Sent],
           refs: dict[str, torch.Tensor | None], weights: dict[str, torch.Tensor], rows: dict[str, torch.Tensor],
           k: int, batched: bool, clipping: bool) -> dict[str, Any]:
    """Step 4, what the server decodes: weight * (payload[of] + c) for an update, c otherwise,
    each in the form its value came in; with clipping, every weight 1."""
    result = dict(out)
    for key, c in moved.items():
        s = sent[key]
        if s.of is not None:
            if refs.get(key) is not None:
                c = c + refs[key]
            if key in weights:
                c = c * weights[key].to(c.device, c.dtype)
        result[key] = restore(c, out[key], k, batched)
    if clipping:
        for key, s in sent.items():
            if s.is_weight:
                result[key] = restore(torch.ones_like(rows[key]), out[key], k, batched)
    return result


def restore(rows: torch.Tensor, like: Any, k: int, batched: bool) -> Any:
    """Rows (k, d) back in the form of the value they came from: a tensor of its shape and
    dtype, a number, or a list of k numbers."""
    if isinstance(like, torch.Tensor):
        return rows.reshape(like.shape).to(like.dtype)
    if batched:
        return [float(x) for x in rows.reshape(-1).tolist()]
    return float(rows.reshape(-1)[0])
