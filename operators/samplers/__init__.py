"""Neighbour samplers: per-layer blocks, reproducible for a (seed, epoch, batch)."""

from strata.operators.samplers.block import Block, Hop
from strata.operators.samplers.neighbor import (
    NeighborSampler,
    SamplerConfig,
    check_fanouts,
)
from strata.operators.samplers.rng import batch_key
from strata.operators.samplers.schedule import (
    EpochSchedule,
    TrainSplit,
    balanced_train_ids,
    build_schedule,
    global_batches,
    input_digest,
    rank_batches,
)

__all__ = [
    "Block",
    "EpochSchedule",
    "Hop",
    "NeighborSampler",
    "SamplerConfig",
    "TrainSplit",
    "balanced_train_ids",
    "batch_key",
    "build_schedule",
    "check_fanouts",
    "global_batches",
    "input_digest",
    "rank_batches",
]
