"""A contribution on its way up: an ordered list of steps (`Uplink.steps`), applied by the
engine where a client's contribution leaves it (one member on the per-client path, a
chunk's (k, ...) rows at once on the batched path), never inside an algorithm.

For each key of a member's contribution, with x its rows (k, d):

1. what travels: the update delta = x / weight - payload[of] for a key declared an update
   (raycompo/compression/keys.py), x itself otherwise;
2. the steps, in order, each an `UplinkStep` that maps what travels to what travels:
   * `Compress` (`--compress KEY=METHOD`): c = C(delta + e), and with error feedback the
     member keeps e <- delta + e - c (Karimireddy et al. 2019; e starts at zeros), in its
     client state under `RESIDUALS` (checkpointed with it);
   * `Clip` (`--dp-clip C`): every non-weight key's c of a member, concatenated, scaled by
     min(1, C / ||c||_2) (DP-FedAvg, McMahan et al. 2018), and each weight set to 1;
   * the user's own steps (`--uplink SPEC`), in the order given;
3. what the server decodes: weight * (payload[of] + c) for an update, c otherwise.

Clipping follows compression so that what the server sums is what is bounded (a QSGD
draw can be longer than its input). Keys whose values are neither tensors nor numbers
(a list of tensors of different sizes) travel unchanged. A key no step acts on is left
bit for bit as the algorithm returned it.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np
import torch

from raycompo.compression.keys import VALUE, Sent
from raycompo.compression.methods import Draws, Method
from raycompo.errors import ConfigError
from raycompo.seeding import COMPRESS, fold, fold_ids, generator

RESIDUALS = "_uplink"
"""The client-state key of a member's uplink state, {'phase:key': e (d,)} (error-feedback
residuals; a user's step may keep entries of its own there). The algorithm never sees it
(the engine takes it out before a phase and puts it back after)."""


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


class Kept(Sequence[dict[str, torch.Tensor]]):
    """The k members' uplink states (`Upload.kept`): a sequence of k dicts, {name: tensor},
    as a step reads and writes them, held as stacked rows where they came so (a batched
    chunk's states, `rows`: {name: (k, ...)}), so that `Compress` reads and writes each
    name's rows with one operation, not one per member. Indexing a member makes every
    member's dict once (the rows are then theirs, and a step's writes there are kept)."""

    def __init__(self, k: int, members: Sequence[dict[str, torch.Tensor]] | None = None,
                 rows: dict[str, torch.Tensor] | None = None):
        self.k = k
        self._rows: dict[str, torch.Tensor] | None = None if members is not None else dict(rows or {})
        self._members: list[dict[str, torch.Tensor]] | None = None if members is None else [dict(m) for m in members]

    def __len__(self) -> int:
        return self.k

    def __getitem__(self, i):  # type: ignore[override]
        return self.members()[i]

    def members(self) -> list[dict[str, torch.Tensor]]:
        """Each member's dict (made once from the rows: from then on the dicts hold them)."""
        if self._members is None:
            rows = self._rows or {}
            self._members = [{name: r[i].clone() for name, r in rows.items()} for i in range(self.k)]
            self._rows = None
        return self._members

    def rows(self, name: str, like: torch.Tensor) -> torch.Tensor | None:
        """(k, d): each member's `name`, zeros (of `like`'s row) where a member has none;
        None where no member has it."""
        if self._rows is not None:
            r = self._rows.get(name)
            return None if r is None else r.to(like.device, like.dtype)
        found = [m.get(name) for m in self._members or []]
        if all(v is None for v in found):
            return None
        zero = torch.zeros(like.shape[1:], dtype=like.dtype, device=like.device)
        return torch.stack([zero if v is None else v.to(like.device, like.dtype) for v in found])

    def set_rows(self, name: str, rows: torch.Tensor) -> None:
        """Member i's `name` becomes row i of `rows` (k, ...)."""
        if self._rows is not None:
            self._rows[name] = rows
            return
        for m, row in zip(self.members(), rows):
            m[name] = row.clone()

    def stacked(self) -> dict[str, torch.Tensor] | None:
        """{name: (k, ...)} while held as rows (no member's dict made), else None."""
        return self._rows


