"""Graph spec strings: one string names a graph source anywhere a graph is expected.

Syntax (``KIND:key=value,...``, values are ints, floats or ``true``/``false``)::

    planetoid:cora                      Cora as shipped with Strata
    planetoid:citeseer                  looked up in data_dir (ind.citeseer.* files)
    rmat:scale=16,edge_factor=16,seed=0 RMAT, Graph500 parameters (a, b, c settable)
    sbm:n=10000,blocks=8,degree=10,intra=0.8,seed=0
    rgg:n=100000,radius=0.005,seed=0
    zipf:n=1048576,edges=8000000,alpha=1.2,seed=0   source-skewed (TD-Orch's G2)
    path/to/dataset_dir                 a directory with manifest.json (memory-mapped)
    path/to/graph_folder                a folder with edges.parquet [+ nodes.parquet]
    path/to/edges.csv                   an edge list (csv, tsv, txt/snap, parquet)
    path/to/graph.graph, path/to/m.mtx  METIS and MatrixMarket files

Files and folders load with ids mapped to ``0..n-1`` and the original ids in
``node_data['node_ids']`` (see :mod:`strata.storage.loaders.edgelist`).

Generator keys and defaults:

* ``rmat``: ``scale`` (required), ``edge_factor=16``, ``a=0.57``, ``b=0.19``,
  ``c=0.19``, ``seed=0``, ``permute=true``, ``undirected=false`` (true: symmetrise and
  drop loops and duplicate edges), ``features=0`` (Gaussian node features ``x``).
* ``sbm``: ``n`` and ``blocks`` (required), ``degree=10``, ``intra=0.8``, ``seed=0``,
  ``permute=true``, ``features=16``, ``noise=1.0``; labels ``y`` are the blocks, with
  Planetoid-shaped masks (20 per class / 500 / 1000) and, when ``features > 0``,
  community-correlated features ``x``.
* ``rgg``: ``n`` and ``radius`` (required), ``seed=0``; node array ``pos`` holds the
  coordinates.
* ``zipf``: ``n`` and ``edges`` (required; edges sampled before deduplication),
  ``alpha=1.2`` (Zipf exponent of the sources; destinations uniform), ``seed=0``,
  ``permute=true``, ``weights=false`` (true: integer weights 1..100 for SSSP).

Examples:
    >>> ds = load_graph("rmat:scale=10,edge_factor=8,seed=1,undirected=true")
    >>> ds.name, ds.graph.num_nodes, ds.graph.is_symmetric()
    ('rmat-s10-ef8', 1024, True)
    >>> ds = load_graph("sbm:n=500,blocks=5,features=8")
    >>> ds.x.shape, ds.num_classes, int(ds.train_mask.sum())
    ((500, 8), 5, 100)
    >>> parse_spec("rgg:n=100,radius=0.1")
    GraphSpec(kind='rgg', params={'n': 100, 'radius': 0.1}, path=None)
    >>> load_graph("zipf:n=1000,edges=5000,alpha=1.5,weights=true").graph.num_nodes
    1000
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from strata.storage.csr import DuplicatePolicy, SelfLoopPolicy
from strata.storage.dataset.manifest import MANIFEST
from strata.storage.dataset.model import GraphDataset
from strata.storage.dataset.reader import open_dataset
from strata.storage.errors import FormatError
from strata.storage.generators import (
    community_features,
    random_geometric,
    rmat,
    sbm,
    split_masks,
    zipf_source_graph,
)
from strata.storage.loaders.edgelist import load_edge_list
from strata.storage.loaders.folder import find_edge_file, load_folder
from strata.storage.loaders.planetoid import PLANETOID_NAMES, load_planetoid

Scalar = int | float | bool
_WHERE = "load_graph"
#: The spec kinds that name a generator or a bundled loader.
GENERATORS = ("planetoid", "rmat", "sbm", "rgg", "zipf")
_SCHEME = re.compile(rf"({'|'.join(GENERATORS)}):(.*)", re.DOTALL)
# ``word:...`` that is not a known kind (a path never looks like this on POSIX
# unless it exists, which is checked first).
_UNKNOWN_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9_]*):(?!//)(.*)", re.DOTALL)
_KEYS: dict[str, tuple[set[str], set[str]]] = {  # kind -> (required, optional)
    "rmat": (
        {"scale"},
        {"edge_factor", "a", "b", "c", "seed", "permute", "undirected", "features"},
    ),
    "sbm": (
        {"n", "blocks"},
        {"degree", "intra", "seed", "permute", "features", "noise"},
    ),
    "rgg": ({"n", "radius"}, {"seed"}),
    "zipf": ({"n", "edges"}, {"alpha", "seed", "permute", "weights"}),
}


@dataclass(frozen=True, slots=True)
class GraphSpec:
    """A parsed graph spec: a generator or loader kind and its parameters.

    Attributes:
        kind: ``planetoid``, ``rmat``, ``sbm``, ``rgg``, ``dataset``, ``folder`` or
            ``edges``.
        params: generator parameters (for ``planetoid``: ``{"name": ...}``).
        path: the path of ``dataset``, ``folder`` and ``edges`` specs.
    """

    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None


def _value(text: str) -> Scalar:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for cast in (int, float):
        try:
            return cast(lowered)
        except ValueError:
            continue
    raise ValueError(text)


def _params(kind: str, body: str, spec: str) -> dict[str, Scalar]:
    params: dict[str, Scalar] = {}
    for item in filter(None, (part.strip() for part in body.split(","))):
        key, sep, raw = item.partition("=")
        try:
            if not sep:
                raise ValueError(item)
            params[key.strip()] = _value(raw)
        except ValueError:
            raise FormatError.build(
                f"graph spec {spec!r}",
                _WHERE,
                "key=value pairs with numeric or true/false values",
                repr(item),
            ) from None
    required, optional = _KEYS[kind]
    missing = sorted(required - params.keys())
    unknown = sorted(params.keys() - required - optional)
    if missing or unknown:
        raise FormatError.build(
            f"graph spec {spec!r}",
            _WHERE,
            f"keys {sorted(required)} and optionally {sorted(optional)}",
            f"missing {missing}, unknown {unknown}",
        )
    return params


def parse_spec(spec: str) -> GraphSpec:
    """Parse a spec string without loading anything (paths are not checked).

    Raises:
        FormatError: on an unknown generator key, a missing required key, or a
            malformed value.
    """
    match = _SCHEME.fullmatch(spec.strip())
    if match is None:
        path = Path(spec).expanduser()
        unknown = _UNKNOWN_SCHEME.fullmatch(spec.strip())
        if unknown is not None and not path.exists():
            raise FormatError.build(
                f"graph spec {spec!r}",
                _WHERE,
                f"a generator ({', '.join(GENERATORS)}), a dataset directory, a graph "
                "folder or an edge-list file",
                f"unknown generator {unknown.group(1)!r} (and no file of that name)",
                "e.g. rmat:scale=10 or planetoid:cora.",
            )
        if path.is_dir() and find_edge_file(path) and not (path / MANIFEST).exists():
            return GraphSpec("folder", path=path)
        is_dataset = path.is_dir() or path.name == MANIFEST
        return GraphSpec("dataset" if is_dataset else "edges", path=path)
    kind, body = match.groups()
    if kind == "planetoid":
        name = body.strip().lower()
        if name not in PLANETOID_NAMES:
            raise FormatError.build(
                f"graph spec {spec!r}", _WHERE, f"one of {PLANETOID_NAMES}", repr(body)
            )
        return GraphSpec("planetoid", {"name": name})
    return GraphSpec(kind, _params(kind, body, spec))


def _int(params: dict[str, Any], key: str, default: int | None = None) -> int:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError.build(key, _WHERE, "an integer", repr(value))
    return value


def _rmat(params: dict[str, Any]) -> GraphDataset:
    scale, ef = _int(params, "scale"), _int(params, "edge_factor", 16)
    undirected = bool(params.get("undirected", False))
    graph = rmat(
        scale,
        ef,
        a=float(params.get("a", 0.57)),
        b=float(params.get("b", 0.19)),
        c=float(params.get("c", 0.19)),
        seed=_int(params, "seed", 0),
        permute=bool(params.get("permute", True)),
        symmetrize=undirected,
        self_loops=SelfLoopPolicy.REMOVE if undirected else SelfLoopPolicy.KEEP,
        duplicates=DuplicatePolicy.REMOVE if undirected else DuplicatePolicy.KEEP,
    )
    node_data: dict[str, np.ndarray] = {}
    features = _int(params, "features", 0)
    if features:
        rng = np.random.default_rng(_int(params, "seed", 0))
        node_data["x"] = rng.standard_normal((graph.num_nodes, features), np.float32)
    return GraphDataset(graph, node_data, name=f"rmat-s{scale}-ef{ef}")


def _sbm(params: dict[str, Any]) -> GraphDataset:
    n, blocks, seed = _int(params, "n"), _int(params, "blocks"), _int(params, "seed", 0)
    graph, labels = sbm(
        n,
        blocks,
        float(params.get("degree", 10.0)),
        float(params.get("intra", 0.8)),
        seed=seed,
        permute=bool(params.get("permute", True)),
    )
    train, val, test = split_masks(labels, seed=seed)
    node_data: dict[str, np.ndarray] = {
        "y": labels,
        "train_mask": train,
        "val_mask": val,
        "test_mask": test,
    }
    features = _int(params, "features", 16)
    if features:
        noise = float(params.get("noise", 1.0))
        node_data["x"] = community_features(labels, features, noise=noise, seed=seed)
    meta = {"num_classes": blocks}
    return GraphDataset(graph, node_data, name=f"sbm-n{n}-b{blocks}", meta=meta)


def _rgg(params: dict[str, Any]) -> GraphDataset:
    n = _int(params, "n")
    graph, pos = random_geometric(
        n, float(params["radius"]), seed=_int(params, "seed", 0)
    )
    return GraphDataset(graph, {"pos": pos}, name=f"rgg-n{n}")


def _zipf(params: dict[str, Any]) -> GraphDataset:
    n, edges = _int(params, "n"), _int(params, "edges")
    alpha = float(params.get("alpha", 1.2))
    graph = zipf_source_graph(
        n,
        edges,
        alpha=alpha,
        seed=_int(params, "seed", 0),
        permute=bool(params.get("permute", True)),
        weights=bool(params.get("weights", False)),
    )
    return GraphDataset(graph, {}, name=f"zipf-n{n}-a{alpha:g}")


def load_graph(
    spec: str | GraphSpec, *, data_dir: str | Path | None = None
) -> GraphDataset:
    """Load the graph a spec names (see the module doc for the syntax).

    Args:
        spec: a spec string or a parsed :class:`GraphSpec`.
        data_dir: where ``planetoid:NAME`` looks for ``ind.NAME.*`` files (also in
            ``data_dir/NAME`` and PyG's ``data_dir/Name/raw``); Cora falls back to
            the shipped copy.

    Returns:
        The dataset; ``meta['source']`` records the spec.

    Raises:
        FormatError: on a malformed spec or an unreadable source.
        DatasetError: on a damaged dataset directory.
    """
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    source = spec if isinstance(spec, str) else repr(spec)
    if parsed.kind == "planetoid":
        name = parsed.params["name"]
        root = None if data_dir is None else Path(data_dir)
        try:
            dataset = load_planetoid(name, root)
        except FormatError:
            if root is None or name != "cora":
                raise
            dataset = load_planetoid(name)
    elif parsed.kind == "dataset":
        assert parsed.path is not None
        directory = parsed.path.parent if parsed.path.name == MANIFEST else parsed.path
        return open_dataset(directory)
    elif parsed.kind == "edges":
        assert parsed.path is not None
        dataset = load_edge_list(parsed.path)
    elif parsed.kind == "folder":
        assert parsed.path is not None
        dataset = load_folder(parsed.path)
    else:
        build = {"rmat": _rmat, "sbm": _sbm, "rgg": _rgg, "zipf": _zipf}[parsed.kind]
        dataset = build(parsed.params)
    return GraphDataset(
        dataset.graph,
        dataset.node_data,
        dataset.edge_data,
        name=dataset.name,
        meta={**dataset.meta, "source": source},
    )
