"""Runs an algorithm over clients. Only this package imports Ray.

    from raycompo.engine import run
"""

from __future__ import annotations

from typing import Any

__all__ = ["RunResult", "run"]


def __getattr__(name: str) -> Any:  # lazy: raycompo.config imports engine.backends
    if name in __all__:
        from raycompo.engine import runner

        return getattr(runner, name)
    raise AttributeError(name)
