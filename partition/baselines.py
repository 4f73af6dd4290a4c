"""Baselines: hash and random partitions, and the pymetis reference.

* :class:`HashPartitioner`: part = hash(vertex id, seed) mod k, what systems use
  when they do not partition at all (DGL's random partition). Balanced only in
  expectation: it does not promise the cap.
* :class:`RandomPartitioner`: a seeded random assignment with part sizes as equal
  as the vertex weights allow (round-robin over a random order), so it meets the
  cap for unit weights. The "no worse than random" bar of the property tests.
* ``MetisReference``: pymetis (METIS 5, k-way, ``recursive=False``) for tests and
  benchmarks, the :class:`~strata.partition.backends.PymetisPartitioner` of the
  optional ``metis`` extra, imported on first use.

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> src = np.arange(12); dst = (src + 1) % 12
    >>> g = CSRGraph.from_edges(src, dst)
    >>> RandomPartitioner(k=3, seed=1).partition(g).report.part_sizes
    (4, 4, 4)
    >>> HashPartitioner(k=3).partition(g).assignment.shape
    (12,)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from strata.partition._graph import (
    edge_cut_partition,
    fill_lightest,
    prepare,
)
from strata.partition._jit import njit
from strata.partition._params import check_settings
from strata.partition._types import Float64Array
from strata.partition.backends import PymetisPartitioner
from strata.partition.types import Partition
from strata.storage import CSRGraph
from strata.storage.generators.hashing import splitmix64

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True)
def hash_parts(num_nodes: int, k: int, seed: int) -> np.ndarray:
    """SplitMix64 hash of ``(vertex id, seed)`` modulo ``k`` for every vertex."""
    out = np.empty(num_nodes, dtype=np.int32)
    salt = np.uint64(seed) * _GOLDEN
    for v in range(num_nodes):
        z = splitmix64(np.uint64(v) + salt)
        out[v] = np.int32(z % np.uint64(k))
    return out


@dataclass(frozen=True, slots=True)
class HashPartitioner:
    """Part of ``v`` = ``hash(v, seed) mod k`` (no balance guarantee).

    Attributes:
        k: number of parts.
        seed: hash salt.
    """

    k: int
    seed: int = 0

    def __post_init__(self) -> None:
        check_settings("HashPartitioner", ints={"k": self.k, "seed": self.seed})

    def partition(
        self, graph: CSRGraph, *, node_weights: Float64Array | None = None
    ) -> Partition:
        """Hash every vertex to a part."""
        simple, wgraph = prepare(graph, self.k, node_weights, "HashPartitioner")
        start = time.perf_counter()
        where = hash_parts(wgraph.num_nodes, self.k, self.seed)
        return edge_cut_partition(
            method="hash",
            k=self.k,
            seed=self.seed,
            simple=simple,
            assignment=where,
            seconds=time.perf_counter() - start,
            phase_seconds={},
            config=self,
            node_weights=None if node_weights is None else wgraph.vwgt,
        )


@dataclass(frozen=True, slots=True)
class RandomPartitioner:
    """Seeded random assignment with equal part weights as far as possible.

    Attributes:
        k: number of parts.
        seed: random seed.
    """

    k: int
    seed: int = 0

    def __post_init__(self) -> None:
        check_settings("RandomPartitioner", ints={"k": self.k, "seed": self.seed})

    def partition(
        self, graph: CSRGraph, *, node_weights: Float64Array | None = None
    ) -> Partition:
        """Visit vertices in a random order, each to the currently lightest part."""
        simple, wgraph = prepare(graph, self.k, node_weights, "RandomPartitioner")
        start = time.perf_counter()
        n = wgraph.num_nodes
        order = np.random.default_rng(self.seed).permutation(n)
        if node_weights is None:
            where = np.empty(n, dtype=np.int32)
            where[order] = np.arange(n, dtype=np.int32) % self.k
        else:
            where = np.empty(n, dtype=np.int32)
            pw = np.zeros(self.k, dtype=np.int64)
            # heaviest first keeps the parts even; ties keep the random order
            weights = wgraph.vwgt[order]
            where[order] = fill_lightest(pw, weights)
        return edge_cut_partition(
            method="random",
            k=self.k,
            seed=self.seed,
            simple=simple,
            assignment=where,
            seconds=time.perf_counter() - start,
            phase_seconds={},
            config=self,
            node_weights=None if node_weights is None else wgraph.vwgt,
        )


#: pymetis k-way with Strata's conventions, under the name the tests and benchmarks
#: use (the engine itself lives in ``strata.partition.backends``).
MetisReference = PymetisPartitioner
