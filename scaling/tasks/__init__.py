"""Registry of workloads by config name (task.name)."""

from scaling.tasks.base import Task
from scaling.tasks.charlm import CharLM
from scaling.tasks.digits import Digits
from scaling.tasks.linreg import LinReg
from scaling.tasks.mnist1d import Mnist1D
from scaling.tasks.nqm import NQM

TASKS: dict[str, type[Task]] = {t.name: t for t in (NQM, LinReg, Digits, Mnist1D, CharLM)}


def build_task(cfg) -> Task:
    """The task object a config names, with its data built (deterministic given the options)."""
    return TASKS[cfg.task.name](cfg.task.options, cfg.model)
