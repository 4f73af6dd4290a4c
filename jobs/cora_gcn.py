"""Semi-supervised node classification on Cora with a 2-layer GCN: the main job.

Kipf & Welling's setting (``make run``): the public Planetoid split (140 training,
500 validation, 1000 test nodes), row-normalised bag-of-words features, a 2-layer
GCN with 16 hidden units, dropout 0.5, Adam with learning rate 0.01 and weight decay
5e-4 on the first layer only (as their code and PyG's ``gcn.py`` example), at most
200 epochs with early stopping on the validation loss (``patience=10``, their window
of 10 epochs). The reported accuracies are those of the weights of the epoch with
the lowest validation loss (``patience=0`` trains all epochs)::

    load (Planetoid payload) -> train (FullGraphTrainer) -> summary (outputs)

    strata run jobs/cora_gcn.py
    strata run jobs/cora_gcn.py --set model=gat --set seed=3 --executor process

``model`` picks a preset of the other settings (:data:`PRESETS`): ``gat`` follows
Velickovic et al. (8 heads of 8 units, ELU, dropout 0.6 on features and attention,
learning rate 0.005, weight decay 5e-4 on every parameter, and their protocol of
early stopping with patience 100, here within at most 1000 epochs); ``sage`` and
``gin`` use GCN's sizes. Any preset value can be overridden with ``--set``
(``hidden``, ``lr``, ...); ``none`` keeps the preset.

``threads`` defaults to 1: Cora's operations are too small for torch's intra-op
threads to pay off, and on a shared machine idle-spinning worker threads made an
epoch several times slower (``--set threads=0`` keeps torch's default).

``workers`` > 1 trains partition-parallel on a gang of that many processes
(:class:`~strata.operators.trainers.distributed.DistributedTrainer`, exact mode: halo
exchange every layer), whose results equal single-device training up to float
rounding. One caveat: a partitioned run cannot reproduce torch's dropout masks,
so it draws counter-based masks keyed by (seed, epoch, layer, node);
``masks=counter`` makes a one-device run draw the same ones
(:class:`~strata.operators.trainers.distributed.CounterDropoutTrainer`), so
``--set workers=1 --set masks=counter`` and ``--set workers=2`` train the same
model. ``masks=auto`` (the default) is torch's masks on one device, counter
masks on a gang::

    strata run jobs/cora_gcn.py --set workers=2

References:
    Thomas N. Kipf, Max Welling. *Semi-Supervised Classification with Graph
    Convolutional Networks*. ICLR 2017, arXiv:1609.02907 (GCN: 81.5% on Cora).
    Petar Velickovic et al. *Graph Attention Networks*. ICLR 2018,
    arXiv:1710.10903 (GAT: 83.0% on Cora).
"""

from __future__ import annotations

from typing import Any

from strata.engine import Operator, Pipeline
from strata.operators.errors import OperatorError
from strata.operators.io.datasets import load_dataset
from strata.operators.trainers import FullGraphTrainer, ModelConfig, TrainConfig
from strata.operators.trainers.distributed import (
    CounterDropoutTrainer,
    DistributedConfig,
    DistributedTrainer,
)
from strata.operators.trainers.records import training_outputs

#: Kipf & Welling's GCN settings (weight decay on the first layer only).
_GCN: dict[str, Any] = {
    "hidden": 16,
    "heads": 1,
    "dropout": 0.5,
    "attention_dropout": 0.0,
    "activation": "relu",
    "lr": 0.01,
    "weight_decay": 5e-4,
    "decay_scope": "first",
    "epochs": 200,
    "patience": 10,
}

#: Per-model defaults (``--set`` overrides any of them).
PRESETS: dict[str, dict[str, Any]] = {
    "gcn": _GCN,
    "gat": {
        "hidden": 8,
        "heads": 8,
        "dropout": 0.6,
        "attention_dropout": 0.6,
        "activation": "elu",
        "lr": 0.005,
        "weight_decay": 5e-4,
        "decay_scope": "all",
        "epochs": 1000,
        "patience": 100,
    },
    # GCN's sizes and schedule, with weight decay on every parameter.
    "sage": {**_GCN, "decay_scope": "all"},
    "gin": {**_GCN, "decay_scope": "all"},
}


