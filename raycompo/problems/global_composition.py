"""The global-composition shape of FedDRO (eq. 2):

    Phi(x) = h(x) + f(g(x)),   h = 1/K sum_k h_k,   g = 1/K sum_k g_k,

where the inner map g is spread over the K clients (unlike ComFedL's local shape
1/n sum_i g_i(f_i(w)), see `composition.py`). Every objective here is a mean over a
client's samples of per-sample terms, so

    g_k(x; b) = 1/|b| sum_{i in b} phi_i(x)  in R^{d_g},   h_k(x; b) = 1/|b| sum_i psi_i(x)

and a full-data value or gradient can be summed chunk by chunk (`full_parts`).

DRO objectives (section 2.1), on the per-sample losses l_i = l(x; zeta_i):

* KL-regularized DRO, eq. (4):  g = mean exp(l / lam),  f = log,  h = 0.
* chi-square DRO as printed, eq. (5):  g = mean l,  f(y) = y^2 / (2 lam),
  h = -1/(2 lam m) sum l^2.  Note: (5) as printed equals -Var(l) / (2 lam); it lacks the
  mean-loss term of (3) and its sign makes the problem favour a large loss variance.
  We implement it verbatim as `chi2` (the issue asks for it).
* `chi2-dro`: our derivation of (3) with the chi-square divergence, ignoring p >= 0:
  max_p sum p_i l_i - lam m/2 sum (p_i - 1/m)^2 = mean l + Var(l) / (2 lam), i.e.
  h = mean(l + l^2 / (2 lam)),  g = mean l,  f(y) = -y^2 / (2 lam).

Pure torch, no Ray.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.func import grad, jacrev, vmap

from raycompo.problems.oracle import wrap_oracles
from raycompo.settings import row_scalar

SampleLosses = Callable[[torch.Tensor, Any], torch.Tensor]
"""(w, batch) -> per-sample losses l(w; zeta_i), shape (|b|,)."""


class GlobalComposition:
    """h(x) + f(g(x)) with per-sample inner terms phi_i (shape (n, d_g)) and outer h terms
    psi_i (shape (n,)). Subclasses define `g_samples`, `f`, and (when `has_h`) `h_samples`."""

    has_h: bool = False
    d_g: int = 1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wrap_oracles(cls, ("g_samples", "h_samples"))  # a task's own composition is counted (problems/oracle.py)

    def g_samples(self, w: torch.Tensor, batch: Any) -> torch.Tensor:
        raise NotImplementedError

    def h_samples(self, w: torch.Tensor, batch: Any) -> torch.Tensor:
        raise NotImplementedError

    def f(self, y: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    # --- mini-batch values -------------------------------------------------------------
    def g(self, w: torch.Tensor, batch: Any) -> torch.Tensor:
        """g_k(w; b) in R^{d_g}."""
        return self.g_samples(w, batch).mean(0)

    def h(self, w: torch.Tensor, batch: Any) -> torch.Tensor:
        """h_k(w; b), a scalar (0 when the objective has no h)."""
        if not self.has_h:
            return w.new_zeros(())
        return self.h_samples(w, batch).mean()

    def grad_f(self, y: torch.Tensor) -> torch.Tensor:
        return grad(self.f)(y)

    per_row: bool = False
    """Whether a parameter of the objective (lam, the KL shift) is a population's (k,)
    tensor, one trial's value per row (engine/population.py): its batched parts then take
    (k, B) losses and (k, d_g) estimates, row i with row i's value (`grad_f_rows`)."""

    def grad_f_rows(self, y: torch.Tensor) -> torch.Tensor:
        """grad f at each row of y (k, d_g), row i with the objective's row-i parameters."""
        return vmap(self.grad_f)(y)

    def row(self, i: int) -> GlobalComposition:
        """The objective of row i alone: itself, or where it is `per_row` a copy with row i's
        values as numbers (a client's own data read apart from the chunk's rows)."""
        if not self.per_row:
            return self
        values = {name: float(v[i]) for name in ("lam", "shift") if isinstance(v := getattr(self, name, None), torch.Tensor)}
        return dataclasses.replace(self, **values)  # type: ignore[type-var]


def _per_sample(v: torch.Tensor) -> torch.Tensor:
    return v.reshape(-1, 1)


