"""Local-SCGDM (Gao, Li & Huang, Algorithm 1): local stochastic compositional gradient
descent with momentum.

On every device k, each of the p local steps of a round (t = 0 uses lines 3-5):

    u_{t+1} = (1 - gamma eta) u_t + gamma eta g(x_t; xi_t)           line 7
    z_t     = grad g(x_t; xi_t)^T grad f(u_{t+1}; zeta_t)             line 8
    m_{t+1} = (1 - alpha eta) m_t + alpha eta z_t                     line 9
    x_{t+1} = x_t - beta eta m_{t+1}                                  line 11

and every p steps the server averages x, m AND u over the devices (lines 12-16).

Conventions: `gamma` and `alpha` weigh the NEW value, as in the algorithm box (the
paper's prose calls gamma the "inner state momentum coefficient"); section 3.1
requires 0 < gamma*eta < 1 and 0 < alpha*eta < 1, which `validate` enforces. `lr` is
beta, so the step is lr * eta. The paper's sinusoid values (section 5.1): eta 1, beta
0.01, alpha 0.8, gamma 0.7, p 5.

`per_task_state=true` keeps one inner state u_i per task on the client that owns it
(section 5.1, last sentence of the settings: the fair comparison with Local-MOML); then
only x and m are averaged, since each u_i exists on one client only. The maml-sinusoid
task makes it the default there; `per_task_state=false` gives the shared u.
"""

from __future__ import annotations

from dataclasses import dataclass

from raycompo.algorithms.local_compositional import (
    LocalCompositional,
    LocalCompositionalSettings,
    Recurrence,
    require_coefficient,
)
from raycompo.settings import require


@dataclass
class LocalSCGDMSettings(LocalCompositionalSettings):
    eta: float = 1.0
    """eta: scales the step (beta*eta) and both moving-average weights (gamma*eta, alpha*eta)."""
    alpha: float = 0.8
    """alpha, momentum coefficient: m <- (1 - alpha*eta) m + alpha*eta z (weight of the new gradient)."""
    gamma: float = 0.7
    """gamma, inner-state coefficient: u <- (1 - gamma*eta) u + gamma*eta g(x) (weight of the new value)."""
    per_task_state: bool = False
    """One inner state u_i per task, kept on the owning client and not averaged (section 5.1).
    Default false (Algorithm 1: one u, averaged); maml-sinusoid defaults it to true, as the
    paper's section 5.1 runs it."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        require(self.eta > 0, f"eta must be > 0, got {self.eta}")
        require_coefficient("gamma*eta", self.gamma * self.eta)
        require_coefficient("alpha*eta", self.alpha * self.eta)


class LocalSCGDM(LocalCompositional):
    name = "local-scgdm"
    Settings = LocalSCGDMSettings
    batched_local = LocalCompositional.batched_local  # the family's batched local steps (only the recurrence differs)
    population_phases = frozenset({"local"})
    """A population's trials run the local steps as rows of one chunk (engine/population.py)."""
    row_settings = frozenset({"lr", "eta", "alpha", "gamma"})

    def recurrence(self) -> Recurrence:
        s = self.s
        return Recurrence(
            step=s.lr * s.eta,
            inner=s.gamma * s.eta,
            momentum=s.alpha * s.eta,
            per_task=s.per_task_state,
        )
