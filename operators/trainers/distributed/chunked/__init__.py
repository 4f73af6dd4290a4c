"""HongTu-style chunked full-graph training with host offload (``hongtu.md``).

* :mod:`.plan`: choose M from the memory model, plan the loads (parent side);
* :mod:`.steps`: a load plan as one worker's index arrays;
* :mod:`.host_store`: vertex data and activations in shared host memory;
* :mod:`.arena`: device-memory accounting (live bytes, high-water mark);
* :mod:`.transfer`: the only code that moves rows, and counts them;
* :mod:`.memory_model`: a worker's modelled peak for a plan;
* :mod:`.trainer`: :class:`ChunkedEngine`, one worker's epoch.
"""

from strata.operators.trainers.distributed.chunked.arena import ArenaError, DeviceArena
from strata.operators.trainers.distributed.chunked.plan import (
    ChunkPlanBuild,
    build_chunk_plan,
    choose_policies,
)
from strata.operators.trainers.distributed.chunked.trainer import ChunkedEngine

__all__ = [
    "ArenaError",
    "ChunkPlanBuild",
    "ChunkedEngine",
    "DeviceArena",
    "build_chunk_plan",
    "choose_policies",
]
