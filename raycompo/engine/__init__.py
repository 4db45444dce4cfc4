"""Runs an algorithm over clients. Only this package imports Ray."""

from raycompo.engine.runner import RunResult, run

__all__ = ["RunResult", "run"]