def train_config(model: str = "gcn", **settings: Any) -> TrainConfig:
    """The model's preset, with every non-None value of ``settings`` over it."""
    if model not in PRESETS:
        raise OperatorError.build(
            "model", "cora_gcn", f"one of {sorted(PRESETS)}", repr(model)
        )
    values = {**PRESETS[model]}
    values.update({k: v for k, v in settings.items() if v is not None})
    model_config = ModelConfig(
        model,
        hidden=values.pop("hidden"),
        num_layers=values.pop("layers", 2),
        dropout=values.pop("dropout"),
        activation=values.pop("activation"),
        heads=values.pop("heads"),
        attention_dropout=values.pop("attention_dropout"),
    )
    return TrainConfig(model_config, **values)


MASKS = ("auto", "torch", "counter")


def trainer_for(
    config: TrainConfig, workers: int, masks: str = "auto"
) -> Operator[Any, Any]:
    """The training step: one device, or a partition-parallel gang (exact mode).

    Raises:
        OperatorError: ``workers < 1``, an unknown ``masks``, or ``masks=torch``
            with a gang (which cannot draw torch's masks).
    """
    if masks not in MASKS:
        raise OperatorError.build(
            "masks", "cora_gcn", f"one of {list(MASKS)}", repr(masks)
        )
    if workers < 1:
        raise OperatorError.build("workers", "cora_gcn", "workers >= 1", str(workers))
    if workers == 1:
        if masks == "counter":
            return CounterDropoutTrainer(config)
        return FullGraphTrainer(config)
    if masks == "torch":
        raise OperatorError.build(
            "masks",
            "cora_gcn",
            "masks='auto' or 'counter' with workers > 1",
            f"masks='torch' with workers={workers}",
            "a partitioned run draws counter-based dropout masks; workers=1 "
            "with masks=counter reproduces it on one device",
        )
    dist = DistributedConfig(workers=workers, mode="exact", device="cpu")
    return DistributedTrainer(config, dist)


def describe(config: TrainConfig) -> str:
    """A one-line summary of the model and optimiser settings."""
    m = config.model
    heads = f"{m.heads} heads x " if m.name == "gat" else ""
    scope = "first layer" if config.decay_scope.value == "first" else "all"
    return (
        f"{m.name}: {m.num_layers} layers, {heads}{m.hidden} hidden, {m.activation}, "
        f"dropout {m.dropout}, lr {config.lr}, weight decay {config.weight_decay:g} "
        f"({scope}), epochs {config.epochs}, patience {config.patience}, "
        f"monitor {config.monitor.value}, seed {config.seed}"
    )


def build(
    dataset: str = "cora",
    data_dir: str | None = None,
    model: str = "gcn",
    epochs: int | None = None,
    seed: int = 0,
    hidden: int | None = None,
    layers: int = 2,
    heads: int | None = None,
    dropout: float | None = None,
    lr: float | None = None,
    weight_decay: float | None = None,
    decay_scope: str | None = None,
    patience: int | None = None,
    monitor: str = "val_loss",
    normalize_features: bool = True,
    device: str = "auto",
    threads: int = 1,
    checkpoint_dir: str | None = None,
    checkpoint_every: int = 10,
    resume: bool = False,
    workers: int = 1,
    masks: str = "auto",
) -> Pipeline:
    config = train_config(
        model,
        hidden=hidden,
        layers=layers,
        heads=heads,
        dropout=dropout,
        lr=lr,
        weight_decay=weight_decay,
        decay_scope=decay_scope,
        epochs=epochs,
        patience=patience,
        monitor=monitor,
        seed=seed,
        device=device,
        threads=threads,
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every,
        resume=resume,
    )
    p = Pipeline(f"{dataset}-{model}")
    p.step(
        "load",
        load_dataset,
        spec=f"planetoid:{dataset}",
        data_dir=data_dir,
        normalize_features=normalize_features,
    )
    p.step("train", trainer_for(config, workers, masks), "load")
    extra = {"dataset": dataset, "model": model, "settings": describe(config)}
    p.step("summary", training_outputs, "train.result", "train.epochs", extra=extra)
    p.record("summary")
    return p


def render(outputs: dict[str, Any]) -> str:
    """What ``strata run`` prints: the settings, then the accuracies."""
    stopped = ", stopped early" if outputs["stopped_early"] else ""
    return "\n".join(
        [
            f"{outputs['dataset']} / {outputs['settings']}",
            f"  epochs run {outputs['epochs_run']} (best {outputs['best_epoch']}"
            f"{stopped}), {outputs['epoch_s'] * 1000:.1f} ms/epoch, "
            f"final training loss {outputs['final_loss']:.4f}",
            f"  train accuracy {outputs['train_accuracy']:.4f}",
            f"  val accuracy   {outputs['val_accuracy']:.4f}",
            f"  test accuracy  {outputs['test_accuracy']:.4f}",
        ]
    )
