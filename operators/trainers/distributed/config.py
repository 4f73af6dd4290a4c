"""How a full-graph run is spread over a gang: :class:`DistributedConfig`.

The model, optimiser and epochs stay in :class:`~strata.operators.trainers.TrainConfig`;
this config says how many workers train, how the graph is split among them and
which mode runs:

* :attr:`Mode.EXACT`: partition-parallel training. Each worker owns one part of
  a level-1 partition (METIS-style multilevel by default) with its rows on its
  device; every layer exchanges halo rows forward and halo gradients backward.
* :attr:`Mode.HONGTU`: chunked training with host offload (``hongtu.md``). Vertex
  data and activations live in a shared host store; each worker streams its part
  chunk by chunk (a two-level partition) through a device arena of
  ``device_budget`` bytes, with deduplicated loading (:attr:`dedup`) and a
  recompute-or-cache rule per layer (:attr:`cache_policy`).
* the Emma option (``emma.md``) builds on the exact mode's engine and loop; it has
  its own step (:class:`~strata.operators.trainers.distributed.emma.EmmaTrainer`), so
  ``mode="emma"`` here fails with an error pointing to it.

Both exact modes give the result of single-device training (up to float
rounding) for any worker count. Settings that contradict each other fail when
the config is built, naming both (e.g. ``chunks`` with ``mode="exact"``).

Examples:
    >>> DistributedConfig(workers=2).mode
    <Mode.EXACT: 'exact'>
    >>> DistributedConfig(workers=4, mode="hongtu", device_budget=64 << 20).dedup
    <LoadMode.BOTH: 'both'>
    >>> DistributedConfig(workers=2, chunks=4)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    strata.operators.errors.OperatorError: chunks in DistributedConfig: expected \
chunks=None \
with mode='exact', got chunks=4. Hint: ...
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Literal

from strata.operators.errors import OperatorError
from strata.partition import ChunkMethod, LoadMode

_WHERE = "DistributedConfig"


class Mode(enum.Enum):
    """Which distributed trainer runs."""

    EXACT = "exact"
    HONGTU = "hongtu"


class CachePolicy(enum.Enum):
    """What backward reuses of a layer's forward work (``hongtu.md`` §3.5)."""

    AUTO = "auto"  # the valid policy with the smallest modelled backward time
    CACHE = "cache_aggregate"  # keep the aggregate z on the host
    REFETCH = "refetch"  # load the rows again and recompute


class Level1(enum.Enum):
    """The level-1 partitioner: one part per worker."""

    METIS = "metis"  # strata.partition.MultilevelPartitioner (default)
    RANDOM = "random"  # strata.partition.RandomPartitioner (a worst case for halos)


@dataclass(frozen=True, slots=True)
class Fault:
    """Testing aid: make one rank fail in one epoch.

    Attributes:
        rank: the rank that fails.
        epoch: the epoch in which it fails.
        how: ``"kill"`` (SIGKILL itself: dies without a word) or ``"raise"``.
        stage: ``"start"`` (before the epoch's forward pass) or ``"backward"``
            (mid-epoch: when the last layer's weight gradient is computed, after
            the forward pass's exchanges, while its peers wait in the backward
            pass's collectives).
    """

    rank: int
    epoch: int
    how: str = "kill"
    stage: str = "start"


def _enum(kind: type[enum.Enum], value: Any, subject: str, hint: str = "") -> Any:
    try:
        return kind(value)
    except ValueError:
        choices = [m.value for m in kind]
        raise OperatorError.build(
            subject, _WHERE, f"one of {choices}", repr(value), hint or None
        ) from None


