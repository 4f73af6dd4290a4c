"""Gang worker functions of the schedule-agreement test (module level: picklable)."""

from __future__ import annotations

import numpy as np

from strata.engine.gang import GangContext
from strata.operators.trainers.sampled.gang import _check_same_order


def derive(ctx: GangContext, seeds: list[int]) -> int:
    """Check the global batches one rank derives (from its own ``seed``)."""
    rng = np.random.default_rng(seeds[ctx.rank])
    batches = np.array_split(rng.permutation(100), 4)
    return _check_same_order(ctx, None, ctx.rank, 0, batches)
