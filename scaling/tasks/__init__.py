"""Registry of workloads by config name (task.name).

Each name maps to the import path of its Task class; a class is imported when a config first
names it, so reading the registry (the CLI's choices, `scaling plan`) does not load jax.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the classes themselves load jax; the registry must not
    from scaling.tasks.base import Task

TASKS: dict[str, str] = {
    "nqm": "scaling.tasks.nqm:NQM",
    "linreg": "scaling.tasks.linreg:LinReg",
    "digits": "scaling.tasks.digits:Digits",
    "mnist1d": "scaling.tasks.mnist1d:Mnist1D",
    "charlm": "scaling.tasks.charlm:CharLM",
}


def task_class(name: str) -> type[Task]:
    """The Task class registered under `name` (KeyError for an unknown name)."""
    module, cls = TASKS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def build_task(cfg) -> Task:
    """The task object a config names, with its data built (deterministic given the options)."""
    return task_class(cfg.task.name)(cfg.task.options, cfg.model)
