"""Settings of sampled training on a gang: :class:`SampledGangConfig`.

One frozen config says how many trainer workers run (``workers``), whether sampler
workers run apart from them (``samplers``, Armada; 0 samples on the trainers,
RapidGNN's colocated mode), how the graph is split between them, the remote-row
cache (``cache`` rows or fraction, ``cache_policy``), the prefetcher's byte limit,
the network model the feature servers apply, and the gang's device and timeouts.

Examples:
    >>> network = NetworkConfig(latency_s=2e-3, bandwidth_Bps=1e9)
    >>> config = SampledGangConfig(workers=2, cache=0.5, network=network)
    >>> config.colocated, config.cache_rows(distinct_remote=1000)
    (True, 500)
    >>> SampledGangConfig(cache_policy="lru")
    Traceback (most recent call last):
    ...
    strata.operators.errors.OperatorError: cache_policy in SampledGangConfig: \
expected one of ['frequency', 'degree', 'belady', 'none'], got 'lru'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from strata.operators.errors import OperatorError
from strata.storage.features.network import NetworkModel

__all__ = ["CachePolicyName", "NetworkConfig", "PartitionerName", "SampledGangConfig"]

CachePolicyName = Literal["frequency", "degree", "belady", "none"]
PartitionerName = Literal["auto", "grem", "multilevel", "random"]
_POLICIES = ("frequency", "degree", "belady", "none")
_PARTITIONERS = ("auto", "grem", "multilevel", "random")


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    """The network the feature servers behave like (``NetworkModel``).

    Each reply waits ``latency_s + bytes / bandwidth_Bps`` before it is sent, so
    one machine behaves like a cluster in benchmarks. The defaults (0, 0) add no
    delay (``bandwidth_Bps=0`` means unlimited).

    Attributes:
        latency_s: one-way delay of every reply, in seconds.
        bandwidth_Bps: bytes per second of a reply's payload (0: unlimited).
    """

    latency_s: float = 0.0
    bandwidth_Bps: float = 0.0

    def __post_init__(self) -> None:
        for name in ("latency_s", "bandwidth_Bps"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise OperatorError.build(
                    name, "NetworkConfig", "a finite number >= 0", repr(value)
                )

    @property
    def active(self) -> bool:
        """Whether the model delays anything."""
        return self.latency_s > 0 or self.bandwidth_Bps > 0

    def model(self) -> NetworkModel | None:
        """The feature servers' :class:`NetworkModel` (None: no delay)."""
        if not self.active:
            return None
        return NetworkModel(self.latency_s, self.bandwidth_Bps or math.inf)


