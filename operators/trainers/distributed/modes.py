"""The distributed mode as one typed value: ``Exact() | HongTu(...) | Emma(...)``.

A full-graph run on a gang runs in exactly one mode, and each mode carries only
its own settings:

* :class:`Exact`: partition-parallel training with halo exchange. Equals
  single-device training for any worker count.
* :class:`HongTu`: chunked training with host offload, deduplicated loading and
  a recompute-or-cache rule (``hongtu.md``). Exact as well.
* :class:`Emma`: partition-parallel training with source chunking and moving
  (stale) aggregation (``emma.md``). Approximate; evaluation stays exact.

Settings are checked when a mode is built; an enum-valued setting also takes
its value as a string (``HongTu(dedup="intra")``), which is how a command line
gives it. :func:`parse_mode` builds a mode from its name and settings, the one
way from text (a job's ``--set mode=hongtu --set chunks=4``).

The trainer picks each mode's worker engine by the mode's *type*
(:func:`strata.operators.trainers.distributed.trainer.engine_for`); there is no
string registry.

Examples:
    >>> HongTu(chunks=4, dedup="intra").dedup  # a command line's string, converted
    <LoadMode.INTRA: 'intra'>
    >>> Emma(splits=5).refresh_every, Emma(splits=5).name
    (25, 'emma')
    >>> parse_mode("hongtu", chunks=2) == HongTu(chunks=2)
    True
    >>> parse_mode("exact", chunks=2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    strata.operators.errors.OperatorError: chunks in DistributedConfig: expected \
chunks=None with mode='exact', got chunks=2. Hint: ...
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields
from typing import Any, ClassVar, TypeAlias

from strata.operators.errors import OperatorError, as_enum, check
from strata.partition import ChunkMethod, LoadMode


class CachePolicy(enum.Enum):
    """What backward reuses of a layer's forward work (``hongtu.md`` §3.5)."""

    AUTO = "auto"  # the valid policy with the smallest modelled backward time
    CACHE = "cache_aggregate"  # keep the aggregate z on the host
    REFETCH = "refetch"  # load the rows again and recompute


@dataclass(frozen=True, slots=True)
class Exact:
    """Partition-parallel training: one part per worker, exact halo exchange."""

    name: ClassVar[str] = "exact"


@dataclass(frozen=True, slots=True)
class HongTu:
    """Chunked training with host offload (``hongtu.md``).

    Attributes:
        chunks: M, chunks per worker; None picks the smallest M whose modelled
            peak fits ``device_budget`` (1 without a budget).
        device_budget: device bytes per worker; picks M from the memory model.
            None: no limit.
        max_chunks: the largest M tried.
        chunk_method: how a part is split (recursive multilevel, or contiguous
            ranges of a BFS order).
        dedup: which reuse the load plan exploits (``both`` by default).
        cache_policy: the recompute-or-cache rule (``auto`` picks per layer).
        host_budget: host bytes the aggregate caches may use (None: any).
    """

    name: ClassVar[str] = "hongtu"

    chunks: int | None = None
    device_budget: int | None = None
    max_chunks: int = 64
    chunk_method: ChunkMethod = ChunkMethod.RECURSIVE
    dedup: LoadMode = LoadMode.BOTH
    cache_policy: CachePolicy = CachePolicy.AUTO
    host_budget: int | None = None

    def __post_init__(self) -> None:
        where = "HongTu"
        set_ = object.__setattr__
        set_(
            self,
            "chunk_method",
            as_enum(ChunkMethod, self.chunk_method, "chunk_method", where),
        )
        set_(self, "dedup", as_enum(LoadMode, self.dedup, "dedup", where))
        set_(
            self,
            "cache_policy",
            as_enum(CachePolicy, self.cache_policy, "cache_policy", where),
        )
        m = self.max_chunks
        check(isinstance(m, int) and m >= 1, "max_chunks", where, "max_chunks >= 1", m)
        for name in ("device_budget", "host_budget", "chunks"):
            value = getattr(self, name)
            check(
                value is None or (isinstance(value, int) and value >= 1),
                name,
                where,
                f"None or {name} >= 1",
                value,
            )
        if self.chunks is not None and self.chunks > m:
            raise OperatorError.build(
                "chunks",
                where,
                f"chunks <= max_chunks ({m})",
                f"chunks={self.chunks}",
                "raise max_chunks too",
            )


