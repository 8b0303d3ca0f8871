"""The names a config may use, kept once: the config validates against them, the CLI offers
them as choices, and the code that implements each one is keyed by them."""

OPTIMIZERS = ("sgd", "momentum", "nesterov", "adam", "adamw")
SCHEDULES = ("constant", "linear", "cosine")
LR_MODES = ("grid", "rule", "centered")
LR_RULES = ("linear", "sqrt", "constant", "noise_scale")
METRICS = ("train_loss", "eval_loss", "eval_accuracy")
LR_SELECTIONS = ("min", "crossfit")
VIEWS = ("steps", "fixed_budget", "both")  # analysis.view
PLACEMENTS = ("auto", "device", "host")
PRECISIONS = ("auto", "float32", "bfloat16")
WANDB_MODES = ("online", "offline")
BATCH_LR_RULES = ("linear", "sqrt", "constant")  # the learning rate when the batch grows
BRANCH_METRICS = ("eval_loss", "train_loss")
BATCH_SCHEDULES = ("steps", "doubling", "noise_scale")

# The scalars each optimizer family reads (its optax factory takes exactly these).
HYPERPARAMS: dict[str, tuple[str, ...]] = {
    "sgd": ("learning_rate", "weight_decay"),
    "momentum": ("learning_rate", "momentum", "weight_decay"),
    "nesterov": ("learning_rate", "momentum", "weight_decay"),
    "adam": ("learning_rate", "b1", "b2", "eps", "weight_decay"),
    "adamw": ("learning_rate", "b1", "b2", "eps", "weight_decay"),
}
