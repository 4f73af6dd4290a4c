"""What a trainer trains on: a graph, a feature store, labels and split masks.

:class:`TrainingData` is validated once, before the first epoch, so bad input fails
with a clear message instead of an index error deep inside a layer:

* features with a row count other than the graph's node count;
* labels outside ``[0, num_classes)`` on any node of a split mask;
* a training mask with no node (or masks of the wrong length or dtype).

Trainers accept, through :func:`as_training_data`, a :class:`TrainingData`, a
:class:`~strata.storage.GraphDataset`, a dataset payload of
:mod:`strata.operators.io.datasets` (what dataset steps send between processes), or the
path of a dataset directory (opened memory-mapped, features behind an
:class:`~strata.storage.ArrowFeatureStore`).

Examples:
    >>> from strata.storage import load_planetoid
    >>> data = as_training_data(load_planetoid("cora"), "example")
    >>> data.num_nodes, data.num_features, data.num_classes, int(data.train_ids.numel())
    (2708, 1433, 7, 140)
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from strata.operators.errors import OperatorError
from strata.operators.io.datasets import dataset_from_payload
from strata.storage import (
    ArrowFeatureStore,
    CSRGraph,
    FeatureStore,
    GraphDataset,
    InMemoryFeatureStore,
    Key,
    open_dataset,
)


class Targets(enum.Enum):
    """What a task needs of the data's ``y`` (checked before training)."""

    CLASSES = "classes"  # integer labels in [0, num_classes) on the split masks
    VALUES = "values"  # float values, one row per node, and the split masks
    NONE = "none"  # features only, no labels or node masks (link prediction)


#: Where node features live in a trainer's feature store.
FEATURES = Key("node", "x")
SPLITS = ("train", "val", "test")