@dataclass(frozen=True, slots=True)
class DistributedConfig:
    """How a full-graph run uses a gang (see the module docstring).

    Attributes:
        workers: gang size K: one worker per part.
        mode: ``exact`` (partition-parallel) or ``hongtu`` (chunked, offloaded).
        level1: the level-1 partitioner.
        partition_seed: its seed.
        compression: gradient all-reduce in ``"bf16"``/``"fp16"`` with error
            feedback (approximate), or None (exact fp32).
        device_budget: HongTu: device bytes per worker; picks the chunk count M
            from the memory model. None: no limit.
        chunks: HongTu: M, chunks per worker; None picks the smallest M whose
            modelled peak fits ``device_budget`` (1 without a budget).
        max_chunks: HongTu: the largest M tried.
        chunk_method: HongTu: how a part is split (recursive multilevel or
            contiguous ranges of a BFS order).
        dedup: HongTu: which reuse the load plan exploits (``both`` by default).
        cache_policy: HongTu: recompute-or-cache rule (``auto`` picks per layer).
        host_budget: HongTu: host bytes the aggregate caches may use (None: any).
        device: gang device kind: ``cpu``, ``cuda`` or ``auto``.
        backend: ``torch.distributed`` backend (None: NCCL on CUDA, gloo on CPU).
        timeout_s: wall-clock limit of the whole gang (None: none).
        collective_timeout_s: limit of one collective; a worker waiting longer
            for a dead peer fails.
        heartbeat_timeout_s: fail a worker silent for this long (None: off).
        threads_per_worker: torch threads per worker (None: cores / workers).
        fault: testing aid, see :class:`Fault`.
    """

    workers: int = 2
    mode: Mode | str = Mode.EXACT
    level1: Level1 | str = Level1.METIS
    partition_seed: int = 0
    compression: Literal["bf16", "fp16"] | None = None
    device_budget: int | None = None
    chunks: int | None = None
    max_chunks: int = 64
    chunk_method: ChunkMethod | str = ChunkMethod.RECURSIVE
    dedup: LoadMode | str = LoadMode.BOTH
    cache_policy: CachePolicy | str = CachePolicy.AUTO
    host_budget: int | None = None
    device: str = "cpu"
    backend: str | None = None
    timeout_s: float | None = None
    collective_timeout_s: float = 300.0
    heartbeat_timeout_s: float | None = None
    threads_per_worker: int | None = None
    fault: Fault | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.mode == "emma":
            raise OperatorError.build(
                "mode",
                _WHERE,
                "'exact' or 'hongtu'",
                "'emma'",
                "the Emma option runs through "
                "strata.operators.trainers.distributed.emma."
                "EmmaTrainer(config, DistributedConfig(mode='exact'), EmmaConfig())",
            )
        set_(self, "mode", _enum(Mode, self.mode, "mode"))
        set_(self, "level1", _enum(Level1, self.level1, "level1"))
        set_(
            self, "chunk_method", _enum(ChunkMethod, self.chunk_method, "chunk_method")
        )
        set_(self, "dedup", _enum(LoadMode, self.dedup, "dedup"))
        set_(
            self, "cache_policy", _enum(CachePolicy, self.cache_policy, "cache_policy")
        )
        self._check()

    def _check(self) -> None:
        def need(ok: bool, subject: str, expected: str, got: object) -> None:
            if not ok:
                raise OperatorError.build(subject, _WHERE, expected, str(got))

        need(
            isinstance(self.workers, int) and self.workers >= 1,
            "workers",
            "workers >= 1",
            self.workers,
        )
        need(
            self.compression in (None, "bf16", "fp16"),
            "compression",
            "None, 'bf16' or 'fp16'",
            repr(self.compression),
        )
        need(self.max_chunks >= 1, "max_chunks", "max_chunks >= 1", self.max_chunks)
        need(
            self.device in ("cpu", "cuda", "auto"),
            "device",
            "cpu/cuda/auto",
            self.device,
        )
        for name in ("device_budget", "host_budget", "chunks"):
            value = getattr(self, name)
            need(value is None or value >= 1, name, f"None or {name} >= 1", value)
        if self.mode is Mode.EXACT:
            for name, value in (
                ("chunks", self.chunks),
                ("device_budget", self.device_budget),
            ):
                if value is not None:
                    raise OperatorError.build(
                        name,
                        _WHERE,
                        f"{name}=None with mode='exact'",
                        f"{name}={value}",
                        "chunking and device budgets are HongTu's: set "
                        "mode='hongtu', or drop the setting",
                    )
        if self.chunks is not None and self.chunks > self.max_chunks:
            raise OperatorError.build(
                "chunks",
                _WHERE,
                f"chunks <= max_chunks ({self.max_chunks})",
                f"chunks={self.chunks}",
                "raise max_chunks too",
            )
        if self.fault is not None:
            need(
                self.fault.how in ("kill", "raise"),
                "fault.how",
                "'kill' or 'raise'",
                repr(self.fault.how),
            )
            need(
                self.fault.stage in ("start", "backward"),
                "fault.stage",
                "'start' or 'backward'",
                repr(self.fault.stage),
            )
