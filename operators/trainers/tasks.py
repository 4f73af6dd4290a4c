"""What a model learns: node classification, node regression or link prediction.

A task is a frozen config (:class:`NodeClassification` (default),
:class:`NodeRegression`, :class:`LinkPrediction`), one member of the tagged union
:data:`Task` at ``TrainConfig.task`` (``--set train.task=linkprediction``). Its
:meth:`~LinkPrediction.setup` binds it to the data of one run and returns a
:class:`TaskState`, which every trainer drives the same way:

* ``graph``: the graph messages flow on (link prediction: the training edges
  only) and ``out_channels``, the model's output width;
* ``train_examples()``: what one epoch iterates over (training node ids, or
  training edge indices), which a sampled trainer shuffles and cuts into batches;
* ``batch(examples, epoch, index)`` / ``full_batch(epoch)``: a :class:`TaskBatch`:
  the nodes whose outputs the loss reads and its targets (link prediction draws
  its negatives here, keyed by seed, epoch and batch);
* ``loss(out, batch)``: the training loss from those nodes' outputs;
* ``metrics(out, split)``: :class:`~strata.operators.trainers.metrics.SplitMetrics`
  from every node's output (``eval_nodes(split)`` says which rows it reads);
* ``predict(out)``: the task's predictions from every node's output (classes,
  values, or node embeddings whose dot products score links).

Every task takes ``loss``: a user's ``loss(prediction, target) -> scalar`` in place
of the default (cross-entropy; mean squared error; binary cross-entropy on the
logits ``z_u . z_v`` of positive and negative pairs).

Examples:
    >>> from strata.storage import load_planetoid
    >>> from strata.operators.trainers.data import as_training_data
    >>> data = as_training_data(load_planetoid("cora"), "example")
    >>> state = LinkPrediction().setup(data, seed=0, where="example")
    >>> state.out_channels, len(state.train_examples()), state.graph.num_edges
    (64, 4486, 8972)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Protocol, Self

import numpy as np
import torch
import torch.nn.functional as F

from strata.operators.errors import OperatorError, check
from strata.operators.trainers.data import Targets, TrainingData
from strata.operators.trainers.link_split import (
    EdgeSplit,
    negative_pairs,
    split_edges,
)
from strata.operators.trainers.metrics import (
    SplitMetrics,
    hits_at,
    mrr,
    ranks,
    roc_auc,
)
from strata.storage import CSRGraph

__all__ = [
    "LinkPrediction",
    "LossFn",
    "NodeClassification",
    "NodeRegression",
    "Targets",
    "Task",
    "TaskBatch",
    "TaskState",
]

#: A user's loss: ``loss(prediction, target)`` returning a scalar tensor.
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True, slots=True, eq=False)
class TaskBatch:
    """The examples of one optimiser step.

    Attributes:
        nodes: int64 ids of the nodes whose output rows the loss reads, in row
            order (None: every node, in id order).
        target: what the loss compares the prediction with.
        pairs: int64 ``[2, m]`` output rows of the pairs to score (link prediction).
        size: examples in the batch (nodes, or positive edges).
    """

    nodes: torch.Tensor | None
    target: torch.Tensor
    pairs: torch.Tensor | None = None
    size: int = 0


class TaskState(Protocol):
    """A task bound to one run's data (see the module docstring)."""

    graph: CSRGraph
    out_channels: int

    def to(self, device: torch.device) -> TaskState:
        """The state with its full-graph tensors on ``device``."""
        ...

    def train_examples(self) -> np.ndarray:
        """The ids an epoch iterates over (nodes or training edges)."""
        ...

    def batch(self, examples: np.ndarray, epoch: int, index: int) -> TaskBatch:
        """The batch of ``examples`` (CPU tensors, explicit ``nodes``)."""
        ...

    def full_batch(self, epoch: int) -> TaskBatch:
        """Every training example at once (tensors on the state's device)."""
        ...

    def loss(self, out: torch.Tensor, batch: TaskBatch) -> torch.Tensor:
        """The loss; ``out`` has one row per ``batch.nodes`` (or per node)."""
        ...

    def eval_nodes(self, split: str) -> torch.Tensor:
        """Sorted ids of the nodes whose outputs :meth:`metrics` reads."""
        ...

    def metrics(self, out: torch.Tensor, split: str) -> SplitMetrics:
        """Loss and scores on ``split`` from every node's output ``out``."""
        ...

    def predict(self, out: torch.Tensor) -> torch.Tensor:
        """The task's predictions from every node's output."""
        ...


