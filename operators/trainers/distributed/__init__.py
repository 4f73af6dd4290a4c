"""Full-graph training across a gang of workers (issue 6; ``hongtu.md``, ``emma.md``).

* :class:`DistributedTrainer` (a pipeline step, like ``FullGraphTrainer``) with
  :class:`DistributedConfig`: a :class:`GangConfig`, a :class:`Level1Config` and
  the mode, one typed value (:mod:`.modes`): ``Exact()`` is partition-parallel
  training (:mod:`.partition_parallel`), ``HongTu(...)`` chunked training with
  host offload, deduplicated loading and a recompute-or-cache rule
  (:mod:`.chunked`), ``Emma(...)`` source chunking with moving aggregation
  (:mod:`.emma`). Exact and HongTu equal single-device training for any worker
  count; Emma is approximate.
* :mod:`.halo`: :class:`HaloPlan`, :func:`halo_exchange` (autograd all_to_all of
  boundary rows), :func:`all_to_all_rows`.
* dropout masks are counter-based (:mod:`strata.operators.trainers.dropout`),
  the same for every worker count and for the single-device trainer.
* :mod:`.counters`: :class:`TransferCounters` of typed :class:`Traffic` per
  epoch, :class:`Phase`, layer and peer.
* :mod:`.inputs`: the typed messages between the parent and its workers.

Example (starts a gang, so not a doctest)::

    from strata.storage import load_planetoid
    from strata.operators.trainers import ModelConfig, TrainConfig
    from strata.operators.trainers.distributed import (
        DistributedConfig, DistributedTrainer, GangConfig, HongTu)

    config = TrainConfig(ModelConfig("gcn"), epochs=20)
    dist = DistributedConfig(
        gang=GangConfig(workers=2), mode=HongTu(device_budget=8 << 20))
    run = DistributedTrainer(config, dist).fit(load_planetoid("cora"))
    run.result.test_accuracy, run.report["plan"]["chunks"]
"""

# torch.optim imports torch._dynamo (about 1 s) at the first optimizer it builds.
# Importing it with this package (only loaded for gangs) lets the fork server that
# preloads the workers' modules pay it once, not every worker.
import torch._dynamo  # noqa: F401

from strata.operators.trainers.distributed.config import (
    DistributedConfig,
    Fault,
    GangConfig,
    Level1,
    Level1Config,
)
from strata.operators.trainers.distributed.counters import (
    Phase,
    Traffic,
    TransferCounters,
)
from strata.operators.trainers.distributed.halo import (
    HaloPlan,
    all_to_all_rows,
    halo_exchange,
)
from strata.operators.trainers.distributed.inputs import WorkerInputs, WorkerResult
from strata.operators.trainers.distributed.modes import (
    CachePolicy,
    DistributedMode,
    Emma,
    Exact,
    HongTu,
    parse_mode,
)
from strata.operators.trainers.distributed.partition_parallel import (
    PartitionParallelEngine,
)
from strata.operators.trainers.distributed.trainer import (
    DistributedResult,
    DistributedTrainer,
    engine_for,
    train_worker,
)

__all__ = [
    "CachePolicy",
    "DistributedConfig",
    "DistributedMode",
    "DistributedResult",
    "DistributedTrainer",
    "Emma",
    "Exact",
    "Fault",
    "GangConfig",
    "HaloPlan",
    "HongTu",
    "Level1",
    "Level1Config",
    "PartitionParallelEngine",
    "Phase",
    "Traffic",
    "TransferCounters",
    "WorkerInputs",
    "WorkerResult",
    "all_to_all_rows",
    "engine_for",
    "halo_exchange",
    "parse_mode",
    "train_worker",
]
