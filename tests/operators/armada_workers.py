"""Gang worker functions of the Armada tests (module level: picklable)."""

from __future__ import annotations

import functools
import os
import signal
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from strata.engine.gang import GangContext, GradientAllReducer, SharedTensors
from strata.operators.samplers.schedule import global_batches, rank_batches
from strata.operators.trainers.sampled.armada import (
    ArmadaPlan,
    ArmadaSource,
    armada_rank,
)
from strata.storage import CSRGraph


@dataclass(frozen=True)
class SharedData:
    """The arrays a sampler reads, in shared memory (what RankInputs offers)."""

    shared: SharedTensors
    num_nodes: int

    def array(self, name: str) -> np.ndarray:
        return self.shared[name].numpy()

    def graph(self) -> CSRGraph:
        return CSRGraph(
            indptr=self.array("graph.indptr"),
            indices=self.array("graph.indices"),
            num_nodes=self.num_nodes,
        )


def _collect(
    plan: ArmadaPlan,
    data: SharedData,
    kill_after: int | None,
    ctx: GangContext,
    source: ArmadaSource,
    group: Any,
) -> dict[str, Any]:
    trainer = source.trainer
    train_ids, rank_of = data.array("train_ids"), data.array("rank_of")
    units = []
    counters = []
    for epoch in range(plan.epochs):
        batches = global_batches(train_ids, plan.seed, epoch, plan.batch_size)
        for item in source.epoch(epoch, rank_batches(batches, rank_of, trainer)):
            blocks = [
                (b.indptr.copy(), b.indices.copy(), b.src_global_ids.copy(), b.num_dst)
                for b in item.blocks or []
            ]
            units.append((item.epoch, item.batch_index, item.seeds.copy(), blocks))
            if kill_after is not None and len(units) == kill_after:
                os.kill(_PIDS[_KILL[0]], signal.SIGKILL)
        counters.append(source.counters())
    # The trainers' group works beside the samplers: a plain sum and a reducer.
    total = torch.tensor([float(trainer + 1)])
    torch.distributed.all_reduce(total, group=group)
    model = torch.nn.Linear(2, 1)
    for p in model.parameters():
        p.grad = torch.full_like(p, float(trainer + 1))
    GradientAllReducer(model, op="sum", group=group).reduce()
    return {
        "trainer": trainer,
        "units": units,
        "counters": counters,
        "group_sum": float(total.item()),
        "reduced_grad": float(model.bias.grad.item()),  # type: ignore[union-attr]
    }


_PIDS: list[int] = []  # every rank's pid, gathered before the run
_KILL = [0]  # the rank trainer 0 kills


def collect_worker(
    ctx: GangContext,
    plan: ArmadaPlan,
    data: SharedData,
    kill_after: int | None = None,
    kill_rank: int = 0,
) -> Any:
    """Samplers sample; trainers return every unit they received, as arrays.

    With ``kill_after``, trainer 0 SIGKILLs gang rank ``kill_rank`` once it has
    received that many units (itself, when ``kill_rank`` is its own rank).
    """
    if kill_after is not None:
        _PIDS[:] = ctx.all_gather_object(os.getpid())
        _KILL[0] = kill_rank
        if ctx.rank != plan.layout.samplers:  # only trainer 0 kills
            kill_after = None
    train = functools.partial(_collect, plan, data, kill_after)
    return armada_rank(ctx, plan, data, train)
