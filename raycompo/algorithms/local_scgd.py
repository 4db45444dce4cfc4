"""Local-SCGD: federated SCGD (Wang et al. 2017a), the Local-SCGDM paper's baseline
(section 5.1: "we average the model states and inner states u every p local iterations").

Each local step (eq. 2 of the Local-SCGDM paper):

    u <- (1 - gamma) u + gamma g(x; xi)          (u = g(x_0; xi_0) at the first step)
    x <- x - lr * grad g(x; xi)^T grad f(u; zeta)

The outer gradient is taken at the updated u, as in SCGD's original statement and
Local-SCGDM's line 8 (eq. 2 of the paper writes u_t). Every p steps the server averages
x and u. `gamma` weighs the NEW value (algorithm-box convention); the paper's sinusoid
value is 0.9 ("diverges with smaller values"), Omniglot 0.99.
"""

from __future__ import annotations

from dataclasses import dataclass

from raycompo.algorithms.local_compositional import (
    LocalCompositional,
    LocalCompositionalSettings,
    Recurrence,
    require_coefficient,
)


@dataclass
class LocalSCGDSettings(LocalCompositionalSettings):
    gamma: float = 0.9
    """gamma, inner-state coefficient: u <- (1 - gamma) u + gamma g(x) (weight of the new value; 1 = no averaging)."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        require_coefficient("gamma", self.gamma, closed=True)


class LocalSCGD(LocalCompositional):
    name = "local-scgd"
    Settings = LocalSCGDSettings
    batched_local = LocalCompositional.batched_local  # the family's batched local steps (only the recurrence differs)
    population_phases = frozenset({"local"})
    """A population's trials run the local steps as rows of one chunk (engine/population.py)."""
    row_settings = frozenset({"lr", "gamma"})

    def recurrence(self) -> Recurrence:
        return Recurrence(step=self.s.lr, inner=self.s.gamma, momentum=None)
