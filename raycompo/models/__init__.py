"""Models used through a flat parameter vector (what the federation averages)."""

from raycompo.models.cnn4 import CNN4
from raycompo.models.flat import FlatModel
from raycompo.models.logistic import LogisticRegression
from raycompo.models.mlp import MLP

__all__ = ["CNN4", "FlatModel", "LogisticRegression", "MLP"]
