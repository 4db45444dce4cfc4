"""The papers' tasks; a module that defines a subclass of `Task` with a `name` is found
automatically. The registry (built-ins and installed packages' entry points:
`raycompo.list_tasks()`) and a user's own task, named by a spec ('file.py:Class',
'package.module:Class'), are `raycompo.configuration.plugins`'s: it sits above this package. A task from
arrays: `raycompo.tasks.from_data`."""

from __future__ import annotations

from raycompo.tasks.base import ClassificationTask, ClientData, Task

__all__ = ["ClassificationTask", "ClientData", "Task"]
