"""raycompo: a Ray-based simulation engine for federated compositional optimization.

Layers (each depends only on those above it):
  problems/    compositional objectives as pure torch functions
  algorithms/  one file per algorithm: client hooks + the server's round, pure torch
  data/, models/, tasks/   data sets, partitions, models, and the papers' tasks
  engine/      runs an algorithm over clients: inline (reference) and Ray backends
  run, tune, bench         entry points
"""

__version__ = "0.1.0"
