"""The starting point of a streaming GNN job: a graph and a model trained on it.

:class:`TrainedSetup` loads a graph spec and trains the batch model through the
trainers' code (:class:`~strata.operators.trainers.FullGraphTrainer`: Adam, its
seeding, its loop), or loads saved weights, then takes the model apart into
incremental layer rules (:class:`~strata.operators.streaming.InitData`). It runs
once, inside the source step, so ``strata describe`` stays instant.

Models: ``sage`` (mean), ``sage-sum``, ``sage-max`` and ``gcn``, without dropout.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from strata.engine import at_least
from strata.operators.errors import OperatorError
from strata.operators.layers import BasicGNN
from strata.operators.streaming.model import StreamingModel
from strata.operators.streaming.setup import InitData
from strata.operators.trainers import FullGraphTrainer, ModelConfig, TrainConfig
from strata.storage import GraphDataset, load_graph

__all__ = ["MODELS", "TrainedSetup"]

#: Streaming model names: the batch model and its aggregator.
MODELS = {"sage": "mean", "sage-sum": "sum", "sage-max": "max", "gcn": None}


@dataclass(frozen=True, slots=True)
class TrainedSetup:
    """Loads the graph spec and trains (or loads) the model: the ``init`` item.

    Attributes:
        graph: a graph spec (``sbm:n=20000,blocks=8``, a dataset directory).
        model: one of :data:`MODELS`.
        hidden: hidden width (and feature width when the graph has no features).
        layers: message-passing layers.
        epochs: full-batch training epochs (0: untrained).
        model_path: saved weights to load instead of training (None: train).
        seed: seeds the features drawn for a graph without any, and training.
        threads: torch threads (0: leave torch's setting).
    """

    graph: str
    model: str = "sage"
    hidden: int = 64
    layers: int = 2
    epochs: int = 30
    model_path: str | None = None
    seed: int = 0
    threads: int = 1

    def __post_init__(self) -> None:
        at_least("TrainedSetup", 1, hidden=self.hidden, layers=self.layers)
        at_least(
            "TrainedSetup", 0, epochs=self.epochs, seed=self.seed, threads=self.threads
        )

    def features(self) -> tuple[GraphDataset, np.ndarray]:
        """The dataset and its node features (seeded Gaussian ones if it has none)."""
        dataset = load_graph(self.graph)
        x = dataset.x
        if x is None:
            rng = np.random.default_rng(self.seed)
            x = rng.normal(size=(dataset.graph.num_nodes, self.hidden))
        return dataset, np.ascontiguousarray(x, dtype=np.float32)

    def train_config(self) -> TrainConfig:
        """Full-batch Adam (lr 0.01, weight decay 5e-4) for ``epochs`` epochs."""
        if self.model not in MODELS:
            raise OperatorError.build(
                "model", "TrainedSetup", f"one of {sorted(MODELS)}", repr(self.model)
            )
        aggr = MODELS[self.model]
        model = ModelConfig(
            "gcn" if aggr is None else "sage",
            hidden=self.hidden,
            num_layers=self.layers,
            dropout=0.0,
            aggr=aggr or "mean",
        )
        return TrainConfig(
            model,
            lr=0.01,
            weight_decay=5e-4,
            epochs=self.epochs,
            restore_best=False,
            seed=self.seed,
            device="cpu",
        )

    def trained_model(self, dataset: GraphDataset, x: np.ndarray) -> BasicGNN:
        """The model trained on ``dataset`` with features ``x`` (or loaded)."""
        config = self.train_config()
        classes = int(dataset.y.max()) + 1 if dataset.y is not None else self.hidden
        if self.model_path or dataset.y is None or self.epochs == 0:
            torch.manual_seed(self.seed)
            model = config.model.build(x.shape[1], classes)
            if self.model_path:
                model.load_state_dict(torch.load(self.model_path, weights_only=True))
            return model.eval()
        n = dataset.graph.num_nodes
        train = dataset.node_data.get("train_mask")
        node = {
            "x": x,
            "y": np.asarray(dataset.y, dtype=np.int64),
            "train_mask": np.ones(n, bool) if train is None else np.asarray(train),
            "val_mask": np.zeros(n, bool),
            "test_mask": np.zeros(n, bool),
        }
        data = replace(dataset, node_data=node, meta={"num_classes": classes})
        trainer = FullGraphTrainer(config)
        trainer.fit(data)
        trained = trainer.model  # the trainer keeps the model it trained
        assert isinstance(trained, BasicGNN)
        return trained.eval()

    def load(self) -> InitData:
        """Load the graph, train or load the model, and take it apart."""
        if self.threads > 0:
            torch.set_num_threads(self.threads)
        dataset, x = self.features()
        model = self.trained_model(dataset, x)
        return InitData(dataset.graph, x, None, StreamingModel.from_module(model))
