"""ComFedL-MAML (ComFedL section 5.2): ComFedL's Algorithm 1 on the one-step MAML problem (7),

    min_w 1/n sum_i f_i(w - eta_in * grad f_i(w)),

each client a task: inner map y = f^i(w; B) = w - eta_in * grad f_i(w; B) on a support
batch B, outer g^i(y; B~) = f_i(y; B~) on an independent query batch B~ (both mini-batches
of the client's training data). The local step direction is the compositional gradient
(I - eta_in * H_i(w; B)) grad f_i(y; B~), Hessian-vector product included
(`first_order=true` drops it). Clients are evaluated after `eval_adapt_steps` (default
one) gradient step of size eta_in on a support batch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from raycompo.algorithms.base import LocalSettings
from raycompo.algorithms.comfedl import ComFedL
from raycompo.algorithms.personalized import AdaptedEvaluation, MamlFields
from raycompo.problems.maml import MAML


@dataclass
class ComFedLMamlSettings(MamlFields, LocalSettings):
    lr: float = 0.1
    """Outer (meta) learning rate eta of the local steps w <- w - eta * u (journal: 0.1)."""


class ComFedLMaml(AdaptedEvaluation, ComFedL):
    name = "comfedl-maml"
    Settings = ComFedLMamlSettings

    def __init__(self, settings, task):
        # ComFedL's client_local draws B~ of size outer_batch_size; None means batch_size here.
        settings = dataclasses.replace(settings, outer_batch_size=settings.query_batch_size())
        super().__init__(settings, task)

    def build_problem(self):
        return MAML(self.task.loss, self.s.inner_lr, first_order=self.s.first_order)
