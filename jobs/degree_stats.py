"""Degree statistics of a synthetic power-law graph, streamed in Arrow batches.

The quick start's main job (``make run``). A seeded R-MAT generator streams the edge
list in Arrow record batches; each batch becomes its edges' endpoints (``node``,
``direction``), which a keyed streaming step, sharded by node id, counts into per-node
in- and out-degrees; a batch step then summarises the degree distribution (count,
mean, percentiles, log2 histogram, top-10 nodes) as the job's outputs::

    edges (source) -> endpoints -> degrees (x shards, keyed by node) -> summary

    strata run jobs/degree_stats.py --set num_edges=1000000 --executor process
    strata run jobs/degree_stats.py --help     # every parameter, type and default

R-MAT (Chakrabarti, Zhan, Faloutsos, "R-MAT: A Recursive Model for Graph Mining",
SDM 2004) places each edge by descending ``scale`` levels of the adjacency matrix,
choosing a quadrant with probabilities ``(a, b, c, d)`` (Graph500's 0.57, 0.19, 0.19,
0.05), which yields a skewed, power-law-like degree distribution. Node ids above
``num_nodes - 1`` (when it is not a power of two) wrap around modulo ``num_nodes``.
Batch ``i`` draws from ``default_rng([seed, i])``, so the edge list is the same on
every executor and for every shard count.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from strata.engine import Map, Operator, Pipeline, StepContext, at_least

RMAT_PROBABILITIES = (0.57, 0.19, 0.19, 0.05)
TOP = 10


def rmat_batch(rows: int, num_nodes: int, seed: int, index: int) -> pa.RecordBatch:
    """Return batch ``index`` of the edge list: ``rows`` R-MAT edges (src, dst)."""
    a, b, c, _ = RMAT_PROBABILITIES
    rng = np.random.default_rng([seed, index])
    scale = max(1, int(np.ceil(np.log2(num_nodes))))
    r = rng.random((scale, rows), dtype=np.float32)
    # Quadrant per level: 0 = a (0, 0), 1 = b (0, 1), 2 = c (1, 0), 3 = d (1, 1);
    # its high bit is the level's source bit, its low bit the destination bit.
    quadrant = (r >= a).view(np.uint8) + (r >= a + b).view(np.uint8)
    quadrant += (r >= a + b + c).view(np.uint8)
    src = _from_bits(quadrant >> 1)
    dst = _from_bits(quadrant & 1)
    return pa.record_batch({"src": src % num_nodes, "dst": dst % num_nodes})


def _from_bits(bits: np.ndarray) -> np.ndarray:
    """Integers from per-level bits: row ``level`` of ``bits`` is bit ``level``."""
    packed = np.packbits(bits, axis=0, bitorder="little")  # 8 levels per byte
    value = np.zeros(bits.shape[1], dtype=np.int64)
    for byte, row in enumerate(packed):
        value |= row.astype(np.int64) << (8 * byte)
    return value


def edge_batches(
    num_edges: int, num_nodes: int, seed: int, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """Yield the whole edge list, batch by batch (the source's output)."""
    for index, start in enumerate(range(0, num_edges, batch_rows)):
        yield rmat_batch(min(batch_rows, num_edges - start), num_nodes, seed, index)


class EdgeSource(Operator[None, pa.RecordBatch]):
    """Streams the seeded R-MAT edge list; lazily, so backpressure paces it."""

    def __init__(
        self, num_edges: int, num_nodes: int, seed: int, batch_rows: int
    ) -> None:
        self.num_edges = num_edges
        self.num_nodes = num_nodes
        self.seed = seed
        self.batch_rows = batch_rows

    def finish(self) -> Iterator[pa.RecordBatch]:
        yield from edge_batches(
            self.num_edges, self.num_nodes, self.seed, self.batch_rows
        )


def endpoints(edges: pa.RecordBatch) -> pa.RecordBatch:
    """Both ends of every edge: (node, direction) with 0 = out (src), 1 = in (dst)."""
    src = edges.column("src").to_numpy()
    dst = edges.column("dst").to_numpy()
    direction = np.repeat(np.array([0, 1], dtype=np.int8), [len(src), len(dst)])
    return pa.record_batch({"node": np.concatenate([src, dst]), "direction": direction})


class DegreeCounter(Operator[pa.RecordBatch, pa.RecordBatch]):
    """Per-node in- and out-degrees of the nodes routed to this shard.

    Emits one batch at the end: ``node``, ``in_degree``, ``out_degree`` for each node
    of the shard with at least one edge.
    """

    def __init__(self, num_nodes: int) -> None:
        self.num_nodes = num_nodes

    def open(self, ctx: StepContext) -> None:
        self.ctx = ctx
        self.degrees = np.zeros((2, self.num_nodes), dtype=np.int64)  # out, in

    def process(self, item: pa.RecordBatch) -> Iterable[pa.RecordBatch]:
        node = item.column("node").to_numpy()
        incoming = item.column("direction").to_numpy().astype(bool)
        self.degrees[0] += np.bincount(node[~incoming], minlength=self.num_nodes)
        self.degrees[1] += np.bincount(node[incoming], minlength=self.num_nodes)
        self.ctx.metrics.counter("endpoints").inc(len(node))
        return ()

    def finish(self) -> Iterator[pa.RecordBatch]:
        nodes = np.flatnonzero(self.degrees.sum(axis=0))
        yield pa.record_batch(
            {
                "node": nodes,
                "in_degree": self.degrees[1, nodes],
                "out_degree": self.degrees[0, nodes],
            }
        )


def summarize(degrees: list[pa.RecordBatch], num_nodes: int) -> dict[str, Any]:
    """The degree distribution over all ``num_nodes`` nodes (isolated ones too)."""
    in_degree = np.zeros(num_nodes, dtype=np.int64)
    out_degree = np.zeros(num_nodes, dtype=np.int64)
    for batch in degrees:
        nodes = batch.column("node").to_numpy()
        in_degree[nodes] = batch.column("in_degree").to_numpy()
        out_degree[nodes] = batch.column("out_degree").to_numpy()
    degree = in_degree + out_degree
    # Top nodes by degree, ties broken by the smaller id (lexsort: last key first).
    top = np.lexsort((np.arange(num_nodes), -degree))[:TOP]
    percentiles = np.percentile(degree, [50, 90, 99, 99.9], method="lower")
    return {
        "num_nodes": num_nodes,
        "num_edges": int(out_degree.sum()),
        "isolated_nodes": int(np.count_nonzero(degree == 0)),
        "degree_mean": round(float(degree.mean()), 6),
        "degree_p50": int(percentiles[0]),
        "degree_p90": int(percentiles[1]),
        "degree_p99": int(percentiles[2]),
        "degree_p999": int(percentiles[3]),
        "degree_max": int(degree.max(initial=0)),
        "in_degree_max": int(in_degree.max(initial=0)),
        "out_degree_max": int(out_degree.max(initial=0)),
        "degree_log2_histogram": log2_histogram(degree),
        "top_nodes": top.tolist(),
        "top_degrees": degree[top].tolist(),
    }


def log2_histogram(degree: np.ndarray) -> list[int]:
    """Counts of degree 0, 1, 2-3, 4-7, 8-15, ... (bin k >= 1 holds [2^(k-1), 2^k))."""
    bins = np.zeros(len(degree), dtype=np.int64)
    positive = degree > 0
    bins[positive] = np.floor(np.log2(degree[positive])).astype(np.int64) + 1
    return [int(count) for count in np.bincount(bins)]


@dataclass(frozen=True, slots=True)
class DegreeStatsConfig:
    """The job's parameters (checked when set: counts >= 1, seed >= 0).

    Attributes:
        num_edges: edges of the R-MAT graph.
        num_nodes: its nodes (ids above ``num_nodes - 1`` wrap around).
        seed: seeds the edge list (batch ``i`` draws from ``default_rng([seed, i])``).
        batch_rows: edges per Arrow record batch.
        shards: shards of the degree-counting step (keyed by node).
    """

    num_edges: int = 4_000_000
    num_nodes: int = 1 << 20
    seed: int = 0
    batch_rows: int = 65_536
    shards: int = 2

    def __post_init__(self) -> None:
        where = "DegreeStatsConfig"
        at_least(
            where,
            1,
            num_edges=self.num_edges,
            num_nodes=self.num_nodes,
            batch_rows=self.batch_rows,
            shards=self.shards,
        )
        at_least(where, 0, seed=self.seed)


def build(config: DegreeStatsConfig) -> Pipeline:
    """Degree statistics of the configured R-MAT graph (module docs)."""
    c = config
    p = Pipeline("degree-stats")
    p.step("edges", EdgeSource(c.num_edges, c.num_nodes, c.seed, c.batch_rows))
    p.step("endpoints", Map(endpoints), "edges")
    p.step(
        "degrees", DegreeCounter(c.num_nodes), "endpoints", shards=c.shards, key="node"
    )
    p.step("summary", summarize, "degrees", num_nodes=c.num_nodes)
    p.record("summary")
    return p


def render(outputs: dict[str, Any]) -> str:
    """The summary ``strata run`` prints."""
    histogram = outputs["degree_log2_histogram"]
    labels = ["0", "1"] + [
        f"{1 << (k - 1)}-{(1 << k) - 1}" for k in range(2, len(histogram))
    ]
    lines = [
        f"degree distribution of {outputs['num_nodes']:,} nodes, "
        f"{outputs['num_edges']:,} edges (degree = in + out)",
        f"  isolated {outputs['isolated_nodes']:,}   "
        f"mean {outputs['degree_mean']:.3f}   "
        f"p50 {outputs['degree_p50']}   p90 {outputs['degree_p90']}   "
        f"p99 {outputs['degree_p99']}   p99.9 {outputs['degree_p999']}   "
        f"max {outputs['degree_max']:,} (in {outputs['in_degree_max']:,}, "
        f"out {outputs['out_degree_max']:,})",
        "  log2 histogram:",
    ]
    peak = max(histogram) or 1
    for label, count in zip(labels, histogram, strict=True):
        bar = "#" * max(1 if count else 0, round(40 * count / peak))
        lines.append(f"    {label:>13}  {count:>9,}  {bar}")
    lines.append(f"  top {len(outputs['top_nodes'])} nodes:")
    for rank, (node, degree) in enumerate(
        zip(outputs["top_nodes"], outputs["top_degrees"], strict=True), start=1
    ):
        lines.append(f"    {rank:>2}. node {node:>9}  degree {degree:>8,}")
    return "\n".join(lines)
