"""Neighbour samplers: per-layer blocks, reproducible for a (seed, epoch, batch).

Homogeneous graphs: :class:`NeighborSampler` into :class:`Block` s; typed graphs:
:class:`TypedNeighborSampler` into :class:`TypedBlock` s.
"""

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
from strata.operators.samplers.typed import (
    TypedBlock,
    TypedNeighborSampler,
    full_blocks,
    full_graph_block,
)

__all__ = [
    "Block",
    "EpochSchedule",
    "Hop",
    "NeighborSampler",
    "SamplerConfig",
    "TrainSplit",
    "TypedBlock",
    "TypedNeighborSampler",
    "balanced_train_ids",
    "batch_key",
    "build_schedule",
    "check_fanouts",
    "full_blocks",
    "full_graph_block",
    "global_batches",
    "input_digest",
    "rank_batches",
]
