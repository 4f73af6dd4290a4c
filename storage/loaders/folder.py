r"""The normal way in: a folder holding ``edges.parquet`` and ``nodes.parquet``.

Layout::

    my_graph/
      edges.parquet   src, dst [, weight]   (or edges.csv / .tsv / .txt)
      nodes.parquet   id [, label] [, split | *_mask] [, features...]  (optional;
                      or nodes.csv)
      graph.json      {"directed": false, "name": "my_graph"}           (optional)

Ids may be anything (1-based, sparse, 64-bit, strings); they are mapped to
``0..n-1`` and kept in ``node_data['node_ids']`` (see
:mod:`strata.storage.loaders.edgelist`). ``nodes.parquet`` is joined by id
(:mod:`strata.storage.loaders.nodes`). Edges are directed unless ``graph.json``
says ``"directed": false`` or the caller passes ``undirected=True``.

Examples:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "edges.csv").write_text("src,dst\na,b\nb,c\n")
    >>> _ = (folder / "graph.json").write_text('{"directed": false}')
    >>> ds = load_folder(folder)
    >>> ds.graph.num_nodes, ds.graph.num_edges, ds.meta["directed"]
    (3, 4, False)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from strata.storage.dataset.model import GraphDataset
from strata.storage.errors import FormatError
from strata.storage.loaders.edgelist import load_edge_list

_WHERE = "load_folder"
EDGE_FILES = ("edges.parquet", "edges.csv", "edges.tsv", "edges.txt")
NODE_FILES = ("nodes.parquet", "nodes.csv")
GRAPH_JSON = "graph.json"


def find_edge_file(folder: Path) -> Path | None:
    """The folder's edge file, if it holds one of :data:`EDGE_FILES`."""
    return next((folder / f for f in EDGE_FILES if (folder / f).is_file()), None)


def _graph_json(folder: Path) -> dict[str, Any]:
    path = folder / GRAPH_JSON
    if not path.is_file():
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise FormatError.build(str(path), _WHERE, "valid JSON", str(err)) from err
    if not isinstance(raw, dict) or not isinstance(raw.get("directed", True), bool):
        raise FormatError.build(
            str(path),
            _WHERE,
            'an object like {"directed": false}',
            repr(raw)[:120],
        )
    return raw


def load_folder(
    folder: str | Path, *, undirected: bool = False, **options: Any
) -> GraphDataset:
    """Load a graph folder (see the module doc).

    Args:
        folder: the folder.
        undirected: read the edges as undirected even if ``graph.json`` does not say.
        **options: passed to :func:`~strata.storage.loaders.edgelist.load_edge_list`
            (``src_col``, ``structural``, ...).

    Returns:
        The dataset, named after the folder unless ``graph.json`` names it.

    Raises:
        FormatError: when the folder has no edge file, or any file is malformed.
    """
    folder = Path(folder)
    edges = find_edge_file(folder)
    if edges is None:
        raise FormatError.build(
            str(folder),
            _WHERE,
            f"a graph folder holding one of {list(EDGE_FILES)}",
            "none of them",
            "or give a dataset directory (with manifest.json) or an edge-list file",
        )
    config = _graph_json(folder)
    nodes = next((folder / f for f in NODE_FILES if (folder / f).is_file()), None)
    options.setdefault("nodes", nodes)
    name = options.pop("name", None) or config.get("name") or folder.resolve().name
    return load_edge_list(
        edges,
        name=str(name),
        undirected=undirected or config.get("directed") is False,
        **options,
    )
