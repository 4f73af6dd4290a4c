"""Task-data orchestration (TD-Orch push-pull) across a mesh of ranks.

* :mod:`~strata.operators.orchestration.plan`: group tasks by key, combine, decide
  push / pull per group (pure numpy) -> :class:`BatchPlan`;
* :mod:`~strata.operators.orchestration.tree`: the F-ary fan-out / merge tree for
  keys pulled by many ranks;
* :mod:`~strata.operators.orchestration.runtime`: run a plan on a
  :class:`~strata.engine.mesh.Mesh` (a key-value workload);
* :mod:`~strata.operators.orchestration.cost_model`: per-rank tasks, bytes, frames
  from plans (no run) or from a real run.

Spec: ``design/systems/tdorch.md``.
"""

from strata.operators.orchestration.plan import (
    BatchPlan,
    CombineOp,
    Decision,
    Groups,
    HashPush,
    PullAll,
    PushPull,
    Strategy,
    TaskKind,
    break_even_k,
    combine,
    decide,
    fold,
    group_by_key,
    hash_owner,
)

__all__ = [
    "BatchPlan",
    "CombineOp",
    "Decision",
    "Groups",
    "HashPush",
    "PullAll",
    "PushPull",
    "Strategy",
    "TaskKind",
    "break_even_k",
    "combine",
    "decide",
    "fold",
    "group_by_key",
    "hash_owner",
]
