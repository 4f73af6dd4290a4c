"""The messages between a distributed run's parent and its workers.

* :class:`WorkerInputs` (parent to every worker): the settings, the sizes, the
  partition's facts and, for HongTu, the chunk plan's summary. The parent builds
  the run's arrays once, before the gang starts, and places them in one
  shared-memory segment (:class:`strata.engine.gang.SharedTensors`): features,
  labels, split masks, the partition book, the propagation graph and, for
  HongTu, the host store and the chunk plans. Workers map the segment, so
  nothing graph-sized is pickled per worker. Arrays are named
  ``"<group>.<name>"``; :meth:`WorkerInputs.arrays` returns one group as numpy
  views.
* :class:`PartitionSummary`, :class:`ChunkPlanSummary`: the plan facts the
  parent computed (the report's ``partition`` and ``plan`` sections).
* :class:`WorkerResult` (every worker to the parent): its counters, its engine's
  report and, from rank 0, the history, the result and the final weights.

Examples:
    >>> import numpy as np
    >>> from strata.engine.gang import SharedTensors
    >>> shared = SharedTensors.from_arrays(prefixed("book.", {"owner": np.zeros(3)}))
    >>> sorted(group(shared, "book."))
    ['owner']
    >>> shared.close()
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from strata.engine.gang import SharedTensors
from strata.operators.trainers.config import TrainConfig
from strata.operators.trainers.distributed.config import DistributedConfig
from strata.operators.trainers.distributed.modes import CachePolicy
from strata.operators.trainers.records import EpochRecord, TrainResult
from strata.partition import LoadMode


def prefixed(prefix: str, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``arrays`` with every name prefixed."""
    return {prefix + name: array for name, array in arrays.items()}


def group(shared: Mapping[str, Any], prefix: str) -> dict[str, np.ndarray]:
    """The arrays named ``prefix...`` (prefix removed), as numpy views."""
    return {
        name[len(prefix) :]: shared[name].numpy()
        for name in shared
        if name.startswith(prefix)
    }


@dataclass(frozen=True, slots=True)
class PartitionSummary:
    """The level-1 partition's facts (the report's ``partition`` section).

    Attributes:
        edge_cut: edges between parts.
        part_sizes: vertices per part.
        halo_sizes: halo vertices per part.
    """

    edge_cut: float
    part_sizes: tuple[int, ...]
    halo_sizes: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        """As JSON-able data (the report's keys)."""
        return {
            "edge_cut": self.edge_cut,
            "part_sizes": list(self.part_sizes),
            "halo_sizes": list(self.halo_sizes),
        }


@dataclass(frozen=True, slots=True)
class ChunkCandidate:
    """One chunk count HongTu's planner tried.

    Attributes:
        chunks: M.
        alpha: the expansion ``sum |S_c| / |V|`` at this M.
        peak_bytes: the largest modelled per-worker peak.
    """

    chunks: int
    alpha: float
    peak_bytes: int


@dataclass(frozen=True, slots=True)
class ChunkPlanSummary:
    """HongTu's plan as workers read it and the report shows it (``plan``).

    Attributes:
        chunks: M, chunks per worker.
        alpha: the expansion at M.
        device_budget: the budget it was planned for (None: none).
        modelled_peak_bytes: each worker's modelled peak.
        policies: each layer's recompute-or-cache policy.
        dedup: the load plan's reuse mode.
        host_rows: rows the forward plan loads from the host (per layer).
        peer_rows: rows it copies between workers.
        keep_rows: rows it keeps from the previous step.
        naive_host_rows: rows a plan without reuse would load.
        host_load: host rows per worker.
        candidates: every chunk count tried, in order.
    """

    chunks: int
    alpha: float
    device_budget: int | None
    modelled_peak_bytes: tuple[int, ...]
    policies: tuple[CachePolicy, ...]
    dedup: LoadMode
    host_rows: int
    peer_rows: int
    keep_rows: int
    naive_host_rows: int
    host_load: tuple[int, ...]
    candidates: tuple[ChunkCandidate, ...]

    def to_dict(self) -> dict[str, Any]:
        """As JSON-able data (the report's keys)."""
        return {
            "chunks": self.chunks,
            "alpha": self.alpha,
            "device_budget": self.device_budget,
            "modelled_peak_bytes": list(self.modelled_peak_bytes),
            "policies": [p.value for p in self.policies],
            "dedup": self.dedup.value,
            "host_rows": self.host_rows,
            "peer_rows": self.peer_rows,
            "keep_rows": self.keep_rows,
            "naive_host_rows": self.naive_host_rows,
            "host_load": list(self.host_load),
            "candidates": [
                {"chunks": c.chunks, "alpha": c.alpha, "peak_bytes": c.peak_bytes}
                for c in self.candidates
            ],
        }


@dataclass(frozen=True, slots=True)
class WorkerInputs:
    """The run as a worker sees it (small; the arrays are in ``shared``).

    Attributes:
        shared: the run's shared segment (features ``x``, labels ``y``, masks
            ``mask.<split>``, ``book.*``, ``prop.*``, HongTu's store and plans).
        config: model, optimiser, epochs, seed.
        dist: the distributed settings (``dist.mode`` selects the engine).
        num_nodes: vertices of the graph.
        num_features: input width.
        num_classes: output width.
        split_nodes: global node count per split (``train``, ``val``, ``test``).
        partition: the level-1 partition's facts.
        plan: HongTu's chunk plan (None in the other modes).
    """

    shared: SharedTensors
    config: TrainConfig
    dist: DistributedConfig
    num_nodes: int
    num_features: int
    num_classes: int
    split_nodes: dict[str, int]
    partition: PartitionSummary
    plan: ChunkPlanSummary | None = None

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """One group of shared arrays as numpy views (see :func:`group`)."""
        return group(self.shared, prefix)


@dataclass(frozen=True, slots=True)
class WorkerResult:
    """What one rank returns to the parent.

    Attributes:
        rank: the rank.
        counters: its transfer counters as JSON-able data (``epochs``: per
            epoch ``{"<phase>.<name>": total}``; ``layers``: per epoch
            ``{"<phase>.l<layer>.<name>": total}``).
        report: its engine's JSON-able facts (part and halo sizes, peaks).
        history: per epoch, the record (rank 0 only; empty elsewhere).
        result: the run's result (rank 0 only).
        state: the final weights, on the CPU (rank 0 only).
    """

    rank: int
    counters: dict[str, Any]
    report: dict[str, Any]
    history: tuple[EpochRecord, ...] = ()
    result: TrainResult | None = None
    state: dict[str, torch.Tensor] | None = field(default=None, repr=False)
