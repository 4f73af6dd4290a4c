"""Edge splits and negative sampling for link prediction.

:func:`split_edges` treats the graph as undirected: each node pair joined by an edge
in either direction (self-loops dropped) is one positive. The pairs are shuffled
(seeded) and cut into training, validation and test positives; the message-passing
graph keeps only the training pairs, in both directions, so no held-out edge
carries a message (PyG's ``RandomLinkSplit`` with ``is_undirected=True``).

Fixed evaluation negatives are drawn once per split from the pairs that are not
edges of the whole graph (one per positive, for AUC), plus ``candidates`` random
destinations per positive's source for MRR and Hits@K (raw, unfiltered ranks, as
OGB's ``citation2``). Training negatives are drawn every epoch (or batch) with a
generator keyed by the seed, the epoch and the batch, among the pairs that are not
training edges.

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> ring = np.arange(20)
    >>> g = CSRGraph.from_edges(ring, (ring + 1) % 20, symmetrize=True)
    >>> split = split_edges(g, val_fraction=0.1, test_fraction=0.2, seed=0)
    >>> [split.positives[s].shape[1] for s in ("train", "val", "test")]
    [14, 2, 4]
    >>> split.graph.num_edges  # training pairs, both directions
    28
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from strata.operators.errors import OperatorError
from strata.storage import CSRGraph
from strata.storage.csr import DuplicatePolicy, SelfLoopPolicy

__all__ = ["EdgeSplit", "negative_pairs", "pair_keys", "split_edges"]

EVAL_SPLITS = ("val", "test")


@dataclass(frozen=True, slots=True, eq=False)
class EdgeSplit:
    """Positive and negative node pairs per split, and the message-passing graph.

    Attributes:
        graph: the training pairs in both directions (what layers read).
        positives: int64 ``[2, m]`` pairs per split (``train``, ``val``, ``test``).
        negatives: int64 ``[2, m]`` fixed non-edges per split (``train`` holds a
            sample as large as the test split, for the training AUC).
        candidates: int64 ``[m, k]`` random destinations per positive's source,
            per split (the ranking negatives of MRR and Hits@K).
        train_keys: sorted keys (:func:`pair_keys`) of the training pairs.
    """

    graph: CSRGraph
    positives: dict[str, np.ndarray]
    negatives: dict[str, np.ndarray]
    candidates: dict[str, np.ndarray]
    train_keys: np.ndarray


def pair_keys(pairs: np.ndarray, num_nodes: int) -> np.ndarray:
    """One int64 key per unordered pair: ``min * num_nodes + max``."""
    low = np.minimum(pairs[0], pairs[1]).astype(np.int64)
    high = np.maximum(pairs[0], pairs[1]).astype(np.int64)
    return low * num_nodes + high


def negative_pairs(
    num_nodes: int,
    count: int,
    forbidden: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """``count`` uniform random pairs that are neither loops nor in ``forbidden``.

    Args:
        num_nodes: nodes to draw from.
        count: pairs to return.
        forbidden: sorted keys (:func:`pair_keys`) of the pairs to avoid.
        rng: the generator (keyed by the caller).

    Returns:
        int64 ``[2, count]``.
    """
    out = np.empty((2, 0), dtype=np.int64)
    while out.shape[1] < count:
        need = count - out.shape[1]
        draw = rng.integers(0, num_nodes, size=(2, int(need * 1.2) + 16))
        keys = pair_keys(draw, num_nodes)
        keep = draw[0] != draw[1]
        if len(forbidden):
            at = np.minimum(np.searchsorted(forbidden, keys), len(forbidden) - 1)
            keep &= forbidden[at] != keys
        out = np.concatenate([out, draw[:, keep][:, :need]], axis=1)
    return out


def split_edges(
    graph: CSRGraph,
    *,
    val_fraction: float,
    test_fraction: float,
    seed: int,
    candidates: int = 100,
    where: str = "split_edges",
) -> EdgeSplit:
    """Split ``graph``'s undirected pairs into training, validation and test edges.

    Raises:
        OperatorError: when the split leaves no training pair.
    """
    n = graph.num_nodes
    src, dst = graph.to_coo()
    loops = src == dst
    keys = np.unique(pair_keys(np.stack([src[~loops], dst[~loops]]), n))
    rng = np.random.default_rng([seed, 0x11F])
    keys = keys[rng.permutation(len(keys))]
    num_test = round(test_fraction * len(keys))
    num_val = round(val_fraction * len(keys))
    cut = {
        "test": keys[:num_test],
        "val": keys[num_test : num_test + num_val],
        "train": keys[num_test + num_val :],
    }
    if len(cut["train"]) == 0:
        raise OperatorError.build(
            "edges",
            where,
            "at least one training edge",
            f"{len(keys)} edges, {num_val} for validation and {num_test} for test",
            "lower val_fraction or test_fraction",
        )
    positives = {s: np.stack([k // n, k % n]) for s, k in cut.items()}
    train = positives["train"]
    message_graph = CSRGraph.from_edges(
        np.concatenate([train[0], train[1]]),
        np.concatenate([train[1], train[0]]),
        n,
        self_loops=SelfLoopPolicy.REMOVE,
        duplicates=DuplicatePolicy.REMOVE,
    )
    every = np.sort(keys)
    negatives = {}
    ranking = {}
    for split in ("train", *EVAL_SPLITS):
        size = positives["test" if split == "train" else split].shape[1]
        negatives[split] = negative_pairs(n, size, every, rng)
        count = min(positives[split].shape[1], max(size, 1))
        ranking[split] = rng.integers(0, n, size=(count, candidates))
    # the training AUC and ranks use the first pairs of the (shuffled) train split
    return EdgeSplit(
        message_graph, positives, negatives, ranking, np.sort(cut["train"])
    )
