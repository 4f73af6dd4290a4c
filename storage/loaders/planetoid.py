"""The Planetoid citation datasets (Cora, CiteSeer, PubMed) from their raw files.

The raw files (``ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}``, from the
``kimiyoung/planetoid`` repository) are read with a restricted unpickler, without
scipy, and assembled exactly as PyG's ``Planetoid(split="public")`` does:

* features ``x`` = ``allx`` then ``tx`` (float32), with the test rows put back into the
  order of ``test.index``; labels ``y`` = argmax of the one-hot rows (int64);
* masks: train = the first ``len(y)`` nodes (20 per class), val = the next 500,
  test = the 1000 nodes of ``test.index``;
* edges from the adjacency dict with self loops and duplicates removed (directed
  edges, both directions present).

CiteSeer's test indices have gaps (isolated nodes missing from ``tx``); as in PyG,
the gaps are padded with zero feature rows and label 0, and are in no mask.

Cora ships with Strata (``storage/data/planetoid``), so ``load_planetoid("cora")``
works without any download.

Examples:
    >>> ds = load_planetoid("cora")
    >>> ds.graph.num_nodes, ds.graph.num_edges, ds.x.shape[1], ds.num_classes
    (2708, 10556, 1433, 7)
    >>> [int(m.sum()) for m in (ds.train_mask, ds.val_mask, ds.test_mask)]
    [140, 500, 1000]
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np

from strata.storage.csr import CSRGraph, DuplicatePolicy, SelfLoopPolicy
from strata.storage.dataset.model import GraphDataset
from strata.storage.errors import FormatError
from strata.storage.loaders._safe_pickle import load_restricted, sparse_to_dense

PLANETOID_NAMES = ("cora", "citeseer", "pubmed")
_PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
_WHERE = "load_planetoid"


def shipped_planetoid_dir() -> Path:
    """Directory of the Planetoid raw files shipped as package data (Cora)."""
    return Path(str(resources.files("strata.storage") / "data" / "planetoid"))


def _find_dir(name: str, root: Path | None) -> Path:
    """Locate ``ind.<name>.*``: ``root``, ``root/<Name>/raw``, or the shipped copy."""
    candidates = [shipped_planetoid_dir()] if root is None else []
    if root is not None:
        candidates = [root, root / name / "raw", root / name.capitalize() / "raw"]
        candidates += [root / "CiteSeer" / "raw", root / "PubMed" / "raw"]
    for folder in candidates:
        if (folder / f"ind.{name}.graph").is_file():
            return folder
    raise FormatError.build(
        "planetoid files",
        _WHERE,
        f"ind.{name}.* in one of {[str(c) for c in candidates]}",
        "no such files",
        "only Cora ships with Strata; pass data_dir for the others",
    )


def _read(folder: Path, name: str, part: str) -> object:
    path = folder / f"ind.{name}.{part}"
    try:
        data = path.read_bytes()
    except OSError as err:
        raise FormatError.build(
            "planetoid file", _WHERE, "a readable file", f"{path}: {err.strerror}"
        ) from err
    if part == "test.index":
        try:
            return np.array([int(line) for line in data.split()], dtype=np.int64)
        except ValueError as err:
            raise FormatError.build(
                "test index", str(path), "one integer per line", str(err)
            ) from err
    out = load_restricted(data, str(path))
    if part == "graph":
        return out
    return sparse_to_dense(out, str(path))


def _pad_gaps(
    tx: np.ndarray, ty: np.ndarray, test_index: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Insert zero rows for ids missing from a gappy test index (CiteSeer)."""
    low = int(test_index.min())
    span = int(test_index.max()) - low + 1
    offsets = np.sort(test_index) - low
    tx_ext = np.zeros((span, tx.shape[1]), dtype=tx.dtype)
    ty_ext = np.zeros((span, ty.shape[1]), dtype=ty.dtype)
    tx_ext[offsets] = tx
    ty_ext[offsets] = ty
    return tx_ext, ty_ext


def _edges(graph: object, num_nodes: int, source: str) -> CSRGraph:
    if not isinstance(graph, dict):
        raise FormatError.build(
            "adjacency", source, "a dict of neighbour lists", type(graph).__name__
        )
    try:
        src = np.concatenate(
            [np.full(len(v), int(k), dtype=np.int64) for k, v in graph.items()]
            or [np.empty(0, dtype=np.int64)]
        )
        dst = np.concatenate(
            [np.asarray(v, dtype=np.int64) for v in graph.values()]
            or [np.empty(0, dtype=np.int64)]
        )
    except (TypeError, ValueError) as err:
        raise FormatError.build(
            "adjacency", source, "integer node ids", str(err)
        ) from err
    return CSRGraph.from_edges(
        src,
        dst,
        num_nodes,
        self_loops=SelfLoopPolicy.REMOVE,
        duplicates=DuplicatePolicy.REMOVE,
    )


def load_planetoid(name: str, root: str | Path | None = None) -> GraphDataset:
    """Load a Planetoid dataset from its raw files, exactly as PyG's public split.

    Args:
        name: ``cora``, ``citeseer`` or ``pubmed`` (any case).
        root: directory holding ``ind.<name>.*`` directly or in PyG's layout
            ``<root>/<Name>/raw``; ``None`` uses the copy shipped with Strata (Cora).

    Returns:
        A dataset with node arrays ``x`` (float32), ``y`` (int64), and boolean
        ``train_mask``, ``val_mask``, ``test_mask``; ``meta['num_classes']`` is set.

    Raises:
        FormatError: if the files are missing, malformed, or contain pickled objects
            other than the arrays, sparse matrices and dict Planetoid uses.
    """
    key = name.lower()
    if key not in PLANETOID_NAMES:
        raise FormatError.build("name", _WHERE, f"one of {PLANETOID_NAMES}", repr(name))
    folder = _find_dir(key, None if root is None else Path(root))
    parts = {part: _read(folder, key, part) for part in _PARTS}
    # ``x`` (the training rows alone) repeats the head of ``allx``; it is not needed.
    tx, allx = (np.asarray(parts[p]) for p in ("tx", "allx"))
    y, ty, ally = (np.asarray(parts[p]) for p in ("y", "ty", "ally"))
    test_index = np.asarray(parts["test.index"])
    sorted_test = np.sort(test_index)
    if key == "citeseer":
        tx, ty = _pad_gaps(tx, ty, test_index)

    features = np.concatenate([allx, tx]).astype(np.float32)
    features[test_index] = features[sorted_test]
    labels = np.concatenate([ally, ty]).argmax(axis=1).astype(np.int64)
    labels[test_index] = labels[sorted_test]
    n = labels.shape[0]
    masks = {}
    for mask_name, ids in (
        ("train_mask", np.arange(y.shape[0])),
        ("val_mask", np.arange(y.shape[0], min(y.shape[0] + 500, n))),
        ("test_mask", test_index),
    ):
        mask = np.zeros(n, dtype=bool)
        mask[ids] = True
        masks[mask_name] = mask
    graph = _edges(parts["graph"], n, str(folder / f"ind.{key}.graph"))
    return GraphDataset(
        graph,
        node_data={"x": features, "y": labels, **masks},
        name=key,
        meta={"source": f"planetoid:{key}", "num_classes": int(ally.shape[1])},
    )
