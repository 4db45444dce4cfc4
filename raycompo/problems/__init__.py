"""Compositional objectives as pure torch functions (no Ray).

Local composition (ComFedL, Local-SCGDM):  F(w) = 1/n sum_i g_i(f_i(w)).
"""

from raycompo.problems.composition import LocalComposition, compositional_gradient
from raycompo.problems.dro import KLDRO

__all__ = ["KLDRO", "LocalComposition", "compositional_gradient"]
