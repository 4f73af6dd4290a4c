"""Graph partitioners, their metrics, two-level chunking and the PartitionBook.

Multilevel k-way (METIS-style), GREM, streaming LDG/Fennel, HDRF vertex-cut, and the
optional external engines pymetis and KaHIP (:mod:`strata.partition.backends`);
:func:`resolve` picks one by name (:mod:`strata.partition.methods`).

A plain library: it imports ``storage`` (for :class:`~strata.storage.CSRGraph`), numpy
and numba only, and does no I/O. Every partitioner is a frozen config with
``partition(graph) -> Partition``; metrics are defined in
:mod:`strata.partition.metrics`.

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> from strata.partition import MultilevelPartitioner
    >>> src = np.arange(64); ring = CSRGraph.from_edges(src, (src + 1) % 64)
    >>> MultilevelPartitioner(k=4).partition(ring).report.edge_cut
    4.0
"""

from strata.partition.backends import (
    KahipMode,
    KahipPartitioner,
    PymetisPartitioner,
    backend_available,
)
from strata.partition.baselines import (
    HashPartitioner,
    MetisReference,
    RandomPartitioner,
)
from strata.partition.book import PartitionBook, build_book
from strata.partition.chunk_order import order_chunks
from strata.partition.chunking import (
    ChunkConfig,
    ChunkMethod,
    ChunkOrdering,
    ChunkSchedule,
    split_chunks,
)
from strata.partition.errors import PartitionError, PartitionKeyError
from strata.partition.grem import (
    ArrayEdgeChunks,
    EdgeChunks,
    GremPartitioner,
    ScoreDType,
)
from strata.partition.hdrf import EdgeOrder, HDRFPartitioner, HDRFState
from strata.partition.load_plan import LoadMode, LoadPlan, plan_loads
from strata.partition.methods import METHODS, resolve
from strata.partition.metrics import (
    as_undirected_simple,
    balance,
    balance_cap,
    edge_balance,
    edge_cut,
    halo_sizes,
    replication_factor,
)
from strata.partition.multilevel import MultilevelPartitioner
from strata.partition.refine import GreedyKWayRefiner
from strata.partition.streaming import FennelPartitioner, LDGPartitioner, StreamOrder
from strata.partition.types import CutKind, Partition, Partitioner, PartitionReport

__all__ = [
    "METHODS",
    "ArrayEdgeChunks",
    "ChunkConfig",
    "ChunkMethod",
    "ChunkOrdering",
    "ChunkSchedule",
    "CutKind",
    "EdgeChunks",
    "EdgeOrder",
    "FennelPartitioner",
    "GreedyKWayRefiner",
    "GremPartitioner",
    "HDRFPartitioner",
    "HDRFState",
    "HashPartitioner",
    "KahipMode",
    "KahipPartitioner",
    "LDGPartitioner",
    "LoadMode",
    "LoadPlan",
    "MetisReference",
    "MultilevelPartitioner",
    "Partition",
    "PartitionBook",
    "PartitionError",
    "PartitionKeyError",
    "PartitionReport",
    "Partitioner",
    "PymetisPartitioner",
    "RandomPartitioner",
    "ScoreDType",
    "StreamOrder",
    "as_undirected_simple",
    "backend_available",
    "balance",
    "balance_cap",
    "build_book",
    "edge_balance",
    "edge_cut",
    "halo_sizes",
    "order_chunks",
    "plan_loads",
    "replication_factor",
    "resolve",
    "split_chunks",
]
