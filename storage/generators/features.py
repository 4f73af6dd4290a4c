"""Synthetic node features and train/val/test splits for generated graphs.

:func:`community_features` draws class-conditioned Gaussian features: every class ``k``
has a centre ``mu_k`` and a node of class ``k`` gets ``mu_k + noise * eps`` with ``eps ~
N(0, I)``. Centres are scaled so that two centres are about ``sqrt(2)`` apart whatever
the dimension, so ``noise`` alone sets the difficulty: near ``noise = 1`` the classes
overlap heavily and a classifier on features alone is weak, while averaging over
neighbours (which share the class with probability ``intra_fraction`` on
:func:`strata.storage.generators.sbm` graphs) shrinks the noise. That gap is what makes
GNN accuracy on these graphs meaningful.

:func:`split_masks` reproduces the Planetoid split shape: ``train_per_class`` nodes of
every class, then ``num_val`` and ``num_test`` nodes from the rest, all seeded.

Examples:
    >>> import numpy as np
    >>> labels = np.repeat(np.arange(3), 50)
    >>> x = community_features(labels, 16, noise=0.1, seed=0)
    >>> x.shape, x.dtype
    ((150, 16), dtype('float32'))
    >>> train, val, test = split_masks(labels, train_per_class=5, num_val=30,
    ...                                num_test=60, seed=0)
    >>> int(train.sum()), int(val.sum()), int(test.sum())
    (15, 30, 60)
    >>> bool((train & val).any() or (train & test).any() or (val & test).any())
    False
"""

from __future__ import annotations

import numpy as np

from strata.storage._types import BoolArray, Float32Array, Int64Array
from strata.storage.errors import FeatureError


def _check_labels(labels: np.ndarray, where: str) -> Int64Array:
    labels = np.asarray(labels)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise FeatureError.build(
            "labels",
            where,
            "a 1-D integer array",
            f"{labels.dtype} of shape {labels.shape}",
        )
    if labels.size and labels.min() < 0:
        raise FeatureError.build("labels", where, "labels >= 0", str(labels.min()))
    return labels.astype(np.int64, copy=False)


def community_features(
    labels: np.ndarray,
    num_features: int,
    *,
    noise: float = 1.0,
    seed: int = 0,
) -> Float32Array:
    """Draw class-conditioned Gaussian node features.

    Args:
        labels: 1-D integer class of every node (e.g. the blocks from ``sbm``).
        num_features: feature dimension ``D >= 1``.
        noise: per-dimension standard deviation of the noise around the class centre;
            centres are about ``sqrt(2)`` apart, so ``noise`` near 1 is hard for a
            feature-only classifier and near 0.1 is easy.
        seed: random seed.

    Returns:
        float32 array of shape ``(len(labels), num_features)``.

    Raises:
        FeatureError: on non-integer or negative labels, ``num_features < 1`` or a
            negative ``noise``.
    """
    where = "community_features"
    labels = _check_labels(labels, where)
    if num_features < 1:
        raise FeatureError.build(
            "num_features", where, "num_features >= 1", str(num_features)
        )
    if not noise >= 0:
        raise FeatureError.build("noise", where, "noise >= 0", str(noise))
    rng = np.random.default_rng(seed)
    num_classes = int(labels.max()) + 1 if labels.size else 0
    # Per-dimension variance 1/D gives |mu_i - mu_j| ~ sqrt(2) for any D.
    centres = rng.standard_normal((num_classes, num_features)) / np.sqrt(num_features)
    x = centres[labels] + noise * rng.standard_normal((labels.shape[0], num_features))
    features: Float32Array = x.astype(np.float32)
    return features


def split_masks(
    labels: np.ndarray,
    *,
    train_per_class: int = 20,
    num_val: int = 500,
    num_test: int = 1000,
    seed: int = 0,
) -> tuple[BoolArray, BoolArray, BoolArray]:
    """Draw disjoint train/val/test masks in the Planetoid shape.

    Classes with fewer than ``train_per_class`` nodes contribute all their nodes;
    ``num_val`` and ``num_test`` are clipped to the nodes that remain.

    Args:
        labels: 1-D integer class of every node.
        train_per_class: training nodes per class.
        num_val: validation nodes, drawn from the non-training nodes.
        num_test: test nodes, drawn from the rest.
        seed: random seed.

    Returns:
        ``(train_mask, val_mask, test_mask)`` boolean arrays of ``len(labels)``.

    Raises:
        FeatureError: on non-integer or negative labels or negative counts.
    """
    where = "split_masks"
    labels = _check_labels(labels, where)
    for name, value in (
        ("train_per_class", train_per_class),
        ("num_val", num_val),
        ("num_test", num_test),
    ):
        if value < 0:
            raise FeatureError.build(name, where, f"{name} >= 0", str(value))
    rng = np.random.default_rng(seed)
    n = labels.shape[0]
    order = rng.permutation(n)
    # Stable sort of a random order by class: a random sample of each class first.
    by_class = order[np.argsort(labels[order], kind="stable")]
    counts = np.bincount(labels, minlength=1)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.empty(n, dtype=np.int64)
    rank[by_class] = np.arange(n) - np.repeat(starts, counts)
    train = rank < train_per_class
    rest = order[~train[order]]
    val = np.zeros(n, dtype=bool)
    test = np.zeros(n, dtype=bool)
    val[rest[:num_val]] = True
    test[rest[num_val : num_val + num_test]] = True
    return train, val, test