@dataclass(frozen=True, slots=True)
class SampledGangConfig:
    """How sampled training spreads over workers.

    Attributes:
        workers: trainer workers (one per device; CPU processes without GPUs).
            Each owns one part of the graph: its feature rows and labels, served
            to the others by a feature server, and its share of the training
            vertices (balanced: every rank runs the same number of steps).
        samplers: sampler workers (Armada): 0 samples on the trainers; M > 0
            starts M processes that hold the graph structure and stream sampled
            blocks to the trainers, which then hold features and the model only.
        partitioner: how the graph is split into ``workers`` parts: ``auto``
            (GREM with samplers, the multilevel METIS-style partitioner
            without), ``grem``, ``multilevel`` or ``random``.
        cache: the remote-row cache per trainer: a fraction of the epoch's
            distinct remote rows (0 < cache <= 1; 1 holds them all), a row count
            (an integer > 1), or 0 for none.
        cache_policy: which rows the cache holds: ``frequency`` (the most used
            remote rows of the epoch's schedule, RapidGNN), ``degree`` (the
            highest in-degree remote vertices, static), ``belady`` (offline
            optimal eviction over the schedule, an upper bound) or ``none``.
        prefetch_bytes: most bytes of prepared batches waiting for the trainer.
        keep_blocks_bytes: bytes of sampled blocks the epoch's schedule pass
            keeps for the prefetcher (colocated ranks with a frequency or
            Belady cache), so those batches are not sampled twice; 0 samples
            every batch again (the spec's default).
        network: the network model of the feature servers.
        fetch_timeout_s: how long a feature request may wait for its server; a
            dead server fails the run after this long, naming it.
        device: ``cpu``, ``cuda`` or ``auto`` (NCCL on GPUs, gloo on CPUs).
        threads_per_worker: torch threads per process (None: cores / processes).
        timeout_s: wall-clock limit of the whole gang (None: none).
        collective_timeout_s: limit of one collective (a dead peer's rank fails).
    """

    workers: int = 1
    samplers: int = 0
    partitioner: PartitionerName = "auto"
    cache: float = 0.0
    cache_policy: CachePolicyName = "frequency"
    prefetch_bytes: int = 256 << 20
    keep_blocks_bytes: int = 256 << 20
    network: NetworkConfig = field(default_factory=NetworkConfig)
    fetch_timeout_s: float = 30.0
    device: Literal["cpu", "cuda", "auto"] = "auto"
    threads_per_worker: int | None = None
    timeout_s: float | None = None
    collective_timeout_s: float = 300.0

    def __post_init__(self) -> None:
        where = "SampledGangConfig"
        if not isinstance(self.workers, int) or self.workers < 1:
            raise OperatorError.build(
                "workers", where, "an integer >= 1", repr(self.workers)
            )
        if not isinstance(self.samplers, int) or self.samplers < 0:
            raise OperatorError.build(
                "samplers",
                where,
                "an integer >= 0 (0: sample on the trainers)",
                repr(self.samplers),
            )
        if self.partitioner not in _PARTITIONERS:
            raise OperatorError.build(
                "partitioner",
                where,
                f"one of {list(_PARTITIONERS)}",
                repr(self.partitioner),
            )
        if self.cache_policy not in _POLICIES:
            raise OperatorError.build(
                "cache_policy",
                where,
                f"one of {list(_POLICIES)}",
                repr(self.cache_policy),
            )
        cache = self.cache
        if not (math.isfinite(cache) and cache >= 0) or (
            cache > 1 and cache != int(cache)
        ):
            raise OperatorError.build(
                "cache",
                where,
                "0 (none), a fraction in (0, 1] of the remote rows, or a row count > 1",
                repr(cache),
            )
        if (
            self.samplers > 0
            and self.cache > 0
            and self.cache_policy
            in (
                "frequency",
                "belady",
            )
        ):
            raise OperatorError.build(
                "cache_policy",
                where,
                "'degree' or 'none' with sampler workers",
                repr(self.cache_policy),
                "the frequency and Belady caches are planned from the epoch's "
                "schedule, which needs the graph's structure; with samplers the "
                "trainers hold none",
            )
        if self.keep_blocks_bytes < 0:
            raise OperatorError.build(
                "keep_blocks_bytes",
                where,
                "keep_blocks_bytes >= 0",
                repr(self.keep_blocks_bytes),
            )
        if self.prefetch_bytes < 1:
            raise OperatorError.build(
                "prefetch_bytes",
                where,
                "prefetch_bytes >= 1",
                repr(self.prefetch_bytes),
            )
        for name in ("fetch_timeout_s", "collective_timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise OperatorError.build(name, where, "seconds > 0", repr(value))
        if self.device not in ("cpu", "cuda", "auto"):
            raise OperatorError.build(
                "device", where, "one of ['cpu', 'cuda', 'auto']", repr(self.device)
            )

    @property
    def colocated(self) -> bool:
        """Whether the trainers sample (no sampler workers)."""
        return self.samplers == 0

    @property
    def processes(self) -> int:
        """Processes of the gang: samplers and trainers."""
        return self.samplers + self.workers

    @property
    def partition_method(self) -> Literal["grem", "multilevel", "random"]:
        """The partitioner ``auto`` stands for here."""
        if self.partitioner == "auto":
            return "multilevel" if self.colocated else "grem"
        return self.partitioner

    def cache_rows(self, distinct_remote: int) -> int:
        """The cache's capacity in rows, for an epoch with this many remote rows."""
        if self.cache_policy == "none" or self.cache == 0:
            return 0
        if self.cache <= 1:
            return math.ceil(self.cache * distinct_remote)
        return int(self.cache)