@dataclass
class Upload:
    """One exchange's contributions of k members as the steps see them (k = 1 on the
    per-client path, a chunk's members on the batched path: work row by row)."""

    phase: str
    round_: int
    members: list[tuple[int, int]]
    """(client id, its exchange number in this round) of each row."""
    out: dict[str, Any]
    """The contribution as the algorithm returned it."""
    rows: dict[str, torch.Tensor]
    """Its tensors and numbers as rows (k, d), as returned."""
    sent: dict[str, Sent]
    """How each key of `rows` travels (`Algorithm.contributions`)."""
    weights: dict[str, torch.Tensor]
    """Each weight's rows (k, 1), by key; a declared weight a step replaces is decoded as
    replaced (Clip: 1)."""
    kept: Kept
    """Each member's uplink state, {'phase:key' or a step's own name: tensor}, kept in its
    client state (checkpointed; restored after a probe): a sequence of k dicts. A step
    writes it, never itself."""
    moved: dict[str, torch.Tensor] = field(default_factory=dict)
    """What travels, {key: rows (k, d)}: the updates or values of the keys the steps act on."""
    encoded: dict[str, list[int]] = field(default_factory=dict)
    """{key: each member's encoded bytes} of the keys a step encodes (bytes_up, costs.csv)."""


class UplinkStep:
    """One step of the uplink. `keys(up)`: the keys of `up.rows` it acts on (default: all
    but the weights); `apply(up)`: what travels after it, {key: rows (k, d)} from
    `up.moved` (it may also set `up.weights`, `up.kept`, `up.encoded`). A user's step is a
    subclass made with no arguments (`--uplink 'file.py:Class'`); it runs on the hosts, so
    state that must last from one round to the next goes in `up.kept`."""

    name = "step"

    def keys(self, up: Upload) -> set[str]:
        return {key for key in up.rows if not up.sent[key].is_weight}

    def apply(self, up: Upload) -> dict[str, torch.Tensor]:
        raise NotImplementedError


class Compress(UplinkStep):
    """`--compress`: each key with a method compressed, with error feedback where the
    method keeps it; its encoded bytes in `up.encoded` (`methods` by key, '*': every
    non-weight tensor key not named). The random methods' draws of a member are keyed by
    (seed, COMPRESS, client, round, exchange, key): `keyed` (RunConfig.sampler 'keyed') the
    counter-based draws of the whole chunk at once, each member's seed that of the generator
    the other draws use (`derive_seed` of that key), else a generator per member (the draws
    of releases up to 0.1.1)."""

    name = "compress"

    def __init__(self, methods: dict[str, Method], seed: int, keyed: bool = True):
        self.methods, self.seed, self.keyed = methods, seed, keyed
        self._checked: set[tuple[str, str]] = set()
        self._prefix = fold(0, seed, COMPRESS)

    def method_of(self, sent: Sent, key: str, is_tensor: bool) -> Method | None:
        """The key's method: named, else '*' for a tensor that is not a weight."""
        if sent.is_weight:
            return None
        if key in self.methods:
            return self.methods[key]
        return self.methods.get("*") if is_tensor else None

    def keys(self, up: Upload) -> set[str]:
        """The keys with a method; ConfigError for a key named by --compress that the phase
        sends as neither a tensor nor a number."""
        for key in self.methods:
            if key != "*" and key in up.out and key not in up.rows:
                raise ConfigError(f"--compress {key}: phase {up.phase!r} sends {key} as "
                                  f"{type(up.out[key]).__name__}, which is not compressed (tensors and numbers are)")
        return {key for key in up.rows if self.method_of(up.sent[key], key, isinstance(up.out[key], torch.Tensor))}

    def apply(self, up: Upload) -> dict[str, torch.Tensor]:
        moved = dict(up.moved)
        mine = self.keys(up)
        for key in [key for key in moved if key in mine]:  # in the contribution's order
            method = self.methods[key] if key in self.methods else self.methods["*"]
            moved[key] = self.one(up, key, method, moved[key])
        return moved

    def one(self, up: Upload, key: str, method: Method, x: torch.Tensor) -> torch.Tensor:
        """One key's rows compressed (error feedback in `up.kept`, size in `up.encoded`)."""
        d = x.shape[1]
        if (up.phase, key) not in self._checked:
            method.check_size(d, key)
            self._checked.add((up.phase, key))
        name = f"{up.phase}:{key}"
        if method.feedback:
            e = up.kept.rows(name, x)
            if e is not None:
                x = x + e
        c = method.compress_rows(x, self.draws(up, key) if method.name in ("qsgd", "randk") else None)
        if method.feedback:
            up.kept.set_rows(name, x - c)
        up.encoded[key] = [math.ceil(method.bits(d) / 8)] * len(up.members)
        return c

    def draws(self, up: Upload, key: str) -> Draws:
        """The members' draws of `key` (`Draws`): (k,) seeds where keyed, else k generators."""
        tag = key_tag(up.phase, key)
        if not self.keyed:
            return [generator(self.seed, COMPRESS, cid, up.round_, call, tag) for cid, call in up.members]
        ids, calls = (np.array(col, dtype=np.int64) for col in zip(*up.members))
        seeds = fold_ids(self._prefix, ids, up.round_, calls, tag) >> np.uint64(1)  # derive_seed's 63 bits
        return torch.from_numpy(seeds.view(np.int64))