class LossComposition(GlobalComposition):
    """A DRO objective on per-sample losses l_i: phi_i = g_of_loss(l_i) (d_g = 1) and
    psi_i = h_of_loss(l_i), elementwise. Its batched form (problems/global_batched.py)
    needs only the task's batched per-sample losses."""

    sample_losses: SampleLosses

    @property
    def per_row(self) -> bool:  # type: ignore[override]
        return any(isinstance(v, torch.Tensor) for v in (getattr(self, "lam", None), getattr(self, "shift", None)))

    def g_of_loss(self, losses: torch.Tensor) -> torch.Tensor:
        """phi of each loss: (n,) for one client, or (k, B) for a chunk's rows, whose lam
        (and shift) may be per row (`per_row`: `settings.row_scalar` views them (k, 1))."""
        raise NotImplementedError

    def h_of_loss(self, losses: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def g_samples(self, w, batch):
        return _per_sample(self.g_of_loss(self.sample_losses(w, batch)))

    def h_samples(self, w, batch):
        return self.h_of_loss(self.sample_losses(w, batch))


@dataclass
class KLDRO(LossComposition):
    """Eq. (4): Phi = log(1/m sum exp(l_i / lam)). `shift` s rescales g by exp(-s / lam)
    (Phi shifts by -s / lam, the gradient does not change): it keeps exp finite."""

    sample_losses: SampleLosses
    lam: float
    shift: float = 0.0

    def g_of_loss(self, losses):
        return torch.exp((losses - row_scalar(self.shift, losses)) / row_scalar(self.lam, losses))

    def f(self, y):
        return torch.log(y).sum()

    def grad_f(self, y):
        """1 / y at y projected onto [exp(-shift / lam), inf), the range of g for losses
        >= 0: the hybrid estimate (8) of g can leave it (even turn negative) with small
        batches, where 1 / y would flip the step's sign."""
        return 1.0 / y.clamp(min=math.exp(-self.shift / self.lam))

    def grad_f_rows(self, y):
        if not self.per_row:
            return super().grad_f_rows(y)
        floor = torch.exp(-row_scalar(self.shift, y) / row_scalar(self.lam, y))  # (k, 1)
        return 1.0 / torch.maximum(y, floor)


@dataclass
class Chi2DRO(LossComposition):
    """Eq. (5) as printed: h = -mean l^2 / (2 lam), g = mean l, f = g^2 / (2 lam)."""

    sample_losses: SampleLosses
    lam: float
    has_h = True

    def g_of_loss(self, losses):
        return losses

    def h_of_loss(self, losses):
        return -losses**2 / (2 * row_scalar(self.lam, losses))

    def f(self, y):
        return (y**2).sum() / (2 * self.lam)

    def grad_f_rows(self, y):
        return y / row_scalar(self.lam, y) if self.per_row else super().grad_f_rows(y)


@dataclass
class Chi2Penalty(LossComposition):
    """mean l + Var(l) / (2 lam): h = mean(l + l^2 / (2 lam)), g = mean l, f = -g^2 / (2 lam)."""

    sample_losses: SampleLosses
    lam: float
    has_h = True

    def g_of_loss(self, losses):
        return losses

    def h_of_loss(self, losses):
        return losses + losses**2 / (2 * row_scalar(self.lam, losses))

    def f(self, y):
        return -(y**2).sum() / (2 * self.lam)

    def grad_f_rows(self, y):
        return -y / row_scalar(self.lam, y) if self.per_row else super().grad_f_rows(y)


OBJECTIVES: dict[str, type] = {"kl": KLDRO, "chi2": Chi2DRO, "chi2-dro": Chi2Penalty}


def dro_objective(name: str, sample_losses: SampleLosses, lam: float, **kwargs) -> GlobalComposition:
    return OBJECTIVES[name](sample_losses, lam, **kwargs)


# --- gradients ------------------------------------------------------------------------
def g_value_and_jacobian(problem: GlobalComposition, w: torch.Tensor, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(g_k(w; b), its Jacobian (d_g, d)). For the DRO objectives d_g = 1, so the
    Jacobian costs one backward pass; it lets a client apply eq. (7) once y-bar arrives
    without recomputing g."""
    def fn(v):
        value = problem.g(v, batch)
        return value, value

    jac, value = jacrev(fn, has_aux=True)(w)
    return value.detach(), jac.detach()


def h_grad(problem: GlobalComposition, w: torch.Tensor, batch: Any) -> torch.Tensor | None:
    """grad h_k(w; b), or None when h = 0."""
    if not problem.has_h:
        return None
    return grad(problem.h)(w, batch).detach()


def direction(problem: GlobalComposition, jac_g: torch.Tensor, y: torch.Tensor, grad_h: torch.Tensor | None) -> torch.Tensor:
    """Eq. (7): grad h_k(x; b_h) + grad g_k(x; b_g) grad f(y)."""
    d = jac_g.T @ problem.grad_f(y).to(jac_g.dtype)
    return d if grad_h is None else d + grad_h


def full_parts(problem: GlobalComposition, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, chunk: int = 1024, with_grad: bool = True) -> dict[str, torch.Tensor]:
    """Full-data g_k, h_k (and their Jacobian / gradient) of one client, chunk by chunk.

    Returns {"g": (d_g,), "h": (), "jac_g": (d_g, d), "grad_h": (d,)} in float64, the
    last two only with `with_grad`."""
    n = len(y)
    out: dict[str, torch.Tensor] = {}

    def acc(k, v):
        v = v.detach().to(torch.float64)
        out[k] = out[k] + v if k in out else v

    for s in range(0, n, chunk):
        b = (x[s : s + chunk], y[s : s + chunk])
        weight = len(b[1]) / n
        if with_grad:
            value, jac = g_value_and_jacobian(problem, w, b)
            acc("g", weight * value)
            acc("jac_g", weight * jac)
            gh = h_grad(problem, w, b)
            acc("grad_h", weight * gh if gh is not None else torch.zeros_like(w))
        else:
            with torch.no_grad():
                acc("g", weight * problem.g(w, b))
        with torch.no_grad():
            acc("h", weight * problem.h(w, b))
    return out


def phi_from_parts(problem: GlobalComposition, parts: dict[str, torch.Tensor]) -> dict[str, float]:
    """Phi = h + f(g) and ||grad Phi|| = ||grad h + J_g^T grad f(g)|| from averaged parts."""
    g = parts["g"]
    out = {"objective": float(parts["h"] + problem.f(g))}
    if "jac_g" in parts:
        gr = parts["jac_g"].T @ problem.grad_f(g).to(torch.float64) + parts["grad_h"]
        out["grad_norm"] = float(torch.linalg.vector_norm(gr))
    if not math.isfinite(out["objective"]):
        out["objective"] = float("nan")
    return out


def phi(problem: GlobalComposition, w: torch.Tensor, batches: list[Any]) -> torch.Tensor:
    """Phi(w) computed directly (autograd-friendly): 1/K sum h_k + f(1/K sum g_k), one
    batch per client (e.g. each client's full data)."""
    K = len(batches)
    g = sum(problem.g(w, b) for b in batches) / K
    h = sum(problem.h(w, b) for b in batches) / K
    return h + problem.f(g)
