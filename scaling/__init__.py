"""scaling: large-batch scaling experiments in JAX (critical batch size, noise scale, LR rules)."""

__version__ = "0.1.0"
