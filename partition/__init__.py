"""Graph partitioners, their metrics, two-level chunking and the PartitionBook.

Multilevel k-way (METIS-style), GREM, streaming LDG/Fennel, HDRF vertex-cut.

A plain library: it imports ``storage`` (for :class:`~storage.CSRGraph`), numpy and
numba only, and does no I/O. Every partitioner is a frozen config with
``partition(graph) -> Partition``; metrics are defined in :mod:`partition.metrics`.

Examples:
    >>> import numpy as np
    >>> from storage import CSRGraph
    >>> from partition import MultilevelPartitioner
    >>> src = np.arange(64); ring = CSRGraph.from_edges(src, (src + 1) % 64)
    >>> MultilevelPartitioner(k=4).partition(ring).report.edge_cut
    4.0
"""

from partition.baselines import HashPartitioner, MetisReference, RandomPartitioner
from partition.errors import PartitionError
from partition.metrics import (
    as_undirected_simple,
    balance,
    balance_cap,
    edge_balance,
    edge_cut,
    halo_sizes,
    replication_factor,
)
from partition.multilevel import MultilevelPartitioner
from partition.refine import GreedyKWayRefiner
from partition.streaming import FennelPartitioner, LDGPartitioner, StreamOrder
from partition.types import CutKind, Partition, Partitioner, PartitionReport

__all__ = [
    "CutKind",
    "FennelPartitioner",
    "GreedyKWayRefiner",
    "HashPartitioner",
    "LDGPartitioner",
    "MetisReference",
    "MultilevelPartitioner",
    "Partition",
    "PartitionError",
    "PartitionReport",
    "Partitioner",
    "RandomPartitioner",
    "StreamOrder",
    "as_undirected_simple",
    "balance",
    "balance_cap",
    "edge_balance",
    "edge_cut",
    "halo_sizes",
    "replication_factor",
]
