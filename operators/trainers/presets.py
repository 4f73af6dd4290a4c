"""Model presets of the node-classification jobs, and the trainer for a worker count.

:data:`PRESETS` holds each model's published settings as dotted keys of a
:class:`~strata.operators.trainers.TrainConfig` (``lr``, ``model.hidden``): a job
with the config at ``train`` declares ``PRESETS = {"train.model.name":
presets("train")}``, so ``--set model=gat`` brings GAT's settings and any
``--set`` still overrides them.

* ``gcn``: Kipf & Welling (16 hidden, dropout 0.5, Adam 0.01, weight decay 5e-4
  on the first layer only, 200 epochs, early stopping with patience 10);
* ``gat``: Velickovic et al. (8 heads of 8 units, ELU, dropout 0.6 on features
  and attention, lr 0.005, weight decay 5e-4 on every parameter, patience 100
  within 1000 epochs);
* ``sage`` and ``gin``: GCN's sizes and schedule, weight decay on every parameter.

Examples:
    >>> config = preset_config("gat", seed=3)
    >>> config.model.heads, config.model.hidden, config.lr, config.seed
    (8, 8, 0.005, 3)
    >>> presets("train")["gin"]["train.decay_scope"]
    'all'
"""

from __future__ import annotations

from typing import Any

from strata.engine import Operator
from strata.operators.errors import OperatorError
from strata.operators.trainers.config import ModelConfig, TrainConfig
from strata.operators.trainers.full_graph import FullGraphTrainer

__all__ = ["PRESETS", "describe_training", "preset_config", "presets", "trainer_for"]

_GCN: dict[str, Any] = {
    "model.hidden": 16,
    "model.heads": 1,
    "model.dropout": 0.5,
    "model.attention_dropout": 0.0,
    "model.activation": "relu",
    "lr": 0.01,
    "weight_decay": 5e-4,
    "decay_scope": "first",
    "epochs": 200,
    "patience": 10,
}

#: Per model: dotted keys of a TrainConfig and their preset values.
PRESETS: dict[str, dict[str, Any]] = {
    "gcn": _GCN,
    "gat": {
        "model.hidden": 8,
        "model.heads": 8,
        "model.dropout": 0.6,
        "model.attention_dropout": 0.6,
        "model.activation": "elu",
        "lr": 0.005,
        "weight_decay": 5e-4,
        "decay_scope": "all",
        "epochs": 1000,
        "patience": 100,
    },
    "sage": {**_GCN, "decay_scope": "all"},
    "gin": {**_GCN, "decay_scope": "all"},
}


def presets(prefix: str = "") -> dict[str, dict[str, Any]]:
    """:data:`PRESETS` with every key under ``prefix`` (the config's place)."""
    lead = f"{prefix}." if prefix else ""
    return {
        name: {lead + key: value for key, value in values.items()}
        for name, values in PRESETS.items()
    }


def preset_config(model: str = "gcn", **settings: Any) -> TrainConfig:
    """The model's preset as a TrainConfig, with ``settings`` (its fields) over it.

    Raises:
        OperatorError: an unknown model, or a setting the config rejects.
    """
    if model not in PRESETS:
        raise OperatorError.build(
            "model", "preset_config", f"one of {sorted(PRESETS)}", repr(model)
        )
    values = dict(PRESETS[model])
    model_fields = {k.split(".", 1)[1]: v for k, v in values.items() if "." in k}
    train_fields = {k: v for k, v in values.items() if "." not in k}
    train_fields.update(settings)
    return TrainConfig(ModelConfig(model, **model_fields), **train_fields)


def trainer_for(config: TrainConfig, workers: int) -> Operator[Any, Any]:
    """The training step: one device, or a partition-parallel gang (exact mode).

    With ``config.plan == "auto"`` the planner chooses when the data arrives
    (:class:`~strata.operators.planning.auto.PlannedTrainer`).

    Raises:
        OperatorError: ``workers < 1``.
    """
    if workers < 1:
        raise OperatorError.build(
            "workers", "trainer_for", "workers >= 1", str(workers)
        )
    if config.plan == "auto":
        from strata.operators.planning.auto import PlannedTrainer

        return PlannedTrainer(config)
    if workers == 1:
        return FullGraphTrainer(config)
    from strata.operators.trainers.distributed import (
        DistributedConfig,
        DistributedTrainer,
    )

    dist = DistributedConfig(workers=workers, mode="exact", device="cpu")
    return DistributedTrainer(config, dist)


def describe_training(config: TrainConfig) -> str:
    """A one-line summary of the model and optimiser settings.

    Examples:
        >>> describe_training(preset_config("gcn"))[:45]
        'gcn: 2 layers, 16 hidden, relu, dropout 0.5, '
    """
    m = config.model
    heads = f"{m.heads} heads x " if m.name == "gat" else ""
    scope = "first layer" if config.decay_scope.value == "first" else "all"
    return (
        f"{m.name}: {m.num_layers} layers, {heads}{m.hidden} hidden, {m.activation}, "
        f"dropout {m.dropout}, lr {config.lr}, weight decay {config.weight_decay:g} "
        f"({scope}), epochs {config.epochs}, patience {config.patience}, "
        f"monitor {config.monitor.value}, seed {config.seed}"
    )
