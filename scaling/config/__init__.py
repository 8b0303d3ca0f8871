"""Typed sweep configuration: YAML in, validated dataclasses out, `section.key=value` overrides.

Every mistake a user can make in a config is caught here, before any compute, with one message
that names the key, the bad value and what would be accepted. The modules: `schema` (the
dataclasses; the batch section's in `batch`), `load` (parsing and overrides), `validate` and
`validate_batch` (the checks), `names` (the accepted names, and the analysis views' registry),
`arithmetic` (steps, examples, tokens, warm-up), `learning_rates` (each batch size's learning
rates and the schedules' multiplier), `optimizer` and `optimizer_rules` (the optimizer section
and its batch-size rules), `scale` (scale axes) and `targets` (what reaching a target means).
The names below are the public surface.
"""

from scaling.config.learning_rates import centered_lr, learning_rates
from scaling.config.load import apply_overrides, build, from_dict, load, to_dict, to_json, to_yaml
from scaling.config.names import (HYPERPARAMS, LR_MODES, LR_RULES, LR_SELECTIONS, METRICS,
                                  OPTIMIZERS, SCHEDULES)
from scaling.config.schema import (AXES, AnalysisConfig, BatchConfig, BatchScheduleConfig,
                                   BranchConfig, BudgetConfig,
                                   Config, DataConfig, EvalConfig, GNSConfig, LearningRateConfig,
                                   LogConfig, ModelConfig, OptimizerConfig, ParallelConfig,
                                   ReachedConfig, ScheduleConfig,
                                   TaskConfig, TrainConfig, grid_axes)
from scaling.config.validate import named_devices, parse_target, validate, validate_devices
from scaling.errors import ConfigError

__all__ = [
    "AXES", "HYPERPARAMS", "LR_MODES", "LR_RULES", "LR_SELECTIONS", "METRICS", "OPTIMIZERS",
    "SCHEDULES", "AnalysisConfig", "BatchConfig", "BatchScheduleConfig", "BranchConfig", "BudgetConfig", "Config", "ConfigError",
    "DataConfig", "EvalConfig", "GNSConfig", "LearningRateConfig", "LogConfig", "ModelConfig", "OptimizerConfig",
    "ParallelConfig", "ReachedConfig", "ScheduleConfig", "TaskConfig", "TrainConfig",
    "apply_overrides", "build", "centered_lr", "from_dict", "grid_axes", "learning_rates", "load",
    "named_devices", "parse_target", "to_dict", "to_json", "to_yaml", "validate", "validate_devices",
]
