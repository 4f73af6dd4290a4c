"""Single-device GNN trainers as pipeline steps (streaming operators).

* :class:`FullGraphTrainer`: the whole graph per epoch (Kipf & Welling's procedure).
* :class:`SampledTrainer`: mini-batches of sampled blocks, features gathered from a
  :class:`~strata.storage.FeatureStore` by a background prefetch thread.
* Configuration: :class:`TrainConfig`, :class:`ModelConfig`, :class:`SamplingConfig`,
  :class:`Monitor`, :class:`DecayScope`, :class:`EvalMode`.
* Records: :class:`EpochRecord`, :class:`TrainResult`; data: :class:`TrainingData`.
* :func:`counter_dropout`: full-graph dropout whose masks are keyed by (seed,
  epoch, layer, node id), the same on one device as on any number of workers.

Both trainers emit one record per epoch on port ``epochs`` and the result on port
``result`` (see :mod:`strata.operators.trainers.base`).
"""

from strata.operators.trainers.base import Trainer
from strata.operators.trainers.config import (
    DecayScope,
    ModelConfig,
    Monitor,
    TrainConfig,
)
from strata.operators.trainers.data import TrainingData, as_training_data
from strata.operators.trainers.dropout import counter_dropout
from strata.operators.trainers.early_stopping import EarlyStopping
from strata.operators.trainers.full_graph import FullGraphTrainer
from strata.operators.trainers.inference import layerwise_inference
from strata.operators.trainers.prefetch import Prefetcher, epoch_order
from strata.operators.trainers.records import TIMING_KEYS, EpochRecord, TrainResult
from strata.operators.trainers.sampled import EvalMode, SampledTrainer, SamplingConfig

__all__ = [
    "TIMING_KEYS",
    "DecayScope",
    "EarlyStopping",
    "EpochRecord",
    "EvalMode",
    "FullGraphTrainer",
    "ModelConfig",
    "Monitor",
    "Prefetcher",
    "SampledTrainer",
    "SamplingConfig",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "TrainingData",
    "as_training_data",
    "counter_dropout",
    "epoch_order",
    "layerwise_inference",
]
