"""scaling.train.optimizers: every optimizer the config names has a factory."""

from __future__ import annotations

import inspect

from scaling.config.names import HYPERPARAMS, OPTIMIZERS
from scaling.train.optimizers import make_optimizer


def test_every_optimizer_name_has_a_factory_taking_its_hyperparameters():
    for name in OPTIMIZERS:
        assert tuple(inspect.signature(make_optimizer(name)).parameters) == HYPERPARAMS[name]
    assert set(HYPERPARAMS) == set(OPTIMIZERS)