@dataclass(frozen=True, slots=True, eq=False)
class TrainingData:
    """A node-classification problem on one graph.

    Attributes:
        graph: the graph (messages flow along its edges).
        features: a store holding the node features under :data:`FEATURES`.
        y: int64 ``[num_nodes]`` labels (only nodes in a mask are read).
        masks: bool ``[num_nodes]`` per split, ``train``, ``val`` and ``test``.
        num_classes: number of classes (model output width).
        name: the dataset's name, for messages.
    """

    graph: CSRGraph
    features: FeatureStore
    y: torch.Tensor
    masks: Mapping[str, torch.Tensor]
    num_classes: int
    name: str = "graph"

    @property
    def num_nodes(self) -> int:
        """Nodes of the graph."""
        return self.graph.num_nodes

    @property
    def num_features(self) -> int:
        """Width of a feature row."""
        shape = self.features.schema()[FEATURES].shape
        return int(np.prod(shape[1:], dtype=np.int64))

    @property
    def train_ids(self) -> torch.Tensor:
        """Sorted int64 ids of the training nodes."""
        return self.ids("train")

    def ids(self, split: str) -> torch.Tensor:
        """Sorted int64 ids of the nodes in ``split``'s mask."""
        return torch.nonzero(self.masks[split]).flatten()

    def validate(self, where: str, labels: Targets = Targets.CLASSES) -> None:
        """Check sizes, labels and masks.

        Args:
            where: the caller, for error messages.
            labels: what ``y`` must hold (:class:`Targets`).

        Raises:
            OperatorError: naming the first problem (see the module docstring).
        """
        n = self.graph.num_nodes
        schema = self.features.schema()
        if FEATURES not in schema:
            raise OperatorError.build(
                "features",
                where,
                f"a feature store with key {FEATURES}",
                f"keys {sorted(str(k) for k in schema)}",
            )
        rows = schema[FEATURES].num_rows
        if rows != n:
            raise OperatorError.build(
                "x",
                where,
                f"{n} feature rows (one per node of the graph)",
                f"{rows} rows",
                "the features and the graph come from different datasets?",
            )
        if labels is Targets.NONE:
            return
        if labels is Targets.VALUES:
            if self.y.dim() not in (1, 2) or self.y.shape[0] != n:
                raise OperatorError.build(
                    "y",
                    where,
                    f"{n} values or rows of values (one per node)",
                    f"{self.y.dtype} of shape {tuple(self.y.shape)}",
                )
        elif self.y.dim() != 1 or self.y.shape[0] != n or self.y.is_floating_point():
            raise OperatorError.build(
                "y",
                where,
                f"{n} integer labels (one per node)",
                f"{self.y.dtype} of shape {tuple(self.y.shape)}",
            )
        for split in SPLITS:
            mask = self.masks.get(split)
            if mask is None or mask.dtype != torch.bool or mask.shape != (n,):
                got = "none" if mask is None else f"{mask.dtype} {tuple(mask.shape)}"
                raise OperatorError.build(
                    f"{split}_mask", where, f"a bool mask of {n} nodes", got
                )
        if not bool(self.masks["train"].any()):
            raise OperatorError.build(
                "train_mask",
                where,
                "at least one training node",
                "an empty mask",
                "the split selects no node; check the dataset's train_mask",
            )
        if labels is Targets.CLASSES:
            self._check_labels(where)

    def _check_labels(self, where: str) -> None:
        labelled = self.masks["train"] | self.masks["val"] | self.masks["test"]
        y = self.y[labelled]
        bad = (y < 0) | (y >= self.num_classes)
        if bool(bad.any()):
            node = int(torch.nonzero(labelled).flatten()[torch.nonzero(bad)[0]])
            raise OperatorError.build(
                "y",
                where,
                f"labels in [0, {self.num_classes}) on every node of a split mask",
                f"label {int(self.y[node])} at node {node}",
                "num_classes comes from meta['num_classes'] or max(y) + 1",
            )

    @classmethod
    def from_dataset(
        cls, dataset: GraphDataset, features: FeatureStore | None = None
    ) -> TrainingData:
        """Wrap a dataset; its ``x`` goes in an in-memory store unless given one."""
        n = dataset.graph.num_nodes
        if features is None:
            features = InMemoryFeatureStore()
            if dataset.x is not None:
                features.put(FEATURES, _as_float(dataset.x))
        y = dataset.y if dataset.y is not None else np.zeros(n, dtype=np.int64)
        masks = {}
        for split in SPLITS:
            mask = dataset.node_data.get(f"{split}_mask")
            masks[split] = torch.as_tensor(
                np.zeros(n, dtype=bool) if mask is None else np.array(mask)
            )
        num_classes = dataset.num_classes or 1
        return cls(
            dataset.graph,
            features,
            torch.as_tensor(np.array(y)),
            masks,
            num_classes,
            dataset.name,
        )

    @classmethod
    def from_directory(cls, directory: str | Path) -> TrainingData:
        """Open a dataset directory; features are read through an Arrow store."""
        dataset = open_dataset(directory)
        return cls.from_dataset(dataset, ArrowFeatureStore(directory, access="mmap"))


def _as_float(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f":
        return x
    return x.astype(np.float32)


def as_training_data(
    item: Any, where: str, labels: Targets = Targets.CLASSES
) -> TrainingData:
    """Turn what a trainer step receives into validated :class:`TrainingData`.

    Args:
        item: ``TrainingData``, ``GraphDataset``, a dataset payload (a mapping), or
            a dataset directory path (``str`` or ``Path``).
        where: the caller, for error messages.
        labels: what ``y`` must hold (see :meth:`TrainingData.validate`).

    Raises:
        OperatorError: on anything else, or on data that fails
            :meth:`TrainingData.validate`.
    """
    if isinstance(item, TrainingData):
        data = item
    elif isinstance(item, GraphDataset):
        data = TrainingData.from_dataset(item)
    elif isinstance(item, Mapping):
        data = TrainingData.from_dataset(dataset_from_payload(item))
    elif isinstance(item, str | Path):
        data = TrainingData.from_directory(item)
    else:
        raise OperatorError.build(
            "input",
            where,
            "TrainingData, a GraphDataset, a dataset payload or a dataset directory",
            type(item).__qualname__,
        )
    data.validate(where, labels)
    return data
