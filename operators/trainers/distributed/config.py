"""How a full-graph run is spread over a gang: :class:`DistributedConfig`.

The model, optimiser and epochs stay in :class:`~strata.operators.trainers.TrainConfig`;
this config is a few small frozen pieces:

* :class:`GangConfig`: how many workers, on which device, with which limits;
* :class:`Level1Config`: how the graph is split into one part per worker;
* ``mode``: one typed value, ``Exact() | HongTu(...) | Emma(...)``
  (:mod:`~strata.operators.trainers.distributed.modes`), carrying only its own
  settings;
* ``compression``: the gradient all-reduce's number format.

Settings that contradict each other cannot be written: HongTu's chunk count is
a field of :class:`HongTu` only, Emma's splits of :class:`Emma` only.

**Compatibility shim.** The flat keyword form of the old 19-field config is
still accepted and converted to the pieces, so existing jobs keep working::

    DistributedConfig(workers=2, mode="hongtu", chunks=4)
    == DistributedConfig(gang=GangConfig(workers=2), mode=HongTu(chunks=4))

A flat call takes ``mode`` as ``"exact"``, ``"hongtu"`` or ``"emma"``; HongTu's
settings (``chunks``, ``device_budget``, ``max_chunks``, ``chunk_method``,
``dedup``, ``cache_policy``, ``host_budget``) go into :class:`HongTu`, and
``chunks`` or ``device_budget`` with another mode fail naming both, as before.
The gang settings (``workers``, ``device``, ``backend``, ``timeout_s``,
``collective_timeout_s``, ``heartbeat_timeout_s``, ``threads_per_worker``,
``fault``) go into :class:`GangConfig`, ``level1`` and ``partition_seed`` into
:class:`Level1Config`. New code builds the pieces.

Examples:
    >>> DistributedConfig(gang=GangConfig(workers=4), mode=HongTu(chunks=2)).mode
    ... # doctest: +ELLIPSIS
    HongTu(chunks=2, ...)
    >>> DistributedConfig(workers=2, mode="hongtu", chunks=4).mode.chunks  # the shim
    4
    >>> DistributedConfig(workers=2, chunks=4)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    strata.operators.errors.OperatorError: chunks in DistributedConfig: expected \
chunks=None \
with mode='exact', got chunks=4. Hint: ...
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from strata.operators.errors import OperatorError
from strata.operators.trainers.distributed.modes import (
    CachePolicy,
    DistributedMode,
    Emma,
    Exact,
    HongTu,
    parse_mode,
)

__all__ = [
    "CachePolicy",
    "DistributedConfig",
    "DistributedMode",
    "Emma",
    "Exact",
    "Fault",
    "GangConfig",
    "HongTu",
    "Level1",
    "Level1Config",
]

_WHERE = "DistributedConfig"


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
    how: Literal["kill", "raise"] = "kill"
    stage: Literal["start", "backward"] = "start"

    def __post_init__(self) -> None:
        _need(self.how in ("kill", "raise"), "fault.how", "'kill' or 'raise'", self.how)
        _need(
            self.stage in ("start", "backward"),
            "fault.stage",
            "'start' or 'backward'",
            self.stage,
        )


def _need(ok: bool, subject: str, expected: str, got: object) -> None:
    if not ok:
        raise OperatorError.build(subject, _WHERE, expected, repr(got))


@dataclass(frozen=True, slots=True)
class GangConfig:
    """The gang of workers a run uses.

    Attributes:
        workers: gang size K: one worker per part.
        device: gang device kind: ``cpu``, ``cuda`` or ``auto``.
        backend: ``torch.distributed`` backend (None: NCCL on CUDA, gloo on CPU).
        threads_per_worker: torch threads per worker (None: cores / workers).
        timeout_s: wall-clock limit of the whole gang (None: none).
        collective_timeout_s: limit of one collective; a worker waiting longer
            for a dead peer fails.
        heartbeat_timeout_s: fail a worker silent for this long (None: off).
        fault: testing aid, see :class:`Fault`.
    """

    workers: int = 2
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    backend: str | None = None
    threads_per_worker: int | None = None
    timeout_s: float | None = None
    collective_timeout_s: float = 300.0
    heartbeat_timeout_s: float | None = None
    fault: Fault | None = None

    def __post_init__(self) -> None:
        k = self.workers
        _need(isinstance(k, int) and k >= 1, "workers", "workers >= 1", k)
        _need(
            self.device in ("cpu", "cuda", "auto"),
            "device",
            "cpu/cuda/auto",
            self.device,
        )


@dataclass(frozen=True, slots=True)
class Level1Config:
    """The level-1 partition: one part per worker.

    Attributes:
        method: the partitioner (an enum member or its value).
        seed: its seed.
    """

    method: Level1 = Level1.METIS
    seed: int = 0

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "method", Level1(self.method))
        except ValueError:
            choices = [m.value for m in Level1]
            raise OperatorError.build(
                "level1", _WHERE, f"one of {choices}", repr(self.method)
            ) from None


#: The flat keywords of the compatibility shim, by the piece they go into.
_GANG_KEYS = {f.name for f in fields(GangConfig)}
_HONGTU_KEYS = {f.name for f in fields(HongTu)}
_LEVEL1_KEYS = {"level1": "method", "partition_seed": "seed"}


@dataclass(frozen=True, slots=True, init=False)
class DistributedConfig:
    """How a full-graph run uses a gang (see the module docstring).

    Attributes:
        gang: workers, device and limits.
        mode: ``Exact()``, ``HongTu(...)`` or ``Emma(...)``.
        partition: the level-1 partitioner and its seed.
        compression: gradient all-reduce in ``"bf16"``/``"fp16"`` with error
            feedback (approximate), or None (exact fp32).
    """

    gang: GangConfig = field(default_factory=GangConfig)
    mode: DistributedMode = field(default_factory=Exact)
    partition: Level1Config = field(default_factory=Level1Config)
    compression: Literal["bf16", "fp16"] | None = None

    def __init__(
        self,
        *,
        gang: GangConfig | None = None,
        mode: DistributedMode | str | None = None,
        partition: Level1Config | None = None,
        compression: Literal["bf16", "fp16"] | None = None,
        **flat: Any,
    ) -> None:
        gang, mode, partition = _convert_flat(gang, mode, partition, flat)
        set_ = object.__setattr__
        set_(self, "gang", gang)
        set_(self, "mode", mode)
        set_(self, "partition", partition)
        set_(self, "compression", compression)
        _need(
            compression in (None, "bf16", "fp16"),
            "compression",
            "None, 'bf16' or 'fp16'",
            compression,
        )
        if not isinstance(mode, Exact | HongTu | Emma):
            raise OperatorError.build(
                "mode", _WHERE, "Exact(), HongTu(...) or Emma(...)", repr(mode)
            )

    # Read-only views of the pieces most callers want (kept for the old users).
    @property
    def workers(self) -> int:
        """The gang size (``gang.workers``)."""
        return self.gang.workers

    @property
    def level1(self) -> Level1:
        """The level-1 partitioner (``partition.method``)."""
        return self.partition.method

    def with_mode(self, mode: DistributedMode) -> DistributedConfig:
        """The same gang and partition in another mode."""
        return DistributedConfig(
            gang=self.gang,
            mode=mode,
            partition=self.partition,
            compression=self.compression,
        )


def _convert_flat(
    gang: GangConfig | None,
    mode: DistributedMode | str | None,
    partition: Level1Config | None,
    flat: dict[str, Any],
) -> tuple[GangConfig, DistributedMode, Level1Config]:
    """The compatibility shim: flat keywords into the pieces (module docstring)."""
    unknown = set(flat) - _GANG_KEYS - _HONGTU_KEYS - set(_LEVEL1_KEYS)
    if unknown:
        raise TypeError(
            f"DistributedConfig() got unexpected keyword arguments {sorted(unknown)}"
        )
    gang_kw = {k: v for k, v in flat.items() if k in _GANG_KEYS}
    if gang_kw:
        base = gang or GangConfig()
        gang = GangConfig(**{**_as_dict(base), **gang_kw})
    level1_kw = {_LEVEL1_KEYS[k]: v for k, v in flat.items() if k in _LEVEL1_KEYS}
    if level1_kw:
        base_partition = partition or Level1Config()
        partition = Level1Config(**{**_as_dict(base_partition), **level1_kw})
    hongtu_kw = {k: v for k, v in flat.items() if k in _HONGTU_KEYS}
    if mode is None:
        mode = Exact()
    if isinstance(mode, str):
        mode = _mode_from_flat(mode, hongtu_kw)
    elif hongtu_kw:
        if not isinstance(mode, HongTu):
            _refuse_hongtu_settings(mode.name, hongtu_kw)
            hongtu_kw = {}
        else:
            mode = HongTu(**{**_as_dict(mode), **hongtu_kw})
    return gang or GangConfig(), mode, partition or Level1Config()


def _mode_from_flat(name: str, hongtu_kw: dict[str, Any]) -> DistributedMode:
    if name == HongTu.name:
        return HongTu(**hongtu_kw)
    _refuse_hongtu_settings(name, hongtu_kw)
    return parse_mode(name)


def _refuse_hongtu_settings(name: str, hongtu_kw: dict[str, Any]) -> None:
    """The old rule: ``chunks``, ``device_budget`` need HongTu; the rest is ignored."""
    for key in ("chunks", "device_budget"):
        value = hongtu_kw.get(key)
        if value is not None:
            raise OperatorError.build(
                key,
                _WHERE,
                f"{key}=None with mode={name!r}",
                f"{key}={value}",
                "chunking and device budgets are HongTu's: set mode=HongTu(...) "
                "(mode='hongtu'), or drop the setting",
            )


def _as_dict(value: Any) -> dict[str, Any]:
    """A dataclass's init fields as a dict (shallow)."""
    return {f.name: getattr(value, f.name) for f in fields(value) if f.init}
