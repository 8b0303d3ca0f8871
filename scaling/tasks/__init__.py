"""Registry of workloads by config name (task.name), and outside tasks by import path.

Each name maps to the import path of its Task class; a class is imported when a config first
names it, so reading the registry (the CLI's choices, `scaling plan`) does not load jax. A
config may also name any class by its import path, `package.module:Class` (docs/tasks.md).
The modules: `base` (the contract every task meets), `models`, `convnets` and `gpt` (the
networks), `gpt_shapes` (the GPT presets and parameter count, without jax), `storage` (where
data live, digests, caches), the workloads `nqm`, `linreg`, `digits`, `mnist1d`, `images`
(reading through `image_files`), `arrays` (a user's own arrays), `charlm` and `tokens`.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

from scaling.errors import ConfigError

if TYPE_CHECKING:  # the classes themselves load jax; the registry must not
    from scaling.tasks.base import Task

TASKS: dict[str, str] = {
    "nqm": "scaling.tasks.nqm:NQM",
    "linreg": "scaling.tasks.linreg:LinReg",
    "digits": "scaling.tasks.digits:Digits",
    "mnist1d": "scaling.tasks.mnist1d:Mnist1D",
    "charlm": "scaling.tasks.charlm:CharLM",
    "arrays": "scaling.tasks.arrays:Arrays",
    "tokens": "scaling.tasks.tokens:Tokens",
    "mnist": "scaling.tasks.images:MNIST",
    "fashion_mnist": "scaling.tasks.images:FashionMNIST",
    "cifar10": "scaling.tasks.images:CIFAR10",
    "svhn": "scaling.tasks.images:SVHN",
}


def is_import_path(name: str) -> bool:
    """'package.module:Class' names outside code; registry names have no colon."""
    return ":" in name


def import_object(path: str, key: str) -> Any:
    """The object at 'package.module:Name', or a ConfigError naming `key` and why it failed."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr or ":" in attr:
        raise ConfigError(f"{key}: got {path!r}, expected an import path package.module:Name")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(f"{key}: got {path!r}, but module {module_name!r} cannot be imported "
                          f"({err.__class__.__name__}: {err}); is its package installed or on "
                          "PYTHONPATH?") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{key}: got {path!r}, but module {module_name!r} has no attribute "
                          f"{attr!r}") from None


def task_class(name: str) -> type[Task]:
    """The Task class registered under `name` or found at its import path (ConfigError if
    neither: an unknown name, an import that fails, or a class that is not a Task)."""
    from_registry = name in TASKS
    if not from_registry and not is_import_path(name):
        raise ConfigError(f"task.name: got {name!r}, expected one of {', '.join(sorted(TASKS))} "
                          "or an import path package.module:Class")
    cls = import_object(TASKS.get(name, name), "task.name")
    if from_registry:
        return cls
    # A subclass of Task has imported scaling.tasks.base already; importing it here would load
    # jax for `scaling plan`, and anything else cannot be a Task.
    base = sys.modules.get("scaling.tasks.base")
    if base is None or not (isinstance(cls, type) and issubclass(cls, base.Task)):
        raise ConfigError(f"task.name: got {name!r}, which is {cls!r}, expected a subclass of "
                          "scaling.tasks.base.Task (docs/tasks.md)")
    return cls


def build_task(cfg) -> Task:
    """The task object a config names, with its data built (deterministic given the options)."""
    return task_class(cfg.task.name)(cfg.task.options, cfg.model)
