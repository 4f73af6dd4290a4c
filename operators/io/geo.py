"""GeoStore steps: GNN training on features read from region servers, feature writes.

A :class:`~strata.storage.geo.store.GeoStore` is a ``FeatureStore`` whose rows live on
the region servers of a :class:`~strata.storage.geo.server.RegionCluster` (spec
``design/systems/geolayer.md`` §3.4). This module puts it into jobs:

* :func:`with_geo_features`: the same ``TrainingData`` with its node features read
  through a store (shape and dtype checked against the original).
* :class:`GeoFeatureTrainer`: a trainer step (any ``Trainer``, e.g.
  ``SampledTrainer``) whose features come from a store it opens from a picklable
  :class:`~strata.storage.geo.store.GeoStoreSpec`, in the step's own process; the run
  report's step counters then carry the reads' latency percentiles (unscaled ms),
  regions contacted and bytes, per origin (:func:`geo_counters`).
* :func:`fit_with_geo`: the same outside a pipeline (benchmarks, tests).
* :class:`GeoFeatureSink`: applies a stream's ``set_feature`` updates
  (:mod:`strata.storage.updates`) to every holder, synchronously (each batch returns
  once every holder acknowledged, retried on failure).

Examples:
    >>> from strata.storage.geo.store import GeoStats
    >>> counters = geo_counters(GeoStats(0, 2).summary(), ("USE", "USW"))
    >>> counters["geo_USE_reads"], counters["geo_USE_from_USW_items"]
    (0.0, 0.0)
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from strata.engine import Operator, StepContext
from strata.operators.errors import OperatorError
from strata.operators.trainers.base import Trainer
from strata.operators.trainers.data import FEATURES, TrainingData, as_training_data
from strata.operators.trainers.records import EpochRecord, TrainResult
from strata.storage.features.store import Key
from strata.storage.geo.store import (
    GeoStatsSummary,
    GeoStore,
    GeoStoreSpec,
    GeoWriteError,
)
from strata.storage.updates import UpdateKind, decode_updates

__all__ = [
    "GeoFeatureSink",
    "GeoFeatureTrainer",
    "GeoFit",
    "fit_with_geo",
    "geo_counters",
    "with_geo_features",
]


def with_geo_features(data: TrainingData, store: GeoStore) -> TrainingData:
    """``data`` with its node features read through ``store``.

    Raises:
        OperatorError: the store has no ``node/x``, or its shape or dtype differs
            from ``data``'s features.
    """
    where = f"with_geo_features({data.name})"
    theirs = store.schema().get(FEATURES)
    if theirs is None:
        raise OperatorError.build(
            "store", where, f"a GeoStore holding {FEATURES}", repr(store)
        )
    ours = data.features.schema().get(FEATURES)
    if ours is not None and (ours.shape, ours.dtype) != (theirs.shape, theirs.dtype):
        raise OperatorError.build(
            "store",
            where,
            f"{FEATURES} of shape {ours.shape} and {ours.dtype}",
            f"shape {theirs.shape} and {theirs.dtype}",
        )
    return dataclasses.replace(data, features=store)


def geo_counters(summary: GeoStatsSummary, regions: Sequence[str]) -> dict[str, float]:
    """Run-report counters of one store, keyed by its origin's name.

    Reads and writes apart (pitfall 11): ``geo_<origin>_read_p50_ms`` (p95, p99,
    mean), ``_reads``, ``_read_regions_mean``, ``_read_bytes_mean``,
    ``_failovers``, ``_writes``, ``_write_p99_ms``, and per serving region
    ``geo_<origin>_from_<region>_items``. Latencies are unscaled ms.
    """
    o = regions[summary.origin]
    reads, writes = summary.reads, summary.writes
    out = {
        f"geo_{o}_reads": float(reads.count),
        f"geo_{o}_read_p50_ms": reads.p50_ms,
        f"geo_{o}_read_p95_ms": reads.p95_ms,
        f"geo_{o}_read_p99_ms": reads.p99_ms,
        f"geo_{o}_read_mean_ms": reads.mean_ms,
        f"geo_{o}_read_regions_mean": reads.mean_regions,
        f"geo_{o}_read_bytes_mean": reads.mean_bytes,
        f"geo_{o}_failovers": float(summary.failovers),
        f"geo_{o}_writes": float(writes.count),
        f"geo_{o}_write_p99_ms": writes.p99_ms,
    }
    for region, items in enumerate(summary.items_by_region):
        out[f"geo_{o}_from_{regions[region]}_items"] = float(items)
    return out


def _count(ctx: StepContext | None, counters: dict[str, float]) -> None:
    if ctx is None:
        return
    for name, value in counters.items():
        ctx.metrics.counter(name).inc(value)


@dataclass(frozen=True, slots=True)
class GeoFit:
    """What :func:`fit_with_geo` returns: the run, its epochs, the store's reads."""

    result: TrainResult
    epochs: list[EpochRecord]
    geo: GeoStatsSummary
    wall_s: float


