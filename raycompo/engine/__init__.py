"""Runs an algorithm over clients. Only this package imports Ray.

    from raycompo.engine import run
"""

from __future__ import annotations

from typing import Any

__all__ = ["RunResult", "run"]


def __getattr__(name: str) -> Any:
    if name in __all__:  # lazy: importing the engine pulls in pandas and Ray helpers
        from raycompo.engine import runner

        return getattr(runner, name)
    raise AttributeError(name)
