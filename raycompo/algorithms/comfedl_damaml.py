"""ComFedL-DAMAML (ComFedL section 5.2, journal 5.2): ComFedL's Algorithm 1 on problem (10),

    min_w 1/n sum_i exp(f_i(w - eta_in * grad f_i(w)) / gamma),

the distribution-agnostic (task-robust) MAML problem (8) made a composition by the KL
regularization of problem (9). Same inner map and batches as ComFedL-MAML; the outer
function is g^i(y; B~) = exp(f_i(y; B~) / gamma), so a client's step is its MAML step
scaled by exp(f_i / gamma) / gamma: clients with a high loss move faster.

`normalizer="lse"` optimizes the log-sum-exp form gamma log(1/n sum_i exp(f_i(...)/gamma))
(problem (9) maximized over the weights) instead: the client's MAML step is scaled by
exp((f_i - c)/gamma), c the cohort's log-mean-exp at w_s (see comfedl.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from raycompo.algorithms.comfedl import require_normalizer
from raycompo.algorithms.comfedl_maml import ComFedLMaml, ComFedLMamlSettings
from raycompo.problems.maml import MAML
from raycompo.settings import require


@dataclass
class ComFedLDamamlSettings(ComFedLMamlSettings):
    gamma: float = 0.5
    """KL regularization gamma of problem (9): outer g(y) = exp(f_i(y) / gamma) (journal: 0.5)."""
    normalizer: str = "none"
    """'none': problem (10), steps scaled by exp(f_i/gamma)/gamma (the paper). 'lse': the
    log-sum-exp form, steps scaled by exp((f_i - c)/gamma), c the cohort's log-mean-exp of
    f_i(w_s) (one extra scalar exchange per round; stable at small gamma)."""

    def validate(self, n_clients: int) -> None:
        super().validate(n_clients)
        require(self.gamma > 0, f"gamma must be > 0, got {self.gamma}")
        require_normalizer(self.normalizer)


class ComFedLDamaml(ComFedLMaml):
    name = "comfedl-damaml"
    Settings = ComFedLDamamlSettings

    def build_problem(self):
        return MAML(
            self.task.loss, self.s.inner_lr, gamma=self.s.gamma, first_order=self.s.first_order
        )
