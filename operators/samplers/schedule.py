"""The deterministic epoch schedule of data-parallel sampled training.

An epoch is a list of **global batches**: ``perm = epoch_order(train_ids, seed,
epoch)`` (a Philox permutation keyed by ``h(seed, epoch, 0)``) cut into
``perm[b * B:(b + 1) * B]``. Rank ``r`` trains, in global batch ``b``, on the seeds
of ``b`` it owns (``rank_of[seed] == r``; possibly none), and samples their blocks
with ``NeighborSampler(..., rank=0).sample(seeds, epoch, batch_index=b)``.

Why global batches, not one shuffled list per rank (``systems/rapidgnn.md`` §3.2
keys the shuffle by rank; this design departs from it on purpose):

* **Same losses with 1 or N workers.** A seed lands in the same global batch
  whatever the worker count, and its sampled computation tree depends only on
  ``(seed, epoch, batch, layer, vertex)`` because the sampler key leaves the rank
  out. The union of the ranks' blocks of batch ``b`` therefore computes what one
  worker computes for batch ``b``, so the all-reduced gradient is the same sum.
* **No DDP hang.** Every rank runs exactly ``ceil(T / B)`` steps (a rank with no
  seed in a batch still joins its all-reduce with a zero gradient).

Knowing every batch ahead of time is what RapidGNN builds on: the schedule
(:func:`build_schedule`) samples each batch of the epoch once, records the remote
input ids per batch (a CSR), their epoch counts (the frequency cache's ranking)
and a 64-bit digest of every batch's inputs, so the prefetcher that samples the
batch again can :meth:`EpochSchedule.check` it got the same one.

:func:`balanced_train_ids` gives each rank ``floor(T/W)`` or ``ceil(T/W)`` of the
training vertices, re-homing as few as possible (spec §3.6, pitfall 4).

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> from strata.operators.samplers import NeighborSampler, SamplerConfig
    >>> src = np.arange(8); g = CSRGraph.from_edges(src, (src + 1) % 8)
    >>> owner = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    >>> split = balanced_train_ids(owner, np.array([0, 1, 2, 5]), workers=2)
    >>> [ids.tolist() for ids in split.ids], split.rehomed
    ([[0, 1], [2, 5]], 1)
    >>> batches = global_batches(np.array([0, 1, 2, 5]), seed=0, epoch=0, batch_size=2)
    >>> mine = rank_batches(batches, split.rank_of, rank=1)
    >>> sampler = NeighborSampler(g, SamplerConfig(fanouts=(1, 1)), seed=0)
    >>> sched = build_schedule(sampler, mine, owner, rank=1, epoch=0)
    >>> sched.num_batches, int(sched.remote_ids.size) == int(sched.num_inputs.sum()
    ...     - sched.num_local.sum())
    (2, True)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np

from strata.operators.errors import OperatorError
from strata.operators.samplers.block import Block
from strata.operators.samplers.neighbor import NeighborSampler
from strata.operators.samplers.rng import hash3, mix64
from strata.storage._types import Int64Array

__all__ = [
    "EpochSchedule",
    "TrainSplit",
    "balanced_train_ids",
    "build_schedule",
    "epoch_order",
    "global_batches",
    "input_digest",
    "rank_batches",
]

#: Keeps the digest of a set apart from plain sums of SplitMix64 hashes.
_DIGEST_SALT = np.uint64(0x5DEECE66D2B7E151)

UInt64Array = np.ndarray


def epoch_order(ids: np.ndarray, seed: int, epoch: int, rank: int = 0) -> np.ndarray:
    """The ids in the shuffled order of ``epoch`` (deterministic).

    The permutation comes from ``np.random.Generator(Philox(key=h(seed, epoch,
    rank)))``: any epoch's order can be computed alone, in any order, on any worker.

    Examples:
        >>> epoch_order(np.arange(5), seed=0, epoch=0).tolist() == epoch_order(
        ...     np.arange(5), 0, 0).tolist()
        True
    """
    key = int(hash3(np.uint64(seed), np.uint64(epoch), np.uint64(rank)))
    rng = np.random.Generator(np.random.Philox(key=key))
    return rng.permutation(ids)


def input_digest(ids: np.ndarray) -> int:
    """A 64-bit digest of a set of distinct ids, whatever their order.

    The sum (mod 2**64) of every id's SplitMix64 hash, finalised with the count:
    one pass, no sort, in a numba kernel that releases the GIL. The prefetcher
    checks every batch it samples again against the schedule with it, so it must
    cost far less than the batch (a sort and blake2b of a batch's 42k input ids
    took 5-7 ms, as much as the cache saved; this takes about 0.1 ms). Block
    sources are distinct; repeated ids would count twice.

    Examples:
        >>> input_digest(np.array([3, 1, 2])) == input_digest(np.array([1, 2, 3]))
        True
        >>> input_digest(np.array([1, 2])) == input_digest(np.array([1, 3]))
        False
    """
    return int(_set_digest(np.ascontiguousarray(ids, dtype=np.int64)))


@numba.njit(cache=True, nogil=True)
def _set_digest(ids: np.ndarray) -> np.uint64:
    total = np.uint64(0)
    for i in range(ids.shape[0]):
        total += mix64(np.uint64(ids[i]) ^ _DIGEST_SALT)
    return mix64(total ^ np.uint64(ids.shape[0]))


# --------------------------------------------------------------------------- split


@dataclass(frozen=True, slots=True, eq=False)
class TrainSplit:
    """Training vertices per rank, balanced to ``floor(T/W)`` or ``ceil(T/W)``.

    Attributes:
        ids: per rank, its training ids (sorted int64).
        rank_of: int32 ``[num_nodes]``: the rank training each vertex, -1 for
            vertices that are not training vertices.
        rehomed: training vertices moved away from their owner's rank.
        balance: max over mean of the per-rank counts (1.0 is perfect).
    """

    ids: tuple[Int64Array, ...]
    rank_of: np.ndarray
    rehomed: int
    balance: float

    @property
    def workers(self) -> int:
        """Number of ranks."""
        return len(self.ids)

    @property
    def num_train(self) -> int:
        """Training vertices over all ranks."""
        return sum(int(ids.size) for ids in self.ids)

    def steps(self, batch_size: int) -> int:
        """Steps per epoch on every rank: ``ceil(T / batch_size)`` global batches."""
        return -(-self.num_train // batch_size)


def balanced_train_ids(
    owner: np.ndarray, train_ids: np.ndarray, workers: int
) -> TrainSplit:
    """Split the training ids over ``workers`` ranks, each keeping its own first.

    Rank ``r`` starts with the training vertices it owns (``owner == r``). The
    ``T mod W`` ranks with the most get ``ceil(T/W)``, the others ``floor(T/W)``
    (ties to the lower rank), which re-homes the fewest vertices; a rank above its
    target hands its surplus, highest ids first, to the ranks below theirs, in
    rank order.

    Args:
        owner: int array ``[num_nodes]``, the part of every vertex, in
            ``[0, workers)``.
        train_ids: distinct training vertex ids.
        workers: number of ranks (= parts).

    Raises:
        OperatorError: on ``workers < 1``, owner values outside ``[0, workers)``,
            or out-of-range / repeated training ids.
    """
    where = "balanced_train_ids"
    owner = np.asarray(owner)
    if workers < 1:
        raise OperatorError.build("workers", where, "workers >= 1", str(workers))
    if owner.size and (int(owner.min()) < 0 or int(owner.max()) >= workers):
        raise OperatorError.build(
            "owner",
            where,
            f"parts in [0, {workers}) (one part per worker)",
            f"parts in [{int(owner.min())}, {int(owner.max())}]",
            "partition the graph into as many parts as there are workers",
        )
    ids = np.asarray(train_ids, dtype=np.int64)
    sorted_ids = np.unique(ids)
    if sorted_ids.size != ids.size:
        raise OperatorError.build(
            "train_ids", where, "distinct ids", f"{ids.size - sorted_ids.size} repeats"
        )
    n = owner.shape[0]
    if sorted_ids.size and (sorted_ids[0] < 0 or sorted_ids[-1] >= n):
        raise OperatorError.build(
            "train_ids",
            where,
            f"ids in [0, {n})",
            f"ids in [{int(sorted_ids[0])}, {int(sorted_ids[-1])}]",
        )
    home = owner[sorted_ids].astype(np.int64)
    counts = np.bincount(home, minlength=workers)
    total = int(sorted_ids.size)
    low, extra = divmod(total, workers)
    # The `extra` ranks holding the most keep ceil(T/W): fewest moves.
    order = np.lexsort((np.arange(workers), -counts))
    target = np.full(workers, low, dtype=np.int64)
    target[order[:extra]] += 1
    mine = [sorted_ids[home == r] for r in range(workers)]
    surplus = [m[target[r] :][::-1] for r, m in enumerate(mine)]  # highest first
    pool = np.concatenate(surplus) if surplus else np.empty(0, np.int64)
    final: list[Int64Array] = []
    taken = 0
    for r in range(workers):
        keep = mine[r][: target[r]]
        need = int(target[r] - keep.size)
        final.append(np.sort(np.concatenate([keep, pool[taken : taken + need]])))
        taken += need
    rank_of = np.full(n, -1, dtype=np.int32)
    for r, part in enumerate(final):
        rank_of[part] = r
    sizes = np.array([p.size for p in final], dtype=np.float64)
    balance = float(sizes.max() / sizes.mean()) if total else 1.0
    return TrainSplit(ids=tuple(final), rank_of=rank_of, rehomed=taken, balance=balance)


# ------------------------------------------------------------------------- batches


def global_batches(
    train_ids: np.ndarray, seed: int, epoch: int, batch_size: int
) -> list[Int64Array]:
    """The global batches of ``epoch``: the shuffled training ids cut every ``B``.

    The shuffle is of the *sorted* ids, so the batches depend only on the set of
    training ids, ``seed`` and ``epoch`` — never on the worker count.
    """
    if batch_size < 1:
        raise OperatorError.build(
            "batch_size", "global_batches", "batch_size >= 1", str(batch_size)
        )
    perm = epoch_order(np.unique(np.asarray(train_ids, dtype=np.int64)), seed, epoch)
    return [perm[i : i + batch_size] for i in range(0, perm.size, batch_size)]


def rank_batches(
    batches: Sequence[np.ndarray], rank_of: np.ndarray, rank: int
) -> list[Int64Array]:
    """Rank ``rank``'s seeds of every global batch, in the batch's order."""
    return [np.asarray(b[rank_of[b] == rank], dtype=np.int64) for b in batches]


# ------------------------------------------------------------------------ schedule


@dataclass(frozen=True, slots=True, eq=False)
class EpochSchedule:
    """One rank's epoch, known before it runs (see the module docs).

    Attributes:
        epoch: the epoch number.
        rank: the rank it is for.
        seeds: per global batch, this rank's seeds (possibly empty).
        remote_ids: int64, per batch the sorted unique remote input ids (owned by
            another rank), concatenated; batch ``b`` is
            ``remote_ids[remote_offsets[b]:remote_offsets[b + 1]]``.
        remote_offsets: int64 ``[num_batches + 1]``.
        digests: uint64 ``[num_batches]``, :func:`input_digest` of every batch's
            input ids (``blocks[0].src_global_ids``).
        num_inputs: int64 per batch, input rows (local and remote).
        num_local: int64 per batch, input rows this rank owns.
        count_ids: sorted distinct remote ids of the epoch.
        counts: int64, batches using each of ``count_ids``.
        schedule_s: seconds the schedule pass took (sampling included).
        input_ids: with ``keep_inputs``, every batch's sorted input ids (CSR by
            ``input_offsets``); else ``None``.
        input_offsets: offsets of ``input_ids``, or ``None``.
        blocks: with ``keep_blocks_bytes``, the sampled blocks of the first
            batches that fit the budget (``None`` past it, and for batches
            without seeds), so the prefetcher takes them instead of sampling
            again; else ``None``.
    """

    epoch: int
    rank: int
    seeds: tuple[Int64Array, ...]
    remote_ids: Int64Array
    remote_offsets: Int64Array
    digests: UInt64Array
    num_inputs: Int64Array
    num_local: Int64Array
    count_ids: Int64Array
    counts: Int64Array
    schedule_s: float
    input_ids: Int64Array | None = None
    input_offsets: Int64Array | None = None
    blocks: tuple[list[Block] | None, ...] | None = None

    @property
    def num_batches(self) -> int:
        """Global batches (= steps) in the epoch."""
        return len(self.seeds)

    @property
    def remote_accesses(self) -> int:
        """``A``: remote input rows over all batches."""
        return int(self.remote_ids.size)

    @property
    def distinct_remote(self) -> int:
        """``R``: distinct remote ids of the epoch."""
        return int(self.count_ids.size)

    @property
    def once_fraction(self) -> float:
        """Fraction of the distinct remote ids used by one batch only."""
        if self.counts.size == 0:
            return 0.0
        return float(np.count_nonzero(self.counts == 1) / self.counts.size)

    @property
    def nbytes(self) -> int:
        """Bytes held by the schedule's arrays (seeds and kept blocks included)."""
        arrays = [
            self.remote_ids,
            self.remote_offsets,
            self.digests,
            self.num_inputs,
            self.num_local,
            self.count_ids,
            self.counts,
            *self.seeds,
        ]
        if self.input_ids is not None and self.input_offsets is not None:
            arrays += [self.input_ids, self.input_offsets]
        kept = sum(
            block.nbytes() for blocks in self.blocks or () for block in blocks or ()
        )
        return int(sum(a.nbytes for a in arrays)) + kept

    def remote(self, batch_index: int) -> Int64Array:
        """Sorted unique remote input ids of batch ``batch_index`` (a view)."""
        start, stop = self.remote_offsets[batch_index : batch_index + 2]
        return self.remote_ids[start:stop]

    def inputs(self, batch_index: int) -> Int64Array:
        """Sorted input ids of a batch (only when built with ``keep_inputs``)."""
        if self.input_ids is None or self.input_offsets is None:
            raise OperatorError.build(
                "input ids",
                "EpochSchedule.inputs",
                "a schedule built with keep_inputs=True",
                "keep_inputs=False",
            )
        start, stop = self.input_offsets[batch_index : batch_index + 2]
        return self.input_ids[start:stop]

    def check(self, batch_index: int, input_ids: np.ndarray) -> None:
        """Raise unless ``input_ids`` are the scheduled inputs of the batch.

        Raises:
            OperatorError: naming the epoch, rank, batch and both digests.
        """
        got = input_digest(input_ids)
        expected = int(self.digests[batch_index])
        if got != expected:
            raise OperatorError.build(
                "input ids",
                f"epoch {self.epoch}, rank {self.rank}, batch {batch_index}",
                f"digest {expected:#018x} (the schedule's)",
                f"digest {got:#018x}",
                "the batch was sampled with another seed, epoch, batch index or "
                "graph than the schedule; every rank must build its sampler with "
                "rank=0 and the same seed",
            )


