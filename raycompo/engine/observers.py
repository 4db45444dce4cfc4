"""The observer interface, for code that imports it from the engine: it lives in
`raycompo.observers` (below the engine, so that the output writer `raycompo.results` can
implement it without importing the engine)."""

from raycompo.observers import Callback, Observer, Observers, Row, RunInfo

__all__ = ["Callback", "Observer", "Observers", "Row", "RunInfo"]
