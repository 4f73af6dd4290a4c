"""Link prediction on any graph: a GCN encoder and GAE's inner-product decoder.

The graph's edges, taken as undirected pairs, are split 85/5/10 into training,
validation and test edges (seeded); held-out edges are removed from the graph the
encoder passes messages on. Every epoch the encoder embeds every node, and binary
cross-entropy on ``z_u . z_v`` separates the training edges from as many random
non-edges (redrawn each epoch). The reported scores are those of the epoch with
the best validation AUC: ROC AUC against one random non-edge per held-out edge,
and MRR and Hits@20 ranking each held-out edge ``(u, v)`` against 100 random
``(u, w)`` (:mod:`strata.operators.trainers.tasks`)::

    load (graph spec) -> features (random ones if the graph has none)
      -> train (FullGraphTrainer, task LinkPrediction) -> summary

    strata run jobs/link_prediction.py                      # Cora
    strata run jobs/link_prediction.py --set graph=sbm:n=10000,blocks=50,\
degree=20,intra=0.95,features=0
    strata run jobs/link_prediction.py --set graph=edges.tsv --set epochs=200
    strata run jobs/link_prediction.py --help

Defaults follow PyG's ``examples/link_pred.py`` (GCN 128 -> 64, no dropout, Adam
0.01, 100 epochs), which reports a Cora test AUC of about 0.90-0.92. A graph
without node features (a SNAP edge list, ``features=0`` generators) gets
``features`` seeded Gaussian columns: the encoder then learns from structure
alone.

References:
    Thomas N. Kipf, Max Welling. *Variational Graph Auto-Encoders*. NIPS 2016
    Workshop on Bayesian Deep Learning, arXiv:1611.07308.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strata.engine import Pipeline
from strata.operators.errors import OperatorError
from strata.operators.io.datasets import load_dataset
from strata.operators.io.task import with_features
from strata.operators.trainers import (
    FullGraphTrainer,
    ModelConfig,
    Monitor,
    TrainConfig,
)
from strata.operators.trainers.presets import describe_training
from strata.operators.trainers.records import training_outputs
from strata.operators.trainers.tasks import LinkPrediction


def _train_default() -> TrainConfig:
    return TrainConfig(
        ModelConfig("gcn", hidden=128, num_layers=2, dropout=0.0),
        lr=0.01,
        weight_decay=0.0,
        epochs=100,
        monitor=Monitor.VAL_ACCURACY,  # the validation AUC
        threads=1,
        task=LinkPrediction(val_fraction=0.05, test_fraction=0.1, out_channels=64),
    )


@dataclass(frozen=True, slots=True)
class LinkPredictionConfig:
    """The job's parameters.

    Attributes:
        graph: a graph spec (planetoid:cora, sbm:..., rmat:...) or the path of a
            dataset directory or edge list.
        data_dir: where Planetoid files other than the shipped Cora live.
        normalize_features: row-normalise the node features.
        features: width of the seeded Gaussian features a graph without any gets.
        train: encoder, task (train.task.val_fraction, ...), optimiser, epochs.
    """

    graph: str = "planetoid:cora"
    data_dir: Path | None = None
    normalize_features: bool = True
    features: int = 64
    train: TrainConfig = field(default_factory=_train_default)

    def __post_init__(self) -> None:
        if not isinstance(self.train.task, LinkPrediction):
            raise OperatorError.build(
                "train.task",
                "link_prediction",
                "linkprediction",
                type(self.train.task).__name__.lower(),
                "this job predicts links; node tasks run with cora_gcn",
            )
        if self.features < 1:
            raise OperatorError.build(
                "features", "link_prediction", "features >= 1", str(self.features)
            )


#: Short names.
ALIASES = {
    "model": "train.model.name",
    "hidden": "train.model.hidden",
    "layers": "train.model.num_layers",
    "dropout": "train.model.dropout",
    "out_channels": "train.task.out_channels",
    "val_fraction": "train.task.val_fraction",
    "test_fraction": "train.task.test_fraction",
    **{name: f"train.{name}" for name in ("lr", "weight_decay", "epochs", "seed")},
    **{name: f"train.{name}" for name in ("patience", "device", "threads")},
}


def build(config: LinkPredictionConfig) -> Pipeline:
    """Load the graph, add features if needed, train, summarise (module docs)."""
    p = Pipeline(f"link-prediction-{config.train.model.name}")
    p.step(
        "load",
        load_dataset,
        spec=config.graph,
        data_dir=None if config.data_dir is None else str(config.data_dir),
        normalize_features=config.normalize_features,
    )
    p.step(
        "features",
        with_features,
        "load",
        width=config.features,
        seed=config.train.seed,
    )
    p.step("train", FullGraphTrainer(config.train), "features")
    extra = {"graph": config.graph, "settings": describe_training(config.train)}
    p.step("summary", training_outputs, "train.result", "train.epochs", extra=extra)
    p.record("summary")
    return p


def render(outputs: dict[str, Any]) -> str:
    """What ``strata run`` prints: the settings, then the link scores."""
    lines = [
        f"{outputs['graph']} / {outputs['settings']}",
        f"  epochs run {outputs['epochs_run']} (best {outputs['best_epoch']}), "
        f"{outputs['epoch_s'] * 1000:.1f} ms/epoch, "
        f"final training loss {outputs['final_loss']:.4f}",
    ]
    for split in ("val", "test"):
        keys = [k for k in outputs if k.startswith(f"{split}_") and "@" in k]
        for key in [f"{split}_auc", f"{split}_mrr", *keys]:
            lines.append(f"  {key:<14} {outputs[key]:.4f}")
    return "\n".join(lines)
