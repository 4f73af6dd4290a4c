"""A node-classification task on any graph: labels, features and split masks.

A generated graph (``rmat:...``) has no labels, features or masks;
:func:`with_task` draws what a dataset lacks (:class:`TaskConfig` says how) and
keeps what it has, and :func:`task_facts` is what a summary reports about it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from strata.engine import at_least, between

__all__ = ["TaskConfig", "task_facts", "with_features", "with_task"]


@dataclass(frozen=True, slots=True)
class TaskConfig:
    """What :func:`with_task` draws for a graph that lacks it.

    Attributes:
        classes: labels drawn uniform in ``[0, classes)`` (a graph without labels).
        features: width of the Gaussian features drawn (a graph without features).
        train_fraction: training share of a drawn split (10% validate, the rest
            test).
    """

    classes: int = 16
    features: int = 64
    train_fraction: float = 0.1

    def __post_init__(self) -> None:
        at_least("TaskConfig", 1, classes=self.classes, features=self.features)
        between("TaskConfig", 0, 1, train_fraction=self.train_fraction)


def with_task(
    payload: dict[str, Any],
    *,
    classes: int,
    features: int,
    train_fraction: float,
    seed: int,
) -> dict[str, Any]:
    """Batch step: the dataset with labels, features and split masks.

    What the dataset lacks is drawn from ``numpy.random.default_rng(seed)``:
    labels uniform in ``[0, classes)``, standard-normal float32 features of width
    ``features``, and a split of ``train_fraction`` training, 10% validation and
    the rest test nodes. ``meta["synthesized"]`` lists what was drawn.

    Examples:
        >>> from strata.operators.io.datasets import load_dataset
        >>> payload = load_dataset("rmat:scale=6,edge_factor=4")
        >>> out = with_task(payload, classes=3, features=5, train_fraction=0.5,
        ...                 seed=0)
        >>> out["node"]["x"].shape, out["meta"]["synthesized"]
        ((64, 5), ['y', 'x', 'masks'])
    """
    n = int(payload["num_nodes"])
    node = dict(payload["node"])
    meta = dict(payload["meta"])
    rng = np.random.default_rng(seed)
    drawn = []
    if "y" not in node:
        node["y"] = rng.integers(0, classes, n, dtype=np.int64)
        meta["num_classes"] = classes
        drawn.append("y")
    if "x" not in node:
        node["x"] = rng.standard_normal((n, features), dtype=np.float32)
        drawn.append("x")
    if "train_mask" not in node:
        u = rng.random(n)
        node["train_mask"] = u < train_fraction
        node["val_mask"] = (u >= train_fraction) & (u < train_fraction + 0.1)
        node["test_mask"] = u >= train_fraction + 0.1
        drawn.append("masks")
    meta["synthesized"] = drawn
    return {**payload, "node": node, "meta": meta}


def task_facts(payload: dict[str, Any]) -> dict[str, Any]:
    """Batch step: what the summary reports about the data (not the arrays).

    Examples:
        >>> task_facts({"name": "g", "num_nodes": 3, "meta": {"synthesized": []}})
        {'dataset': 'g', 'num_nodes': 3, 'synthesized': []}
    """
    return {
        "dataset": payload["name"],
        "num_nodes": int(payload["num_nodes"]),
        "synthesized": list(payload["meta"].get("synthesized", [])),
    }


def with_features(payload: dict[str, Any], width: int, seed: int) -> dict[str, Any]:
    """Batch step: the payload, with ``width`` seeded Gaussian features if it has none.

    Examples:
        >>> payload = {"num_nodes": 3, "node": {}}
        >>> with_features(payload, 2, seed=0)["node"]["x"].shape
        (3, 2)
    """
    if "x" in payload["node"]:
        return payload
    rng = np.random.default_rng([seed, 0xFEA7])
    x = rng.standard_normal((int(payload["num_nodes"]), width), dtype=np.float32)
    return {**payload, "node": {**payload["node"], "x": x}}
