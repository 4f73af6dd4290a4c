"""The benchmark graph: RMAT (Graph500) written as plain .npy files for every runner.

Built exactly as follows (``write_rmat_dataset``):

1. ``strata.storage.generators.rmat(scale, edge_factor, seed=seed, symmetrize=True,
   self_loops=SelfLoopPolicy.REMOVE, duplicates=DuplicatePolicy.REMOVE)``: Graph500
   parameters (a, b, c) = (0.57, 0.19, 0.19), ``edge_factor * 2**scale`` directed
   edges, node ids randomly permuted, then made simple and undirected (reverse
   edges added, self-loops and repeated edges dropped). Scale 18, edge factor 16
   gives 262,144 nodes and 7,612,712 directed edges (seed 0).
2. Features: float32 standard normal ``[num_nodes, num_features]``; labels:
   uniform in ``[0, num_classes)``; both from ``numpy.random.default_rng(seed)``.
3. Training seeds for sampled training: ``num_train`` node ids drawn without
   replacement from the nodes with at least one in-edge (RMAT leaves about a third
   of its nodes isolated; a seed without neighbours would measure nothing).

Files: ``indptr.npy`` (int64), ``indices.npy`` (int32; the CSR out-adjacency, which
equals the in-adjacency because the graph is symmetric), ``x.npy``, ``y.npy``
(int64), ``train_ids.npy`` (int64) and ``meta.json``. The DGL scripts read these
with numpy alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from strata.storage import CSRGraph, DuplicatePolicy, SelfLoopPolicy
from strata.storage.generators import rmat


def write_rmat_dataset(
    out_dir: Path,
    scale: int,
    *,
    edge_factor: int = 16,
    num_features: int = 128,
    num_classes: int = 16,
    num_train: int = 65536,
    seed: int = 0,
) -> Path:
    """Generate the graph, features, labels and seeds into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    graph = rmat(
        scale,
        edge_factor,
        seed=seed,
        symmetrize=True,
        self_loops=SelfLoopPolicy.REMOVE,
        duplicates=DuplicatePolicy.REMOVE,
    )
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((graph.num_nodes, num_features), dtype=np.float32)
    y = rng.integers(0, num_classes, graph.num_nodes, dtype=np.int64)
    candidates = np.flatnonzero(graph.in_degree() > 0)
    train_ids = rng.permutation(candidates)[: min(num_train, candidates.size)]
    np.save(out_dir / "indptr.npy", graph.indptr)
    np.save(out_dir / "indices.npy", graph.indices.astype(np.int32))
    np.save(out_dir / "x.npy", x)
    np.save(out_dir / "y.npy", y)
    np.save(out_dir / "train_ids.npy", train_ids.astype(np.int64))
    meta = {
        "generator": "strata.storage.generators.rmat (Graph500 a,b,c=0.57,0.19,0.19)",
        "scale": scale,
        "edge_factor": edge_factor,
        "seed": seed,
        "policies": "symmetrize, remove self-loops, remove duplicates",
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
        "num_features": num_features,
        "num_classes": num_classes,
        "num_train": int(train_ids.size),
    }
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2))
    return out_dir


def load_graph(data_dir: Path) -> CSRGraph:
    """The dataset's graph as a CSRGraph (no copy beyond reading the files)."""
    indptr = np.load(data_dir / "indptr.npy")
    indices = np.load(data_dir / "indices.npy")
    return CSRGraph(indptr=indptr, indices=indices, num_nodes=indptr.shape[0] - 1)
