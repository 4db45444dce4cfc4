"""The observer interface, for code that imports it from the engine: it lives in
`raycompo.watch.observers` (below the engine, so that the output writer `raycompo.runfolder.results` can
implement it without importing the engine)."""

from raycompo.watch.observers import Callback, Observer, Observers, Row, RunInfo

__all__ = ["Callback", "Observer", "Observers", "Row", "RunInfo"]
