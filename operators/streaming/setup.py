"""Where a streaming job's starting graph, features and model come from.

A source step sends them down the pipeline once, as an ``init`` item, before the
first update: every layer step then starts from the same state without loading or
training anything itself (in-process the arrays are shared, on the process executor
they travel as raw buffers). A *setup* is any picklable object with
``load() -> InitData``: :class:`StaticSetup` holds arrays (tests, benchmarks), jobs
define their own (``jobs/stream_ingest.py`` generates a graph and trains a model).

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> from strata.operators.layers import GraphSAGE
    >>> _ = torch.manual_seed(0)
    >>> g = CSRGraph.from_edges(np.array([0, 1]), np.array([1, 2]))
    >>> setup = StaticSetup(g, np.ones((3, 4), np.float32),
    ...                     StreamingModel.from_module(GraphSAGE(4, 8, 2)))
    >>> item = init_item(setup.load())
    >>> item["kind"], item["num_nodes"], item["f"].shape
    ('init', 3, (3, 4))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from strata.operators.streaming.items import INIT
from strata.operators.streaming.model import StreamingModel
from strata.storage import CSRGraph


@dataclass(frozen=True, slots=True, eq=False)
class InitData:
    """A streaming job's starting point.

    Attributes:
        graph: The starting topology.
        x: Node features, one row per node (``[num_nodes, in_dim]``).
        live: Which nodes have features (None: all).
        model: The model's layer rules.
    """

    graph: CSRGraph
    x: np.ndarray
    live: np.ndarray | None
    model: StreamingModel


@runtime_checkable
class Setup(Protocol):
    """Loads (or builds) the starting point; called once, in the source step."""

    def load(self) -> InitData:
        """Return the starting graph, features and model."""
        ...


@dataclass(frozen=True, slots=True, eq=False)
class StaticSetup:
    """A setup holding its arrays (pickled with the step definition)."""

    graph: CSRGraph
    x: np.ndarray
    model: StreamingModel
    live: np.ndarray | None = None

    def load(self) -> InitData:
        """Return the held arrays."""
        return InitData(self.graph, self.x, self.live, self.model)


def init_item(data: InitData) -> dict[str, Any]:
    """The ``init`` item of layer 1 (:mod:`strata.operators.streaming.items`)."""
    n = max(data.graph.num_nodes, data.x.shape[0])
    live = np.ones(data.x.shape[0], np.bool_) if data.live is None else data.live
    return {
        "kind": INIT,
        "model": data.model.to_arrays(),
        "indptr": data.graph.indptr,
        "indices": data.graph.indices,
        "num_nodes": n,
        "f": data.x,
        "live": np.asarray(live, dtype=np.bool_),
    }


def graph_of(item: dict[str, Any]) -> CSRGraph:
    """The starting graph of an ``init`` item."""
    indptr = np.asarray(item["indptr"], dtype=np.int64)
    return CSRGraph(
        indptr=indptr,
        indices=np.asarray(item["indices"]),
        num_nodes=indptr.shape[0] - 1,
    )