@dataclass(frozen=True, slots=True)
class Emma:
    """Source chunking with moving aggregation (``emma.md``).

    Attributes:
        splits: S, the number of source chunks; iteration ``t`` refreshes chunk
            ``t mod S``. 1 is exact training.
        redraw_every: iterations between redraws of the chunk ids (None: S, so
            each cycle aggregates every edge exactly once). Must be a multiple
            of S: a redraw inside a cycle would skip some edges and repeat others.
        refresh_every: iterations between exact passes that overwrite every
            moving buffer (None: S * S, the reference's cadence; 0: never).
        warm_start: fill the buffers with one exact pass before the first
            iteration (our addition; the reference starts from zeros).
        seed: seeds the chunk ids, ``chunk(v, cycle) = mix64(seed, cycle, v) mod S``.
    """

    name: ClassVar[str] = "emma"

    splits: int = 10
    redraw_every: int | None = None
    refresh_every: int | None = None
    warm_start: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        where = "EmmaConfig"  # the name the errors have always used
        s = self.splits
        check(
            isinstance(s, int) and s >= 1, "splits", where, "splits >= 1", f"splits={s}"
        )
        if self.redraw_every is None:
            object.__setattr__(self, "redraw_every", s)
        if self.refresh_every is None:
            object.__setattr__(self, "refresh_every", s * s)
        r = self.redraw_every
        check(
            isinstance(r, int) and r >= 1 and r % s == 0,
            "redraw_every",
            where,
            f"a positive multiple of splits ({s})",
            f"redraw_every={r}",
            "chunk ids are drawn once per cycle of S iterations (emma.md pitfall 3); "
            "leave it None for S",
        )
        f = self.refresh_every
        check(
            isinstance(f, int) and f >= 0,
            "refresh_every",
            where,
            "refresh_every >= 0 (0: never)",
            f"refresh_every={f}",
        )
        check(self.seed >= 0, "seed", where, "seed >= 0", f"seed={self.seed}")

    def cycle_of(self, iteration: int) -> int:
        """The chunk-id draw iteration ``iteration`` uses."""
        assert self.redraw_every is not None
        return iteration // self.redraw_every

    def chunk_of(self, iteration: int) -> int:
        """The chunk iteration ``iteration`` refreshes (``iteration mod S``)."""
        return iteration % self.splits

    def refreshes_before(self, iteration: int) -> bool:
        """Whether an exact refresh runs before ``iteration``.

        One runs after every ``refresh_every`` completed iterations (none before
        the first; ``refresh_every = 0`` never refreshes).
        """
        f = self.refresh_every
        assert f is not None
        return bool(f) and iteration > 0 and iteration % f == 0


#: The distributed mode: exactly one of these values.
DistributedMode: TypeAlias = Exact | HongTu | Emma

#: Mode names as a command line spells them.
MODE_NAMES = (Exact.name, HongTu.name, Emma.name)


def parse_mode(name: str, **settings: Any) -> DistributedMode:
    """The mode called ``name`` with ``settings`` (the command line's way).

    Settings that are None are left at their defaults, so a job can pass every
    option it has; a setting of another mode fails, naming both.

    Raises:
        OperatorError: an unknown name, or a setting the mode does not have.
    """
    given = {k: v for k, v in settings.items() if v is not None}
    kind: type[Exact] | type[HongTu] | type[Emma]
    if name == Exact.name:
        kind = Exact
    elif name == HongTu.name:
        kind = HongTu
    elif name == Emma.name:
        kind = Emma
    else:
        raise OperatorError.build(
            "mode", "DistributedConfig", f"one of {list(MODE_NAMES)}", repr(name)
        )
    allowed = {f.name for f in fields(kind)}
    for key, value in given.items():
        if key not in allowed:
            raise OperatorError.build(
                key,
                "DistributedConfig",
                f"{key}=None with mode={name!r}",
                f"{key}={value}",
                f"{key} belongs to another mode; set that mode, or drop the setting",
            )
    return kind(**given)