# ----------------------------------------------------------------- node tasks
class _NodeState:
    """Shared by the node tasks: examples are the training nodes."""

    def __init__(self, data: TrainingData, loss: LossFn, target: torch.Tensor) -> None:
        self.graph = data.graph
        self._loss = loss
        self._target = target
        self._ids = {s: data.ids(s) for s in ("train", "val", "test")}
        self._train = data.train_ids.numpy()

    def to(self, device: torch.device) -> Self:
        self._target = self._target.to(device)
        self._ids = {s: ids.to(device) for s, ids in self._ids.items()}
        return self

    def train_examples(self) -> np.ndarray:
        return self._train

    def batch(self, examples: np.ndarray, epoch: int, index: int) -> TaskBatch:
        nodes = torch.from_numpy(examples)
        return TaskBatch(nodes, self._target[nodes], size=len(examples))

    def full_batch(self, epoch: int) -> TaskBatch:
        ids = self._ids["train"]
        return TaskBatch(ids, self._target[ids], size=int(ids.numel()))

    def loss(self, out: torch.Tensor, batch: TaskBatch) -> torch.Tensor:
        return self._loss(out, batch.target)

    def eval_nodes(self, split: str) -> torch.Tensor:
        return self._ids[split].cpu()

    def _split(self, out: torch.Tensor, split: str) -> tuple[torch.Tensor, ...]:
        ids = self._ids[split].to(out.device)
        return out[ids], self._target.to(out.device)[ids]


class _ClassificationState(_NodeState):
    def __init__(self, data: TrainingData, loss: LossFn | None) -> None:
        super().__init__(data, loss or F.cross_entropy, data.y)
        self.out_channels = data.num_classes
        self._user_loss = loss

    def metrics(self, out: torch.Tensor, split: str) -> SplitMetrics:
        logits, y = self._split(out, split)
        if y.numel() == 0:
            return SplitMetrics(math.nan, math.nan)
        loss = (self._user_loss or F.cross_entropy)(logits, y).item()
        accuracy = (logits.argmax(dim=1) == y).double().mean().item()
        return SplitMetrics(loss, accuracy)

    def predict(self, out: torch.Tensor) -> torch.Tensor:
        return out.argmax(dim=1)


class _RegressionState(_NodeState):
    def __init__(self, data: TrainingData, loss: LossFn | None) -> None:
        y = data.y.to(torch.float32)
        self._vector = y.dim() == 1
        super().__init__(data, loss or F.mse_loss, y.reshape(y.shape[0], -1))
        self.out_channels = int(self._target.shape[1])

    def metrics(self, out: torch.Tensor, split: str) -> SplitMetrics:
        pred, y = self._split(out, split)
        if y.numel() == 0:
            return SplitMetrics(math.nan, math.nan)
        loss = self._loss(pred, y).item()
        error = (pred - y).double()
        mse = error.pow(2).mean().item()
        total = (y.double() - y.double().mean(dim=0)).pow(2).sum().item()
        r2 = 1.0 - error.pow(2).sum().item() / total if total > 0 else math.nan
        scores = {"mse": mse, "mae": error.abs().mean().item(), "r2": r2}
        return SplitMetrics(loss, r2, scores)

    def predict(self, out: torch.Tensor) -> torch.Tensor:
        return out.squeeze(1) if self._vector else out


