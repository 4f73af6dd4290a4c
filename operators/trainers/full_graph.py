"""Full-graph training on one device: every epoch is one forward pass over the graph.

The graph and every feature row live on the device; each epoch computes the
training loss on the training nodes, takes one Adam step, and evaluates in
evaluation mode (no dropout) with one more forward pass. This is Kipf & Welling's
training procedure, and, being in-memory, single-process and deterministic on CPU,
it is the exactness oracle for partition-parallel full-graph training.

Dropout draws counter-based masks
(:func:`~strata.operators.trainers.dropout.counter_dropout`, keyed by seed, epoch,
layer and node id), the masks every worker of a
:class:`~strata.operators.trainers.distributed.DistributedTrainer` draws: the same
seed trains the same model on one device as on any number of workers.

Examples:
    >>> from strata.storage import load_planetoid
    >>> from strata.operators.trainers import ModelConfig, TrainConfig
    >>> config = TrainConfig(ModelConfig("gcn", hidden=16), epochs=2, device="cpu")
    >>> result = FullGraphTrainer(config).fit(load_planetoid("cora"))
    >>> result.epochs_run, 0.0 <= result.test_accuracy <= 1.0
    (2, True)

In a pipeline (the dataset step's payload in, epoch records and a result out)::

    p.step("load", load_dataset, spec="planetoid:cora", normalize_features=True)
    p.step("train", FullGraphTrainer(config), "load")
    p.step("summary", summarize, "train.result")
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from strata.operators.kernels import DeviceGraph, as_device_graph
from strata.operators.layers import BasicGNN
from strata.operators.trainers.base import EpochStats, Trainer
from strata.operators.trainers.data import FEATURES, TrainingData
from strata.operators.trainers.dropout import counter_dropout
from strata.operators.trainers.metrics import SplitMetrics
from strata.operators.trainers.optim import clip_gradients
from strata.operators.trainers.tasks import TaskState

__all__ = ["FullGraphTrainer"]


class FullGraphTrainer(Trainer):
    """Trains a GNN on the whole graph, on one device (CPU or CUDA).

    Args:
        config: model, optimiser, epochs, early stopping and checkpoint settings.
    """

    def prepare(
        self, data: TrainingData, model: nn.Module, device: torch.device
    ) -> None:
        """Put the task's graph, all features and the task's targets on ``device``."""
        assert self.task_state is not None
        self._task: TaskState = self.task_state.to(device)
        self._graph: DeviceGraph = as_device_graph(self._task.graph, device)
        x = data.features.get(FEATURES)
        self._x = x.to(device=device, dtype=torch.float32).reshape(x.shape[0], -1)
        self._node_ids = torch.arange(self._x.shape[0], device=device)

    def train_epoch(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, epoch: int
    ) -> EpochStats:
        """One optimiser step on the task's loss over every training example."""
        model.train()
        optimizer.zero_grad(set_to_none=True)
        batch = self._task.full_batch(epoch)
        out = self.train_forward(model, epoch)
        rows = out if batch.nodes is None else out[batch.nodes]
        loss = self._task.loss(rows, batch)
        loss.backward()
        clip_gradients(model.parameters(), self.config.clip_grad_norm)
        optimizer.step()
        return EpochStats(loss=loss.item(), seeds=batch.size)

    def train_forward(self, model: nn.Module, epoch: int) -> torch.Tensor:
        """Outputs of every node in training mode.

        For a layer stack (:class:`~strata.operators.layers.BasicGNN`),
        ``model``'s own layer loop with the counter-based masks in place of
        ``F.dropout`` before every layer (the loop a gang's workers run too); any
        other module runs its own ``forward(graph, x)``.
        """
        if not isinstance(model, BasicGNN):
            return model(self._graph, self._x)
        seed, ids, p = self.config.seed, self._node_ids, model.dropout

        def dropout(x: torch.Tensor, layer: int) -> torch.Tensor:
            return counter_dropout(x, ids, p=p, seed=seed, epoch=epoch, layer=layer)

        out: torch.Tensor = model(self._graph, self._x, dropout=dropout)
        return out

    @torch.no_grad()
    def evaluate(
        self, model: nn.Module, splits: tuple[str, ...]
    ) -> Mapping[str, SplitMetrics]:
        """One forward pass in eval mode; the task's metrics on each split."""
        model.eval()
        out = model(self._graph, self._x)
        return {split: self._task.metrics(out, split) for split in splits}

    def release(self) -> None:
        """Drop the device tensors."""
        self._graph = self._x = self._node_ids = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        model = self.config.model
        return (
            f"FullGraphTrainer({model.name}, hidden={model.hidden}, "
            f"layers={model.num_layers}, epochs={self.config.epochs})"
        )
