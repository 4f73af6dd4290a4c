"""Sampled (mini-batch) training: one device, or a gang over a partitioned store.

* :mod:`.trainer`: :class:`SampledTrainer`, sampled training in one process, fed
  by a background prefetcher.
* :mod:`.distributed`: :class:`SampledGangTrainer`, data-parallel sampled
  training on a gang (:class:`SampledGangConfig`): a feature server per part,
  RapidGNN's schedule-driven cache (:mod:`.cache`, :mod:`.rows`) and prefetch,
  and Armada's sampler workers apart from the trainers (:mod:`.armada`).
* :mod:`.gang`: one trainer rank's loop, shared by both modes; its blocks come
  from a :mod:`.source`, its inputs and result are :mod:`.inputs`.
"""

from strata.operators.trainers.sampled.config import NetworkConfig, SampledGangConfig
from strata.operators.trainers.sampled.distributed import (
    SampledGangResult,
    SampledGangTrainer,
    gang_outputs,
)
from strata.operators.trainers.sampled.trainer import (
    Batch,
    EvalMode,
    SampledTrainer,
    SamplingConfig,
    subgraph,
)

__all__ = [
    "Batch",
    "EvalMode",
    "NetworkConfig",
    "SampledGangConfig",
    "SampledGangResult",
    "SampledGangTrainer",
    "SampledTrainer",
    "SamplingConfig",
    "gang_outputs",
    "subgraph",
]
