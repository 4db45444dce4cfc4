"""The papers' tasks by name; a module that defines a subclass of `Task` with a `name`
is found automatically. A user's own task is named by a spec ('file.py:Class',
'package.module:Class') or an entry point (see `raycompo.plugins`), or built from arrays
(`raycompo.tasks.from_data`)."""

from __future__ import annotations

from raycompo.tasks.base import ClassificationTask, ClientData, Task


def tasks() -> dict[str, type[Task]]:
    """Every registered task by name: the built-ins and installed packages' entry points."""
    from raycompo.plugins import registered

    return registered("task")


def task_class(spec: str | type) -> type[Task]:
    """The task a name, 'file.py:Class' or 'package.module:Class' spec names."""
    from raycompo.plugins import load

    return load("task", spec)


__all__ = ["ClassificationTask", "ClientData", "Task", "task_class", "tasks"]
