"""Local-BSGD (Huang et al. 2021), i.e. Local-MAML: local steps along the plain biased
compositional gradient, the MAML meta-gradient of each sampled task at its own adapted
parameters,

    x <- x - lr * 1/B sum_j J_j(x)^T grad L_j(x - lambda grad L_j(x; support_j); query_j),

and the server averages x every p steps. No inner state (SCGD with gamma = 1 per task).
"""

from __future__ import annotations

from raycompo.algorithms.local_compositional import (
    LocalCompositional,
    LocalCompositionalSettings,
    Recurrence,
)


class LocalBSGD(LocalCompositional):
    name = "local-bsgd"
    Settings = LocalCompositionalSettings
    batched_local = LocalCompositional.batched_local  # the family's batched local steps (only the recurrence differs)
    population_phases = frozenset({"local"})
    """A population's trials run the local steps as rows of one chunk (engine/population.py)."""
    row_settings = frozenset({"lr"})

    def recurrence(self) -> Recurrence:
        return Recurrence(step=self.s.lr, inner=None, momentum=None)
