"""Compression methods for one key of a contribution, as their papers define them.

Every method works on a (k, d) tensor: k clients' rows of one key, compressed as one
batched computation (the per-client path passes k = 1). It returns the decoded rows (what
the server reconstructs from the message) and says how many bits one row's message takes
(`Method.bits`, a function of d alone: every code here has a fixed width).

* `qsgd:S` (Alistarh et al., NeurIPS 2017): Q(x)_i = ||x||_2 sign(x_i) xi_i / S, with
  l = floor(S |x_i| / ||x||_2) and xi_i = l + 1 with probability S |x_i| / ||x||_2 - l,
  else l (unbiased: E Q(x) = x). Message: the norm (32 bits) and per entry a sign bit and
  its level 0..S in a fixed-width code of ceil(log2(S + 1)) bits (not Elias: a fixed
  width needs no data to count it; Elias coding would be shorter for sparse levels).
* `topk:K` / `randk:K` (Stich et al. 2018): keep the k largest-magnitude entries / k
  entries drawn uniformly without replacement; message: k values (32 bits) and k indices
  of ceil(log2 d) bits. K < 1 is a fraction of d (k = max(1, floor(K d))), K >= 1 a count.
  rand-k is unscaled (the error-feedback form: no d/k factor).
* `sign` (scaled sign, Karimireddy et al. 2019): (||x||_1 / d) sign(x): d bits and one float.

topk, randk and sign are biased and run with error feedback (`FEEDBACK`; the residuals are
kept and applied by raycompo/compression/uplink.py, in the client's state under
`RESIDUALS`). Pure torch; the random draws (`Draws`) are keyed by the caller (seed, client,
round, exchange, key): one generator per row (the draws of releases up to 0.1.1), or one
64-bit seed per row for the counter-based keyed draws of raycompo/keyed.py (a whole chunk's
rows in a fixed number of tensor operations, the same bits on the CPU and on CUDA).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from raycompo.errors import ConfigError
from raycompo.keyed import keyed_indices, keyed_uniform

Draws = list[torch.Generator] | torch.Tensor
"""The random methods' draws for k rows: a list of k generators (row i's levels `torch.rand`,
its entries `randperm`, from generator i), or a (k,) int64 tensor of 64-bit seeds (row i's
levels `keyed_uniform`, its entries `keyed_indices`, of seed i)."""

METHODS = ("qsgd", "topk", "randk", "sign")
"""The method names of `--compress KEY=METHOD[:PARAM]`."""

FEEDBACK = frozenset({"topk", "randk", "sign"})
"""Methods that keep an error-feedback residual (Karimireddy et al. 2019)."""

FLOAT_BITS = 32
"""Bits of one real value in a message (a norm, a scale, a kept entry): float32."""


@dataclass(frozen=True)
class Method:
    """One compression method and its parameter (S levels, or K entries / fraction)."""

    name: str
    param: float | None = None

    def __str__(self) -> str:
        return self.name if self.param is None else f"{self.name}:{self.param:g}"

    @property
    def feedback(self) -> bool:
        """Whether the method runs with error feedback."""
        return self.name in FEEDBACK

    def k_of(self, d: int) -> int:
        """Entries kept of a d-entry key by topk / randk: K >= 1 a count, K < 1 a fraction
        (at least one entry)."""
        assert self.param is not None
        return int(self.param) if self.param >= 1 else max(1, int(math.floor(self.param * d)))

    def check_size(self, d: int, key: str) -> None:
        """ConfigError where topk / randk would keep more entries than key `key` has (d)."""
        if self.name in ("topk", "randk") and self.k_of(d) > d:
            raise ConfigError(f"--compress {key}={self}: k = {self.k_of(d)} is above the key's size {d}; "
                              f"give k <= {d} or a fraction below 1")

    def compress_rows(self, x: torch.Tensor, gens: Draws | None = None) -> torch.Tensor:
        """`compress(x, self, gens)`: the decoded rows of x (k, d)."""
        return _compress(x, self, gens)

    def bits(self, d: int) -> int:
        """Bits of the message of one d-entry row (see the module's docstring)."""
        if self.name == "qsgd":
            assert self.param is not None
            return FLOAT_BITS + d * (1 + level_bits(int(self.param)))
        if self.name in ("topk", "randk"):
            k = min(self.k_of(d), d)
            return k * (FLOAT_BITS + index_bits(d))
        return d + FLOAT_BITS  # sign


def level_bits(s: int) -> int:
    """Bits of a QSGD level 0..s in a fixed-width code: ceil(log2(s + 1))."""
    return max(1, math.ceil(math.log2(s + 1)))


def index_bits(d: int) -> int:
    """Bits of an index into d entries: ceil(log2 d) (0 for d = 1)."""
    return math.ceil(math.log2(d)) if d > 1 else 0


def parse_method(text: str, key: str = "KEY") -> Method:
    """'qsgd:4', 'topk:0.01', 'randk:10', 'sign' -> Method; one-line ConfigError naming the
    setting and what is accepted otherwise."""
    name, sep, param = str(text).strip().partition(":")
    where = f"--compress {key}={text}"
    if name not in METHODS:
        raise ConfigError(f"{where}: unknown method {name!r}; accepted: qsgd:S, topk:K, randk:K, sign")
    if name == "sign":
        if sep:
            raise ConfigError(f"{where}: sign takes no parameter")
        return Method("sign")
    if not sep:
        raise ConfigError(f"{where}: {name} needs a parameter ({'qsgd:S, S >= 1 levels' if name == 'qsgd' else name + ':K'})")
    try:
        value = float(param)
    except ValueError:
        raise ConfigError(f"{where}: {param!r} is not a number") from None
    if not math.isfinite(value):
        raise ConfigError(f"{where}: {param!r} is not a finite number")
    if name == "qsgd":
        if value < 1 or value != int(value):
            raise ConfigError(f"{where}: S must be an integer >= 1 (levels), got {param}")
        return Method("qsgd", float(int(value)))
    if value <= 0:
        raise ConfigError(f"{where}: K must be > 0 (K < 1 a fraction of the key's size, K >= 1 a count), got {param}")
    if value >= 1 and value != int(value):
        raise ConfigError(f"{where}: K >= 1 is a count and must be an integer, got {param}")
    return Method(name, value)


def qsgd(x: torch.Tensor, s: int, u: torch.Tensor) -> torch.Tensor:
    """Q_s of each row of x (k, d), with u (k, d) uniform on [0, 1): level l + 1 where
    u < S |x_i| / ||x|| - l. A zero row stays zero."""
    norm = torch.linalg.vector_norm(x, dim=1, keepdim=True)
    r = x.abs() * (s / torch.where(norm > 0, norm, torch.ones_like(norm)))
    level = r.floor()
    level += (u < r - level).to(x.dtype)
    return x.sign() * level * (norm / s)


def topk(x: torch.Tensor, k: int) -> torch.Tensor:
    """Each row of x (k rows, d) with all but its k largest-magnitude entries zeroed."""
    idx = x.abs().topk(k, dim=1, sorted=False).indices
    return torch.zeros_like(x).scatter_(1, idx, x.gather(1, idx))


def randk(x: torch.Tensor, k: int, picks: torch.Tensor) -> torch.Tensor:
    """Each row of x with all but the entries `picks` (rows, k) zeroed (unscaled)."""
    return torch.zeros_like(x).scatter_(1, picks, x.gather(1, picks))


def scaled_sign(x: torch.Tensor) -> torch.Tensor:
    """(||x||_1 / d) sign(x), row by row."""
    return x.sign() * x.abs().mean(dim=1, keepdim=True)


def compress(x: torch.Tensor, method: Method, gens: Draws | None = None) -> torch.Tensor:
    """The decoded rows of x (k, d) under `method`; `gens`: the random methods' (qsgd,
    randk) draws for the k rows (`Draws`), keyed by the caller."""
    return method.compress_rows(x, gens)


def uniforms(gens: Draws, d: int, like: torch.Tensor) -> torch.Tensor:
    """(k, d) uniforms on [0, 1) in `like`'s dtype and device, drawn in float64."""
    if isinstance(gens, torch.Tensor):
        return keyed_uniform(gens.to(like.device), d).to(like.dtype)
    return torch.stack([torch.rand(d, generator=g, dtype=torch.float64) for g in gens]).to(like.device, like.dtype)


def entries(gens: Draws, d: int, k: int, device: torch.device) -> torch.Tensor:
    """(rows, k) int64: each row's k of d entries drawn uniformly without replacement."""
    if isinstance(gens, torch.Tensor):
        return keyed_indices(gens.to(device), [d] * len(gens), k)
    return torch.stack([torch.randperm(d, generator=g)[:k] for g in gens]).to(device)


def _compress(x: torch.Tensor, method: Method, gens: Draws | None) -> torch.Tensor:
    d = x.shape[1]
    if method.name == "qsgd":
        assert gens is not None and method.param is not None
        return qsgd(x, int(method.param), uniforms(gens, d, x))
    if method.name == "topk":
        return topk(x, method.k_of(d))
    if method.name == "randk":
        assert gens is not None
        k = method.k_of(d)
        return randk(x, k, entries(gens, d, k, x.device))
    return scaled_sign(x)