class Clip(UplinkStep):
    """`--dp-clip C`: each member's rows of every key scaled by min(1, C / ||all its
    rows||_2), and its weights set to 1 (DP-FedAvg's fixed denominator)."""

    name = "clip"

    def __init__(self, clip: float):
        self.clip = clip

    def keys(self, up: Upload) -> set[str]:
        return set(up.rows)

    def apply(self, up: Upload) -> dict[str, torch.Tensor]:
        moved = up.moved
        if moved:
            sq = sum(v.to(torch.float64).pow(2).sum(1, keepdim=True).cpu() for v in moved.values())
            assert isinstance(sq, torch.Tensor)
            scale = (self.clip / sq.sqrt().clamp_min(1e-300)).clamp(max=1.0)
            moved = {key: v * scale.to(v.device, v.dtype) for key, v in moved.items()}
        up.weights = {key: torch.ones_like(w) for key, w in up.weights.items()}
        return moved


@dataclass
class Uplink:
    """The steps of what clients send up, in order (`steps`): `Compress(methods)` where
    `methods` by key ('*': every non-weight key not named) is not empty, `Clip(clip)` where
    the DP clipping norm C is given, then the user's `extra` steps; `contributions` the
    algorithm's declaration (`Algorithm.contributions`); `keyed`: the compression's draws
    keyed (`Compress`)."""

    methods: dict[str, Method]
    clip: float | None
    contributions: dict[str, dict[str, Sent]]
    seed: int
    extra: list[UplinkStep] = field(default_factory=list)
    keyed: bool = True
    steps: list[UplinkStep] = field(init=False)

    def __post_init__(self) -> None:
        self.steps = (([Compress(self.methods, self.seed, self.keyed)] if self.methods else [])
                      + ([Clip(self.clip)] if self.clip is not None else []) + list(self.extra))

    def sent(self, phase: str, key: str) -> Sent:
        return self.contributions.get(phase, {}).get(key, VALUE)

    def apply(self, phase: str, round_: int, members: list[tuple[int, int]], out: dict[str, Any],
              payload: dict[str, Any], residuals: Kept | list[dict[str, torch.Tensor]],
              batched: bool) -> tuple[dict[str, Any], Kept, dict[str, list[int]]]:
        """The decoded contribution of k members (`members`: (client id, its exchange
        number in this round)); `out` one member's contribution (`batched` False) or a
        chunk's, each value (k, ...) or a list of k numbers; `residuals` the members' uplink
        states (a list of k dicts, or a `Kept` of stacked rows). Returns (decoded
        contribution, the members' new uplink states, {key: each member's encoded bytes} for
        the compressed keys)."""
        k = len(members)
        kept = residuals if isinstance(residuals, Kept) else Kept(k, members=residuals)
        if batched and any(isinstance(v, list) and any(map(isinstance, v, repeat(torch.Tensor))) for v in out.values()):
            return self._member_by_member(phase, round_, members, out, payload, kept.members())
        rows = as_rows(out, k, batched)
        sent = {key: self.sent(phase, key) for key in rows}
        weights = {key: rows[key] for key, s in sent.items() if s.is_weight or any(t.weight == key for t in sent.values())}
        up = Upload(phase, round_, members, out, rows, sent, weights, kept)
        touched = set().union(*(step.keys(up) for step in self.steps))
        if not touched:
            return out, kept, {}
        up.moved, refs = what_travels([key for key in rows if key in touched], sent, rows, weights, payload)
        for step in self.steps:
            up.moved = step.apply(up)
        if not isinstance(up.kept, Kept):  # a user's step that set a list of dicts there
            up.kept = Kept(k, members=up.kept)
        return decode(up, refs, k, batched), up.kept, up.encoded

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
        return joined, Kept(len(members), members=new_res), encoded