@dataclass(frozen=True, slots=True)
class NodeClassification:
    """Predict each node's class (cross-entropy; the score is accuracy).

    Attributes:
        loss: a user's ``loss(logits, labels)`` (None: cross-entropy).
    """

    targets: ClassVar[Targets] = Targets.CLASSES
    loss: LossFn | None = None

    def setup(self, data: TrainingData, *, seed: int, where: str) -> TaskState:
        """Bind to ``data`` (labels and split masks)."""
        return _ClassificationState(data, self.loss)


@dataclass(frozen=True, slots=True)
class NodeRegression:
    """Predict a float value (or vector) per node (MSE; the score is R²).

    ``y`` holds ``[num_nodes]`` or ``[num_nodes, d]`` floats; the model has one
    output per column.

    Attributes:
        loss: a user's ``loss(prediction, target)`` on ``[m, d]`` rows (None: MSE).
    """

    targets: ClassVar[Targets] = Targets.VALUES
    loss: LossFn | None = None

    def setup(self, data: TrainingData, *, seed: int, where: str) -> TaskState:
        """Bind to ``data`` (values and split masks)."""
        return _RegressionState(data, self.loss)


# ----------------------------------------------------------------- link prediction
@dataclass(frozen=True, slots=True)
class LinkPrediction:
    """Predict held-out edges from node embeddings (GAE's inner-product decoder).

    The graph's node pairs are split (:func:`~strata.operators.trainers.link_split.
    split_edges`); the model's output row ``z_v`` is node ``v``'s embedding and
    ``z_u . z_v`` the logit of edge ``(u, v)``. The score is ROC AUC; the scores
    add MRR and Hits@K against ``candidates`` random destinations per positive.

    Attributes:
        val_fraction: share of the edges held out for validation.
        test_fraction: share of the edges held out for test.
        out_channels: embedding width (the model's output width).
        negatives: training negatives per positive edge, redrawn every epoch.
        candidates: random negatives each held-out edge is ranked against.
        hits_at: the K of Hits@K.
        loss: a user's ``loss(logits, labels)`` over positive (1) and negative (0)
            pairs (None: binary cross-entropy on the logits).
    """

    targets: ClassVar[Targets] = Targets.NONE
    val_fraction: float = 0.05
    test_fraction: float = 0.1
    out_channels: int = 64
    negatives: int = 1
    candidates: int = 100
    hits_at: int = 20
    loss: LossFn | None = None

    def __post_init__(self) -> None:
        where = "LinkPrediction"
        for name in ("val_fraction", "test_fraction"):
            value = getattr(self, name)
            check(0 <= value < 1, name, where, "0 <= fraction < 1", value)
        total = self.val_fraction + self.test_fraction
        check(total < 1, "val_fraction", where, "val + test < 1", total)
        for name in ("out_channels", "negatives", "candidates", "hits_at"):
            value = getattr(self, name)
            check(value >= 1, name, where, f"{name} >= 1", value)

    def setup(self, data: TrainingData, *, seed: int, where: str) -> TaskState:
        """Split the edges (seeded) and bind to ``data``."""
        split = split_edges(
            data.graph,
            val_fraction=self.val_fraction,
            test_fraction=self.test_fraction,
            seed=seed,
            candidates=self.candidates,
            where=where,
        )
        return LinkState(self, split, seed)


