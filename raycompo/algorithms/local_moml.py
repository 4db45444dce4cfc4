"""Local-MOML: memory-based MAML (Wang et al. 2021) with local updates, the Local-SCGDM
paper's baseline (section 5.1).

Every task i has its own inner state u_i (the "memory"), kept on the client that owns
the task for the whole run (in the Ray backend: inside the client's host actor). When
task i is sampled at a local step:

    u_i <- (1 - gamma) u_i + gamma (x - lambda grad L_i(x; support))    (u_i = the new value the first time)
    x   <- x - lr * 1/B sum_i J_i(x)^T grad L_i(u_i; query)

Every p steps the server averages x only (the u_i are per task, hence per client).
`gamma` weighs the NEW value; the paper's sinusoid values: lr 0.01, gamma 0.7. MOML
needs a finite set of training tasks (maml-sinusoid), as the paper notes for Omniglot.
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
class LocalMOMLSettings(LocalCompositionalSettings):
    gamma: float = 0.7
    """gamma, per-task inner-state coefficient: u_i <- (1 - gamma) u_i + gamma g_i(x) (weight of the new value)."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        require_coefficient("gamma", self.gamma, closed=True)


class LocalMOML(LocalCompositional):
    name = "local-moml"
    Settings = LocalMOMLSettings
    batched_local = LocalCompositional.batched_local  # the family's batched local steps (only the recurrence differs)
    population_phases = frozenset({"local"})
    """A population's trials run the local steps as rows of one chunk (engine/population.py)."""
    row_settings = frozenset({"lr", "gamma"})

    def recurrence(self) -> Recurrence:
        return Recurrence(step=self.s.lr, inner=self.s.gamma, momentum=None, per_task=True)