def fit_with_geo(trainer: Trainer, data: Any, spec: GeoStoreSpec) -> GeoFit:
    """Train ``trainer`` on ``data`` with features read through ``spec``'s store."""
    epochs: list[EpochRecord] = []
    data = as_training_data(data, "fit_with_geo", trainer.config.task.targets)
    with spec.open() as store:
        start = time.perf_counter()
        result = trainer.fit(with_geo_features(data, store), epochs.append)
        wall = time.perf_counter() - start
        return GeoFit(result, epochs, store.stats.summary(), wall)


class GeoFeatureTrainer(Operator[Any, Any]):
    """A trainer step reading its node features through a GeoStore.

    The store is opened in the step's process from ``spec`` (picklable: the
    cluster's endpoints, the origin region, the router) and closed after the run;
    the trainer's ports and emits pass through unchanged. The step's counters
    gain :func:`geo_counters` (per origin), so the run report shows the read
    latency percentiles and the regions contacted.

    Args:
        trainer: any single-process trainer (``SampledTrainer``, ...).
        spec: where and how to open the store.
    """

    ports = Trainer.ports

    def __init__(self, trainer: Trainer, spec: GeoStoreSpec) -> None:
        self.trainer = trainer
        self.spec = spec
        self.summary: GeoStatsSummary | None = None
        self._ctx: StepContext | None = None

    def open(self, ctx: StepContext) -> None:
        """Open the wrapped trainer on the same step."""
        self._ctx = ctx
        self.trainer.open(ctx)

    def process(self, item: Any) -> Iterator[Any]:
        """Train on ``item`` (what the trainer takes) with features from the store."""
        data = as_training_data(item, repr(self), self.trainer.config.task.targets)
        with self.spec.open() as store:
            yield from self.trainer.process(with_geo_features(data, store))
            self.summary = store.stats.summary()
        _count(self._ctx, geo_counters(self.summary, self.spec.info.layout.regions))

    def __repr__(self) -> str:
        name = self.spec.info.layout.regions[self.spec.origin]
        return f"GeoFeatureTrainer({self.trainer!r}, origin={name})"


class GeoFeatureSink(Operator[pa.RecordBatch, dict[str, Any]]):
    """Apply a stream's ``set_feature`` updates to every holder of the rows.

    Each update batch (:mod:`strata.storage.updates`) becomes one synchronous write
    of its ``set_feature`` rows (the last row per node wins, as if applied in
    order); other kinds are ignored. A write that is not acknowledged by every
    holder is retried (``retries`` times, ``backoff_s`` apart) and then fails the
    step: an acknowledged batch is on every holder, so a read after it sees it.

    Emits one ``{"rows", "latency_ms"}`` record per written batch; the step's
    counters gain :func:`geo_counters` at the end.
    """

    def __init__(
        self,
        spec: GeoStoreSpec,
        key: Key = FEATURES,
        *,
        retries: int = 3,
        backoff_s: float = 0.5,
    ) -> None:
        self.spec = spec
        self.key = key
        self.retries = int(retries)
        self.backoff_s = float(backoff_s)
        self.store: GeoStore | None = None
        self._ctx: StepContext | None = None

    def open(self, ctx: StepContext | None) -> None:
        """Connect to the cluster."""
        self._ctx = ctx
        self.store = self.spec.open()

    def process(self, item: pa.RecordBatch) -> Iterator[dict[str, Any]]:
        """Write ``item``'s ``set_feature`` rows; emit what it cost."""
        assert self.store is not None, "open() before process()"
        updates = decode_updates(item)
        rows = np.flatnonzero(updates.kind == UpdateKind.SET_FEATURE)
        if rows.size == 0:
            return
        nodes = updates.node[rows]
        # The last update of a node wins: keep each node's last row.
        _, last = np.unique(nodes[::-1], return_index=True)
        keep = rows[rows.size - 1 - last]
        ids, values = updates.node[keep], updates.feature[keep]
        dtype = self.store.schema()[self.key].dtype
        tensor_values = values.astype(str(dtype).removeprefix("torch."), copy=False)
        for attempt in range(self.retries + 1):
            try:
                stat = self.store.write(self.key, ids, tensor_values)
                break
            except GeoWriteError as error:
                if attempt == self.retries:
                    raise OperatorError.build(
                        "write",
                        "GeoFeatureSink",
                        "an acknowledgement from every holder",
                        str(error),
                        f"gave up after {self.retries + 1} attempts",
                    ) from error
                time.sleep(self.backoff_s)
        yield {"rows": int(ids.size), "latency_ms": stat.latency_ms}

    def finish(self) -> Iterator[dict[str, Any]]:
        """Close the store and count its writes."""
        if self.store is not None:
            summary = self.store.stats.summary()
            self.store.close()
            self.store = None
            _count(self._ctx, geo_counters(summary, self.spec.info.layout.regions))
        return iter(())
