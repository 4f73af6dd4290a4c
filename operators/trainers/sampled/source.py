"""Where a trainer rank's sampled blocks come from: :class:`BlockSource`.

A sampled gang's trainer rank consumes, for every global batch of an epoch in
order, its seeds of that batch and their sampled blocks (:class:`SampledBlocks`).
:class:`LocalBlockSource` samples them in the rank itself (colocated, RapidGNN);
Armada's :class:`~strata.operators.trainers.sampled.armada.ArmadaSource` receives
them from sampler workers.

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> from strata.operators.samplers import NeighborSampler, SamplerConfig
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    >>> source = LocalBlockSource(NeighborSampler(g, SamplerConfig((2,)), seed=0))
    >>> items = list(source.epoch(0, [np.array([1]), np.array([], dtype=np.int64)]))
    >>> [(i.batch_index, i.blocks is None) for i in items]
    [(0, False), (1, True)]
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from strata.operators.samplers import Block, NeighborSampler

__all__ = ["BlockSource", "LocalBlockSource", "SampledBlocks"]


@dataclass(frozen=True, slots=True, eq=False)
class SampledBlocks:
    """One rank's part of one global batch: its seeds and their blocks.

    Attributes:
        epoch: the epoch.
        batch_index: the global batch's index in its epoch.
        seeds: the rank's seeds of the batch (possibly none).
        blocks: the sampled blocks, in layer order (``None`` without seeds).
        sample_s: seconds sampling took (where it happened).
    """

    epoch: int
    batch_index: int
    seeds: np.ndarray
    blocks: list[Block] | None
    sample_s: float = 0.0


class BlockSource(Protocol):
    """Where a trainer rank's sampled blocks come from."""

    def epoch(self, epoch: int, batches: list[np.ndarray]) -> Iterator[SampledBlocks]:
        """The rank's part of every global batch of ``epoch``, in order.

        ``batches`` are this rank's seeds per global batch (the source may
        sample them, or check that what it receives matches them).
        """
        ...

    def counters(self) -> dict[str, float]:
        """The source's own counters (e.g. seconds spent waiting on samplers)."""
        ...


class LocalBlockSource:
    """The colocated mode: the rank samples its seeds itself (rank-free keys).

    :meth:`adopt` hands it blocks the epoch's schedule pass kept
    (``EpochSchedule.blocks``): those batches are not sampled again.
    """

    def __init__(self, sampler: NeighborSampler) -> None:
        self.sampler = sampler
        self._kept: dict[int, Sequence[list[Block] | None]] = {}
        self.reused = 0

    def adopt(self, epoch: int, blocks: Sequence[list[Block] | None]) -> None:
        """Use ``blocks[b]`` (where not None) for batch ``b`` of ``epoch``."""
        self._kept[epoch] = blocks

    def epoch(self, epoch: int, batches: list[np.ndarray]) -> Iterator[SampledBlocks]:
        """Sample every batch of ``epoch`` as it is asked for (or take it kept)."""
        kept = self._kept.pop(epoch, ())
        for index, seeds in enumerate(batches):
            start = time.perf_counter()
            blocks = kept[index] if index < len(kept) else None
            if blocks is not None:
                self.reused += 1
            elif seeds.size:
                blocks = self.sampler.sample(seeds, epoch, index)
            yield SampledBlocks(
                epoch, index, seeds, blocks, time.perf_counter() - start
            )

    def counters(self) -> dict[str, float]:
        """How many batches came from the schedule's kept blocks (cumulative)."""
        return {"reused_blocks": float(self.reused)}