def build_schedule(
    sampler: NeighborSampler,
    seeds_per_batch: Sequence[np.ndarray],
    owner: np.ndarray,
    rank: int,
    epoch: int,
    *,
    keep_inputs: bool = False,
    keep_blocks_bytes: int = 0,
) -> EpochSchedule:
    """Sample every batch of the epoch once and record what it will read.

    By default blocks are not kept (``keep_blocks=False`` of the spec): the
    prefetcher samples each batch again and checks its digest. With
    ``keep_blocks_bytes`` the blocks of the first batches are kept up to that
    many bytes (spec §3.2 ``keep_blocks=True`` under a budget), so that work is
    not done twice.

    Args:
        sampler: the sampler, built with ``rank=0`` (the key must not depend on
            the rank, see the module docs).
        seeds_per_batch: this rank's seeds of every global batch
            (:func:`rank_batches`).
        owner: int array ``[num_nodes]``, the part of every vertex.
        rank: this rank (remote = owned by another part).
        epoch: the epoch number.
        keep_inputs: also keep every batch's input ids (for simulations).
        keep_blocks_bytes: bytes of sampled blocks to keep (0: none).

    Raises:
        OperatorError: when the sampler's rank is not 0.
    """
    if sampler.rank != 0:
        raise OperatorError.build(
            "sampler.rank",
            "build_schedule",
            "0 (batch keys independent of the rank)",
            str(sampler.rank),
            "build NeighborSampler(graph, config, seed) without rank=",
        )
    start = time.perf_counter()
    owner = np.asarray(owner)
    num = len(seeds_per_batch)
    remote_parts: list[np.ndarray] = []
    input_parts: list[np.ndarray] = []
    digests = np.empty(num, dtype=np.uint64)
    num_inputs = np.zeros(num, dtype=np.int64)
    num_local = np.zeros(num, dtype=np.int64)
    kept: list[list[Block] | None] = []
    kept_bytes = 0
    for b, seeds in enumerate(seeds_per_batch):
        blocks: list[Block] | None = None
        if len(seeds):
            blocks = sampler.sample(seeds, epoch, batch_index=b)
            inputs = blocks[0].src_global_ids  # distinct ids, in sampling order
            kept_bytes += sum(block.nbytes() for block in blocks)
        else:
            inputs = np.empty(0, dtype=np.int64)
        kept.append(blocks if kept_bytes <= keep_blocks_bytes else None)
        digests[b] = _set_digest(inputs)  # order-free: no sort needed
        local = owner[inputs] == rank
        num_inputs[b] = inputs.size
        num_local[b] = int(np.count_nonzero(local))
        # Only the remote ids need sorting (a batch's share, not its inputs).
        remote_parts.append(np.sort(inputs[~local]))
        if keep_inputs:
            input_parts.append(np.sort(inputs))
    offsets = np.zeros(num + 1, dtype=np.int64)
    np.cumsum([p.size for p in remote_parts], out=offsets[1:])
    remote_ids = (
        np.concatenate(remote_parts).astype(np.int64, copy=False)
        if remote_parts
        else np.empty(0, np.int64)
    )
    count_ids, counts = np.unique(remote_ids, return_counts=True)
    input_ids = input_offsets = None
    if keep_inputs:
        input_offsets = np.zeros(num + 1, dtype=np.int64)
        np.cumsum([p.size for p in input_parts], out=input_offsets[1:])
        input_ids = (
            np.concatenate(input_parts) if input_parts else np.empty(0, np.int64)
        )
    return EpochSchedule(
        epoch=int(epoch),
        rank=int(rank),
        seeds=tuple(np.asarray(s, dtype=np.int64) for s in seeds_per_batch),
        remote_ids=remote_ids,
        remote_offsets=offsets,
        digests=digests,
        num_inputs=num_inputs,
        num_local=num_local,
        count_ids=count_ids.astype(np.int64, copy=False),
        counts=counts.astype(np.int64, copy=False),
        schedule_s=time.perf_counter() - start,
        input_ids=input_ids,
        input_offsets=input_offsets,
        blocks=tuple(kept) if keep_blocks_bytes > 0 else None,
    )
