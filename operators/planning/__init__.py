"""The planner: predict each training plan's epoch time and memory; choose one.

UniAP's idea on one machine: a cost model calibrated on this machine's measured
kernels weighs the ways to train the same model (full-graph in one process,
partition-parallel gangs, HongTu chunks, sampled mini-batches) and picks the
fastest that fits the memory budget. ``strata plan JOB`` prints the table and
why; ``plan=auto`` on a :class:`~strata.operators.trainers.TrainConfig` lets
the training step choose.

* :mod:`~strata.operators.planning.calibration`: measured kernel rates, cached;
* :mod:`~strata.operators.planning.shapes`: what each built layer declares;
* :mod:`~strata.operators.planning.workload`: graph statistics and per-layer
  operation counts;
* :mod:`~strata.operators.planning.candidates`: the plans;
* :mod:`~strata.operators.planning.cost_model`: counts x rates -> seconds, bytes;
* :mod:`~strata.operators.planning.planner`: the choice and its reasons;
* :mod:`~strata.operators.planning.runner`: running and measuring a plan;
* :mod:`~strata.operators.planning.auto`: the ``plan=auto`` training step.
"""

from strata.operators.planning.candidates import Candidate, PlanKind, candidates
from strata.operators.planning.cost_model import CostInputs, Prediction, predict
from strata.operators.planning.planner import (
    JobKind,
    PlannerConfig,
    PlanReport,
    plan_training,
)
from strata.operators.planning.workload import (
    GraphStats,
    LayerCounts,
    LayerSizes,
    epoch_counts,
    graph_stats,
    layer_counts,
)

__all__ = [
    "Candidate",
    "CostInputs",
    "GraphStats",
    "JobKind",
    "LayerCounts",
    "LayerSizes",
    "PlanKind",
    "PlanReport",
    "PlannerConfig",
    "Prediction",
    "candidates",
    "epoch_counts",
    "graph_stats",
    "layer_counts",
    "plan_training",
    "predict",
]
