"""Batch steps that load datasets into pipelines, as wire-encodable payloads.

A :class:`~strata.storage.GraphDataset` cannot cross the ``process`` executor's wire
(data is never pickled), so dataset steps return a *payload*: a dict of numpy arrays and
JSON scalars that every executor carries as is, and that trainers turn back into a
dataset with :func:`dataset_from_payload`::

    {"name": "cora", "num_nodes": 2708, "indptr": int64[n + 1], "indices": int[m],
     "node": {"x": ..., "y": ..., "train_mask": ...}, "meta": {"num_classes": 7}}

Steps:

* :func:`load_dataset`: any graph spec of :mod:`strata.storage.spec`
  (``planetoid:cora``,
  ``sbm:n=...``, a dataset directory, an edge list), optionally with row-normalised
  features (Kipf & Welling's preprocessing of the Planetoid bag-of-words).
* :func:`community_dataset`: a planted-community graph with community-correlated
  features and labels and a configurable split, for sampled training at scale.
* :func:`save_dataset_dir`: write a payload as a dataset directory and return its
  path, for steps that read features through an Arrow-backed feature store.

Examples:
    >>> payload = load_dataset("planetoid:cora", normalize_features=True)
    >>> payload["num_nodes"], payload["node"]["x"].shape, payload["meta"]["num_classes"]
    (2708, (2708, 1433), 7)
    >>> float(payload["node"]["x"][0].sum())  # rows sum to one
    1.0
    >>> ds = dataset_from_payload(payload)
    >>> ds.graph.num_edges, int(ds.train_mask.sum())
    (10556, 140)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from strata.operators.errors import OperatorError
from strata.storage import (
    CSRGraph,
    GraphDataset,
    community_features,
    sbm,
    split_masks,
)
from strata.storage import (
    save_dataset as _save_dataset,
)
from strata.storage.spec import load_graph

#: A dataset as a dict of arrays and JSON scalars (see the module docstring).
Payload = dict[str, Any]
_KEYS = ("name", "num_nodes", "indptr", "indices", "node", "meta")


def dataset_payload(dataset: GraphDataset) -> Payload:
    """Return ``dataset`` as a wire-encodable payload (arrays are not copied).

    Edge weights, edge ids and edge arrays are not carried (GNN steps here read
    unweighted graphs); meta keeps only its JSON scalars.
    """
    graph = dataset.graph
    meta = {
        k: v
        for k, v in dataset.meta.items()
        if isinstance(v, str | int | float | bool) or v is None
    }
    if dataset.num_classes is not None:
        meta["num_classes"] = dataset.num_classes
    return {
        "name": dataset.name,
        "num_nodes": graph.num_nodes,
        "indptr": graph.indptr,
        "indices": graph.indices,
        "node": dict(dataset.node_data),
        "meta": meta,
    }


def dataset_from_payload(payload: Mapping[str, Any]) -> GraphDataset:
    """Rebuild the :class:`~strata.storage.GraphDataset` a payload describes.

    Raises:
        OperatorError: if ``payload`` is not a mapping with the payload's keys.
        DatasetError: if its arrays disagree in size with the graph.
    """
    if not isinstance(payload, Mapping) or not set(_KEYS) <= set(payload):
        got = sorted(payload) if isinstance(payload, Mapping) else type(payload)
        raise OperatorError.build(
            "payload",
            "dataset_from_payload",
            f"a mapping with keys {list(_KEYS)}",
            str(got),
            "produce it with strata.operators.io.datasets.load_dataset or "
            "dataset_payload",
        )
    graph = CSRGraph(
        np.asarray(payload["indptr"]),
        np.asarray(payload["indices"]),
        int(payload["num_nodes"]),
    )
    node = {k: np.asarray(v) for k, v in payload["node"].items()}
    return GraphDataset(
        graph, node_data=node, name=str(payload["name"]), meta=dict(payload["meta"])
    )


def row_normalize(x: np.ndarray) -> np.ndarray:
    """Scale each row to sum to one (all-zero rows stay zero), as float32.

    This is Kipf & Welling's feature preprocessing (PyG's ``NormalizeFeatures``).
    """
    x = np.asarray(x, dtype=np.float32)
    sums = x.sum(axis=1, keepdims=True)
    sums[sums == 0] = 1.0
    normalized: np.ndarray = x / sums
    return normalized


def load_dataset(
    spec: str, data_dir: str | None = None, *, normalize_features: bool = False
) -> Payload:
    """Batch step: load the dataset a graph spec names, as a payload.

    Args:
        spec: a :mod:`strata.storage.spec` graph spec (``planetoid:cora``,
            ``sbm:n=...``,
            a dataset directory, an edge-list file).
        data_dir: where Planetoid files other than the shipped Cora live.
        normalize_features: row-normalise ``x`` (see :func:`row_normalize`).

    Returns:
        The dataset's payload.
    """
    dataset = load_graph(spec, data_dir=data_dir)
    payload = dataset_payload(dataset)
    if normalize_features and "x" in payload["node"]:
        payload["node"]["x"] = row_normalize(payload["node"]["x"])
    return payload


def community_dataset(
    num_nodes: int = 50_000,
    num_classes: int = 8,
    *,
    avg_degree: float = 10.0,
    intra_fraction: float = 0.7,
    num_features: int = 32,
    noise: float = 1.0,
    train_fraction: float = 0.5,
    val_fraction: float = 0.1,
    test_fraction: float = 0.2,
    seed: int = 0,
) -> Payload:
    """Batch step: a planted-community graph whose labels are its communities.

    Features are class-conditioned Gaussians
    (:func:`strata.storage.community_features`), so a classifier on features alone is
    weak at ``noise`` near 1, while averaging over neighbours (same class with
    probability ``intra_fraction``) recovers the class. Training, validation and test
    nodes are drawn per class (:func:`strata.storage.split_masks`) in the given
    fractions of the nodes.

    Returns:
        The dataset's payload (``meta["num_classes"] == num_classes``).
    """
    graph, labels = sbm(num_nodes, num_classes, avg_degree, intra_fraction, seed=seed)
    per_class = max(1, int(train_fraction * num_nodes / num_classes))
    train, val, test = split_masks(
        labels,
        train_per_class=per_class,
        num_val=int(val_fraction * num_nodes),
        num_test=int(test_fraction * num_nodes),
        seed=seed,
    )
    x = community_features(labels, num_features, noise=noise, seed=seed)
    node: dict[str, np.ndarray] = {"x": x, "y": labels, "train_mask": train}
    node.update(val_mask=val, test_mask=test)
    name = f"community-n{num_nodes}-c{num_classes}-s{seed}"
    meta = {"num_classes": num_classes, "intra_fraction": intra_fraction}
    return dataset_payload(GraphDataset(graph, node, name=name, meta=meta))


def save_dataset_dir(payload: Mapping[str, Any], directory: str) -> str:
    """Batch step: save a payload as a dataset directory; return the directory.

    The directory is written as one crash-safe transaction
    (:func:`strata.storage.save_dataset`); a later step opens it memory-mapped.
    """
    path = Path(directory)
    _save_dataset(dataset_from_payload(payload), path)
    return str(path)
