"""Full-graph training across a gang of workers (issue 6; ``hongtu.md``).

* :class:`DistributedTrainer` (a pipeline step, like ``FullGraphTrainer``) with
  :class:`DistributedConfig`: ``mode="exact"`` is partition-parallel training
  (:mod:`.partition_parallel`), ``mode="hongtu"`` chunked training with host
  offload, deduplicated loading and a recompute-or-cache rule (:mod:`.chunked`).
  Both equal single-device training for any worker count.
* :mod:`.halo`: :class:`HaloPlan`, :func:`halo_exchange` (autograd all_to_all of
  boundary rows), :func:`all_to_all_rows` -- the module the Emma option builds on.
* :mod:`.dropout`: counter-based dropout masks, the same for every worker count;
  :class:`CounterDropoutTrainer` is the single-device oracle using them.
* :mod:`.counters`: :class:`TransferCounters` (bytes and rows per epoch, phase,
  layer, peer).

Example (starts a gang, so not a doctest)::

    from strata.storage import load_planetoid from strata.operators.trainers import
    ModelConfig, TrainConfig from strata.operators.trainers.distributed import
    DistributedConfig, DistributedTrainer

    config = TrainConfig(ModelConfig("gcn"), epochs=20)
    dist = DistributedConfig(workers=2, mode="hongtu", device_budget=8 << 20)
    run = DistributedTrainer(config, dist).fit(load_planetoid("cora"))
    run.result.test_accuracy, run.report["plan"]["chunks"]
"""

from strata.operators.trainers.distributed.config import (
    CachePolicy,
    DistributedConfig,
    Fault,
    Level1,
    Mode,
)
from strata.operators.trainers.distributed.counters import TransferCounters
from strata.operators.trainers.distributed.dropout import counter_dropout, keep_mask
from strata.operators.trainers.distributed.halo import (
    HaloPlan,
    all_to_all_rows,
    halo_exchange,
)
from strata.operators.trainers.distributed.partition_parallel import (
    PartitionParallelEngine,
)
from strata.operators.trainers.distributed.reference import CounterDropoutTrainer
from strata.operators.trainers.distributed.trainer import (
    ENGINES,
    DistributedResult,
    DistributedTrainer,
    train_worker,
)

__all__ = [
    "ENGINES",
    "CachePolicy",
    "CounterDropoutTrainer",
    "DistributedConfig",
    "DistributedResult",
    "DistributedTrainer",
    "Fault",
    "HaloPlan",
    "Level1",
    "Mode",
    "PartitionParallelEngine",
    "TransferCounters",
    "all_to_all_rows",
    "counter_dropout",
    "halo_exchange",
    "keep_mask",
    "train_worker",
]
