"""The papers' tasks by name; a module that defines a subclass of `Task` with a `name`
is found automatically."""

from __future__ import annotations

import sys

from raycompo.registry import discover, lookup
from raycompo.tasks.base import ClassificationTask, ClientData, Task


def tasks() -> dict[str, type[Task]]:
    return discover(sys.modules[__name__], Task)


def task_class(name: str) -> type[Task]:
    return lookup(tasks(), name, "task")


__all__ = ["ClassificationTask", "ClientData", "Task", "task_class", "tasks"]
