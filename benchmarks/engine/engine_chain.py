"""The benchmark's three steps: generate, clean, aggregate Arrow batches of edges.

Per-batch work is chosen to look like a real edge-ingest stage, not an identity
function (an identity chain would measure nothing but the engine's per-item cost):

* ``Generate`` (source): a seeded batch of ``rows`` weighted edges
  (``src``, ``dst`` int64, ``weight`` float32; 1.3 MB per 64k rows), numpy RNG;
  about 1 ms per batch;
* ``Clean``: drop self loops, sort by destination (CSR order), log-scale the weights
  (pyarrow.compute filter, sort_indices, take, log1p); about 8 ms;
* ``Aggregate``: weighted in-degree of each destination (``np.add.reduceat`` over the
  sorted runs) and a per-bucket weight histogram (``np.bincount``), accumulated over
  the stream; about 2 ms; emits one small array at the end.

The steps are deliberately uneven, as real stages are: a pipelined executor can hide
the cheap stages behind the expensive one, but not below it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from strata.engine import Operator, StepContext

BUCKETS = 4096


class Generate(Operator[None, pa.RecordBatch]):
    def __init__(self, batches: int, rows: int, num_nodes: int = 1 << 20) -> None:
        self.batches = batches
        self.rows = rows
        self.num_nodes = num_nodes

    def finish(self) -> Iterator[pa.RecordBatch]:
        for index in range(self.batches):
            rng = np.random.default_rng([7, index])
            yield pa.record_batch(
                {
                    "src": rng.integers(0, self.num_nodes, self.rows),
                    "dst": rng.integers(0, self.num_nodes, self.rows),
                    "weight": rng.random(self.rows, dtype=np.float32),
                }
            )


class Clean(Operator[pa.RecordBatch, pa.RecordBatch]):
    def process(self, item: pa.RecordBatch) -> Iterable[pa.RecordBatch]:
        kept = item.filter(pc.not_equal(item.column("src"), item.column("dst")))
        kept = kept.take(pc.sort_indices(kept, sort_keys=[("dst", "ascending")]))
        weight = pc.multiply(pc.log1p(kept.column("weight")), 2.0)
        yield pa.record_batch(
            [kept.column("src"), kept.column("dst"), weight],
            names=["src", "dst", "weight"],
        )


class Aggregate(Operator[pa.RecordBatch, np.ndarray]):
    def open(self, ctx: StepContext) -> None:
        self.histogram = np.zeros(BUCKETS)
        self.heaviest = 0.0

    def process(self, item: pa.RecordBatch) -> Iterable[np.ndarray]:
        dst = item.column("dst").to_numpy()
        weight = item.column("weight").to_numpy()
        if len(dst):
            runs = np.flatnonzero(np.r_[True, dst[1:] != dst[:-1]])
            in_weight = np.add.reduceat(weight, runs)  # per destination in the batch
            self.heaviest = max(self.heaviest, float(in_weight.max()))
        self.histogram += np.bincount(
            dst & (BUCKETS - 1), weights=weight, minlength=BUCKETS
        )
        return ()

    def finish(self) -> Iterator[np.ndarray]:
        yield np.r_[self.histogram, self.heaviest]


def plain_chain(batches: int, rows: int) -> np.ndarray:
    """The same three steps as plain generators, on one thread: the baseline."""
    clean = Clean()
    aggregate = Aggregate()
    aggregate.open(StepContext("aggregate"))
    source = Generate(batches, rows).finish()
    cleaned = (out for batch in source for out in clean.process(batch))
    for batch in cleaned:
        for _ in aggregate.process(batch):
            pass
    (total,) = aggregate.finish()
    return total
