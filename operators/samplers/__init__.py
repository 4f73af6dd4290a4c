"""Neighbour samplers: per-layer blocks, reproducible for a (seed, epoch, batch)."""

from strata.operators.samplers.block import Block, Hop
from strata.operators.samplers.neighbor import (
    NeighborSampler,
    SamplerConfig,
    check_fanouts,
)
from strata.operators.samplers.rng import batch_key

__all__ = [
    "Block",
    "Hop",
    "NeighborSampler",
    "SamplerConfig",
    "batch_key",
    "check_fanouts",
]
