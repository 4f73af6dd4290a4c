"""Semi-supervised node classification on Cora with a 2-layer GCN: the main job.

Kipf & Welling's setting (``make run``): the public Planetoid split (140 training,
500 validation, 1000 test nodes), row-normalised bag-of-words features, a 2-layer
GCN with 16 hidden units, dropout 0.5, Adam with learning rate 0.01 and weight decay
5e-4 on the first layer only, at most 200 epochs with early stopping on the
validation loss (patience 10). The reported accuracies are those of the weights of
the epoch with the lowest validation loss (``patience=0`` trains all epochs)::

    load (Planetoid payload) -> train (FullGraphTrainer) -> summary (outputs)

    strata run jobs/cora_gcn.py
    strata run jobs/cora_gcn.py --set train.lr=0.005 --set model=gat --set seed=3
    strata run jobs/cora_gcn.py --help        # every parameter, type and default
    strata run jobs/cora_gcn.py --set output_dir=out   # predictions, embeddings, model

``train.model.name`` (aliases ``model``, ``model.kind``) picks a preset of the
other settings (:data:`strata.operators.trainers.presets.PRESETS`: GAT as
Velickovic et al.); any ``--set`` overrides the preset. ``train.threads``
defaults to 1: Cora's operations are too small for torch's intra-op threads to
pay off on a shared machine (``--set threads=0`` keeps torch's default).

``workers`` > 1 trains partition-parallel on a gang of that many processes
(exact mode: halo exchange every layer), whose results equal single-device
training up to float rounding::

    strata run jobs/cora_gcn.py --set workers=2

``plan=auto`` lets the planner choose (one process, a gang, HongTu chunks) from
its cost model and log why (``strata plan jobs/cora_gcn.py`` shows its table)::

    strata run jobs/cora_gcn.py --set plan=auto

References:
    Thomas N. Kipf, Max Welling. *Semi-Supervised Classification with Graph
    Convolutional Networks*. ICLR 2017, arXiv:1609.02907 (GCN: 81.5% on Cora).
    Petar Velickovic et al. *Graph Attention Networks*. ICLR 2018,
    arXiv:1710.10903 (GAT: 83.0% on Cora).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from strata.engine import Pipeline
from strata.operators.io.datasets import load_dataset
from strata.operators.io.results import export_results
from strata.operators.trainers import TrainConfig
from strata.operators.trainers.presets import (
    describe_training,
    preset_config,
    presets,
    trainer_for,
)
from strata.operators.trainers.records import training_outputs


@dataclass(frozen=True, slots=True)
class CoraGcnConfig:
    """The job's parameters.

    Attributes:
        dataset: the Planetoid dataset.
        data_dir: where its files are (None: the shared datasets folder).
        normalize_features: row-normalise the bag-of-words features.
        train: model, optimiser, epochs, early stopping, checkpoints.
        workers: 1 trains on one device; more train partition-parallel on a gang.
        output_dir: write predictions.parquet, embeddings.parquet and the model
            here (None: metrics only).
    """

    dataset: Literal["cora", "citeseer", "pubmed"] = "cora"
    data_dir: Path | None = None
    normalize_features: bool = True
    train: TrainConfig = field(default_factory=lambda: preset_config(threads=1))
    workers: int = 1
    output_dir: Path | None = None


#: The flat names of earlier versions.
ALIASES = {
    "model": "train.model.name",
    "model.kind": "train.model.name",
    "hidden": "train.model.hidden",
    "layers": "train.model.num_layers",
    "heads": "train.model.heads",
    "dropout": "train.model.dropout",
    **{name: f"train.{name}" for name in ("lr", "weight_decay", "decay_scope")},
    **{name: f"train.{name}" for name in ("epochs", "patience", "monitor", "seed")},
    **{name: f"train.{name}" for name in ("device", "threads", "resume", "plan")},
    **{name: f"train.{name}" for name in ("checkpoint_dir", "checkpoint_every")},
}
PRESETS = {"train.model.name": presets("train")}


def build(config: CoraGcnConfig) -> Pipeline:
    """Load the dataset, train, summarise (module docs)."""
    model = config.train.model.name
    p = Pipeline(f"{config.dataset}-{model}")
    p.step(
        "load",
        load_dataset,
        spec=f"planetoid:{config.dataset}",
        data_dir=None if config.data_dir is None else str(config.data_dir),
        normalize_features=config.normalize_features,
    )
    p.step("train", trainer_for(config.train, config.workers), "load")
    extra = {
        "dataset": config.dataset,
        "model": model,
        "settings": describe_training(config.train),
    }
    p.step("summary", training_outputs, "train.result", "train.epochs", extra=extra)
    p.record("summary")
    if config.output_dir is not None:
        p.step(
            "export",
            export_results,
            "load",
            "train.model",
            train=config.train,
            output_dir=str(config.output_dir),
            normalize_features=config.normalize_features,
        )
        p.record("export")
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