class LinkState:
    """:class:`LinkPrediction` bound to one run's edge split."""

    def __init__(self, task: LinkPrediction, split: EdgeSplit, seed: int) -> None:
        self.task = task
        self.split = split
        self.graph = split.graph
        self.out_channels = task.out_channels
        self._seed = seed
        self._loss: LossFn = task.loss or F.binary_cross_entropy_with_logits
        self._device = torch.device("cpu")

    def to(self, device: torch.device) -> Self:
        self._device = device
        return self

    def train_examples(self) -> np.ndarray:
        return np.arange(self.split.positives["train"].shape[1], dtype=np.int64)

    def _pairs(self, examples: np.ndarray, epoch: int, index: int) -> np.ndarray:
        positive = self.split.positives["train"][:, examples]
        rng = np.random.default_rng([self._seed, epoch, index + 1, 0x4E6])
        count = positive.shape[1] * self.task.negatives
        negative = negative_pairs(
            self.graph.num_nodes, count, self.split.train_keys, rng
        )
        return np.concatenate([positive, negative], axis=1)

    def _target(self, size: int, total: int) -> torch.Tensor:
        target = torch.zeros(total)
        target[:size] = 1.0
        return target

    def batch(self, examples: np.ndarray, epoch: int, index: int) -> TaskBatch:
        pairs = self._pairs(examples, epoch, index)
        nodes, inverse = np.unique(pairs, return_inverse=True)
        local = torch.from_numpy(inverse.reshape(2, -1))
        target = self._target(len(examples), pairs.shape[1])
        return TaskBatch(torch.from_numpy(nodes), target, local, len(examples))

    def full_batch(self, epoch: int) -> TaskBatch:
        examples = self.train_examples()
        pairs = torch.from_numpy(self._pairs(examples, epoch, -1)).to(self._device)
        target = self._target(len(examples), pairs.shape[1]).to(self._device)
        return TaskBatch(None, target, pairs, len(examples))

    def loss(self, out: torch.Tensor, batch: TaskBatch) -> torch.Tensor:
        assert batch.pairs is not None
        return self._loss(self.score(out, batch.pairs), batch.target)

    @staticmethod
    def score(out: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        """Logits ``z_u . z_v`` of the ``[2, m]`` pairs of rows of ``out``."""
        return (out[pairs[0]] * out[pairs[1]]).sum(dim=-1)

    def _eval_pairs(self, split: str) -> tuple[torch.Tensor, ...]:
        negative = torch.from_numpy(self.split.negatives[split])
        candidates = torch.from_numpy(self.split.candidates[split])
        positive = torch.from_numpy(self.split.positives[split])
        if split == "train":  # a sample as large as the test split
            positive = positive[:, : negative.shape[1]]
        return positive, negative, candidates

    def eval_nodes(self, split: str) -> torch.Tensor:
        positive, negative, candidates = self._eval_pairs(split)
        sources = positive[0, : candidates.shape[0]]
        every = [positive.flatten(), negative.flatten(), candidates.flatten(), sources]
        return torch.unique(torch.cat(every))

    def metrics(self, out: torch.Tensor, split: str) -> SplitMetrics:
        positive, negative, candidates = self._eval_pairs(split)
        if positive.shape[1] == 0:
            return SplitMetrics(math.nan, math.nan)
        out = out.float()
        device = out.device
        pos = self.score(out, positive.to(device))
        neg = self.score(out, negative.to(device))
        logits = torch.cat([pos, neg])
        loss = self._loss(logits, self._target(len(pos), len(logits)).to(device))
        sources = out[positive[0, : candidates.shape[0]].to(device)]
        ranked = (sources.unsqueeze(1) * out[candidates.to(device)]).sum(dim=-1)
        rank = ranks(pos[: candidates.shape[0]], ranked)
        auc = roc_auc(pos, neg)
        k = self.task.hits_at
        scores = {"auc": auc, "mrr": mrr(rank), f"hits@{k}": hits_at(rank, k)}
        return SplitMetrics(loss.item(), auc, scores)

    def predict(self, out: torch.Tensor) -> torch.Tensor:
        """The node embeddings (:meth:`score` turns pairs of them into logits)."""
        return out


Task = NodeClassification | NodeRegression | LinkPrediction


def check_task_support(task: Task, supported: tuple[type, ...], where: str) -> None:
    """Raise unless ``task`` is one of the ``supported`` task types."""
    if not isinstance(task, supported):
        names = ", ".join(t.__name__ for t in supported)
        raise OperatorError.build(
            "task",
            where,
            f"one of {names}",
            type(task).__name__,
            "train this task with FullGraphTrainer or SampledTrainer",
        )
