"""Counting the remote rows one worker of a gang reads, without a gang.

The counter figures of ``systems/rapidgnn.md`` (§4.1, R1-R3) need exact counts,
not timings: one worker ``rank`` of ``k`` is simulated in one process, the other
owners served by :class:`~strata.storage.features.traffic.InProcessOwners` (same
contract and counting rule as the network client). It runs the code the gang
trainer runs: the epoch schedule of global batches
(:mod:`strata.operators.samplers.schedule`), the cache of
:mod:`.cache` and the :class:`~.rows.RowRouter`; each epoch's cache fill is
counted in that epoch (for epoch ``e >= 1`` the fill a trainer runs during
epoch ``e - 1``; epoch 0's is setup).

Per epoch it also counts two baselines: **on-demand** fetching (no cache: every
remote access a row, one request per owner per batch) and a **per-vertex**
request baseline (one request per remote row).

Examples:
    >>> import numpy as np
    >>> from strata.storage.generators.sbm import sbm
    >>> graph, blocks = sbm(400, 4, avg_degree=8, seed=0)
    >>> owner = blocks.astype(np.int32)
    >>> x = np.ones((400, 4), dtype=np.float32)
    >>> train = np.arange(0, 400, 3)
    >>> [e0, e1] = simulate(graph, owner, 0, train, (5, 5), 40, 0, 2, x,
    ...                     "frequency", 0.5)
    >>> e1.rows.remote_accesses == e1.on_demand.rows, e1.rows.hit_rate > 0
    (True, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from strata.operators.samplers.neighbor import NeighborSampler, SamplerConfig
from strata.operators.samplers.schedule import (
    EpochSchedule,
    balanced_train_ids,
    build_schedule,
    global_batches,
    rank_batches,
)
from strata.operators.trainers.sampled.cache import CachePolicy, make_cache
from strata.operators.trainers.sampled.rows import RowCounters, RowRouter
from strata.storage import CSRGraph
from strata.storage.features.traffic import InProcessOwners, Traffic, payload_bytes

__all__ = ["EpochCounters", "on_demand", "rank_schedules", "replay", "simulate"]

_ATTR = "x"


@dataclass(frozen=True, slots=True)
class EpochCounters:
    """One simulated epoch of one worker.

    Attributes:
        epoch: the epoch.
        policy: the cache policy's name.
        capacity: cache rows.
        rows: the router's counters (fill included).
        on_demand: what fetching every remote row on demand would move.
        per_vertex_requests: requests if every remote row were its own request.
        num_batches: steps of the epoch.
        distinct_remote: ``R``.
        schedule_s: seconds of the schedule pass.
        schedule_bytes: bytes held by the schedule.
    """

    epoch: int
    policy: str
    capacity: int
    rows: RowCounters
    on_demand: Traffic
    per_vertex_requests: int
    num_batches: int
    distinct_remote: int
    schedule_s: float
    schedule_bytes: int

    def as_dict(self) -> dict[str, Any]:
        """Flat counters for a report."""
        out: dict[str, Any] = {
            "epoch": self.epoch,
            "policy": self.policy,
            "capacity": self.capacity,
            "num_batches": self.num_batches,
            "distinct_remote": self.distinct_remote,
            "per_vertex_requests": self.per_vertex_requests,
            "schedule_s": self.schedule_s,
            "schedule_bytes": self.schedule_bytes,
        }
        out.update(self.rows.as_dict())
        out.update(self.on_demand.as_dict("on_demand"))
        return out


def on_demand(schedule: EpochSchedule, owner: np.ndarray, row_bytes: int) -> Traffic:
    """Traffic of fetching every remote access, one request per owner per batch."""
    ids = schedule.remote_ids
    batch = np.repeat(
        np.arange(schedule.num_batches, dtype=np.int64),
        np.diff(schedule.remote_offsets),
    )
    parts = int(owner.max()) + 1 if owner.size else 1
    requests = np.unique(batch * parts + owner[ids]).size
    return Traffic(ids.size, payload_bytes(ids.size, row_bytes), int(requests))


def rank_schedules(
    graph: CSRGraph,
    owner: np.ndarray,
    rank: int,
    train_ids: np.ndarray,
    fanouts: Sequence[int],
    batch_size: int,
    seed: int,
    epochs: int,
) -> list[EpochSchedule]:
    """Schedules (inputs kept) of ``rank`` for epochs ``0 .. epochs - 1``.

    ``batch_size`` is the *global* batch; the workers are the parts of ``owner``.
    """
    workers = int(owner.max()) + 1
    split = balanced_train_ids(owner, train_ids, workers)
    sampler = NeighborSampler(graph, SamplerConfig(tuple(fanouts)), seed=seed)
    out = []
    for epoch in range(epochs):
        batches = global_batches(train_ids, seed, epoch, batch_size)
        mine = rank_batches(batches, split.rank_of, rank)
        out.append(build_schedule(sampler, mine, owner, rank, epoch, keep_inputs=True))
    return out


def replay(
    schedules: Sequence[EpochSchedule],
    owner: np.ndarray,
    rank: int,
    features: np.ndarray,
    policy: CachePolicy | str,
    capacity: int | float,
    *,
    degree: np.ndarray | None = None,
    min_count: int = 2,
    keep_held: bool = False,
) -> list[EpochCounters]:
    """Run the router and a ``policy`` cache over precomputed schedules.

    ``degree`` (out-degree per vertex) is needed by the degree policy;
    ``min_count`` and ``keep_held`` are the frequency cache's
    (:class:`~.cache.FrequencyCache`).
    """
    fetcher = InProcessOwners({_ATTR: features}, owner)
    cache = make_cache(
        policy,
        capacity,
        attr=_ATTR,
        owner=owner,
        rank=rank,
        row_shape=features.shape[1:],
        dtype=features.dtype,
        degree=degree,
        min_count=min_count,
        keep_held=keep_held,
    )
    router = RowRouter(_ATTR, owner, rank, features[owner == rank], fetcher, cache)
    out = []
    for schedule in schedules:
        router.reset()
        cache.fill_pending(schedule, fetcher)
        cache.swap()
        for b in range(schedule.num_batches):
            router.gather(b, schedule.inputs(b))
        out.append(
            EpochCounters(
                epoch=schedule.epoch,
                policy=cache.policy.value,
                capacity=cache.capacity or 0,
                rows=router.snapshot(schedule),
                on_demand=on_demand(schedule, owner, cache.row_bytes),
                per_vertex_requests=schedule.remote_accesses,
                num_batches=schedule.num_batches,
                distinct_remote=schedule.distinct_remote,
                schedule_s=schedule.schedule_s,
                schedule_bytes=schedule.nbytes,
            )
        )
    return out


def simulate(
    graph: CSRGraph,
    owner: np.ndarray,
    rank: int,
    train_ids: np.ndarray,
    fanouts: Sequence[int],
    batch_size: int,
    seed: int,
    epochs: int,
    features: np.ndarray,
    policy: CachePolicy | str,
    capacity: int | float,
    *,
    min_count: int = 2,
) -> list[EpochCounters]:
    """Counters of worker ``rank`` of ``owner.max() + 1`` over ``epochs`` epochs.

    Args:
        graph: the graph (sampled along in-edges).
        owner: int array ``[num_nodes]``, the part (= worker) of every vertex.
        rank: the simulated worker.
        train_ids: all training vertices (balanced over the workers).
        fanouts: sampler fan-outs in layer order.
        batch_size: the global batch size.
        seed: the run's seed.
        epochs: epochs to simulate.
        features: the full feature table (row ``v`` is vertex ``v``).
        policy: cache policy.
        capacity: cache rows, or a fraction of epoch 0's distinct remote ids.
        min_count: the frequency cache's minimum epoch count.
    """
    owner = np.asarray(owner)
    schedules = rank_schedules(
        graph, owner, rank, train_ids, fanouts, batch_size, seed, epochs
    )
    degree = np.diff(graph.indptr)  # out-degree: how many dsts can draw a vertex
    return replay(
        schedules,
        owner,
        rank,
        features,
        policy,
        capacity,
        degree=degree,
        min_count=min_count,
    )