def as_rows(out: dict[str, Any], k: int, batched: bool) -> dict[str, torch.Tensor]:
    """The values of `out` that can be compressed, as rows (k, d): tensors, and numbers (a
    list of k numbers when `batched`) as float64; any other value is left out."""
    rows: dict[str, torch.Tensor] = {}
    for key, v in out.items():
        if isinstance(v, torch.Tensor):
            rows[key] = v.detach().reshape(k, -1)
        elif not batched and isinstance(v, (int, float)) and not isinstance(v, bool):
            rows[key] = torch.tensor([[float(v)]], dtype=torch.float64)
        elif batched and isinstance(v, list) and all(map(isinstance, v, repeat((int, float)))):
            rows[key] = torch.tensor([float(x) for x in v], dtype=torch.float64).view(k, 1)
    return rows


def what_travels(touched: list[str], sent: dict[str, Sent], rows: dict[str, torch.Tensor], weights: dict[str, torch.Tensor],
                 payload: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor | None]]:
    """Step 1, for each touched key but the weights (`weights` by weight key): the update
    x / weight - payload[of] for a key declared an update, x itself otherwise; (those rows,
    each update's payload[of] as one row, None where the payload lacks it)."""
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
            if s.weight in weights:
                x = x / weights[s.weight].to(x.device, x.dtype)
            if refs[key] is not None:
                x = x - refs[key]
        moved[key] = x
    return moved, refs


def decode(up: Upload, refs: dict[str, torch.Tensor | None], k: int, batched: bool) -> dict[str, Any]:
    """Step 3, what the server decodes: weight * (payload[of] + c) for an update, c
    otherwise, each in the form its value came in; a weight a step replaced, as replaced."""
    out = up.out
    result = dict(out)
    for key, c in up.moved.items():
        s = up.sent[key]
        if s.of is not None:
            if refs.get(key) is not None:
                c = c + refs[key]
            if s.weight in up.weights:
                c = c * up.weights[s.weight].to(c.device, c.dtype)
        result[key] = restore(c, out[key], k, batched)
    for key, w in up.weights.items():
        if up.sent[key].is_weight and w is not up.rows[key]:
            result[key] = restore(w, out[key], k, batched)
    return result


def restore(rows: torch.Tensor, like: Any, k: int, batched: bool) -> Any:
    """Rows (k, d) back in the form of the value they came from: a tensor of its shape and
    dtype, a number, or a list of k numbers."""
    if isinstance(like, torch.Tensor):
        return rows.reshape(like.shape).to(like.dtype)
    if batched:
        return [float(x) for x in rows.reshape(-1).tolist()]
    return float(rows.reshape(-1)[0])
