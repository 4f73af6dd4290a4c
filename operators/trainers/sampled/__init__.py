"""Sampled (mini-batch) training: one device, or a gang over a partitioned store.

* :mod:`.trainer`: :class:`SampledTrainer`, sampled training in one process, fed
  by a background prefetcher.
"""

from strata.operators.trainers.sampled.trainer import (
    Batch,
    EvalMode,
    SampledTrainer,
    SamplingConfig,
    subgraph,
)

__all__ = ["Batch", "EvalMode", "SampledTrainer", "SamplingConfig", "subgraph"]
