"""Gang worker functions of the distributed-trainer tests (module level: picklable)."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import torch

from strata.engine.gang import GangContext, run_gang_report
from strata.operators.trainers.distributed.counters import Phase, TransferCounters
from strata.operators.trainers.distributed.halo import HaloPlan, halo_exchange
from strata.partition import PartitionBook


def exchange_halo(
    ctx: GangContext,
    book: PartitionBook,
    x: torch.Tensor,
    coeff: torch.Tensor,
    active: torch.Tensor | None,
) -> dict[str, Any]:
    """Exchange owned rows of ``x``; backprop ``sum(local * coeff[rank][local])``."""
    plan = HaloPlan.from_book(book, ctx.rank)
    if active is not None:
        plan = plan.restrict(active)
    owned = torch.from_numpy(book.owned_ids(ctx.rank))
    halo_ids = torch.from_numpy(book.halo(ctx.rank))
    x_owned = x[owned].clone().requires_grad_(True)
    counters = TransferCounters()
    halo = halo_exchange(x_owned, plan, counters=counters, layer=1)
    local = torch.cat([x_owned, halo])
    ids = torch.cat([owned, halo_ids])
    (local * coeff[ctx.rank][ids]).sum().backward()
    assert x_owned.grad is not None
    per_peer = [
        counters.total(phase=Phase.FWD, peer=p).halo_send_rows
        for p in range(ctx.world_size)
    ]
    return {
        "ids": ids,
        "local": local.detach(),
        "owned": owned,
        "grad": x_owned.grad,
        "counters": counters.end_epoch(),
        "per_peer": per_peer,
    }


def train_many(ctx: GangContext, runs: list[Any]) -> list[dict[str, Any]]:
    """Several distributed trainings, one after another, on one gang.

    Every run is a :class:`~strata.operators.trainers.distributed.inputs.WorkerInputs`
    of the same worker count; sharing the gang saves its start-up per run.
    """
    from strata.operators.trainers.distributed import train_worker

    return [train_worker(ctx, inputs) for inputs in runs]


def fit_on_one_gang(data: Any, trainers: list[Any]) -> list[Any]:
    """``trainer.fit(data)`` for each ``DistributedTrainer``, all on one gang.

    The trainers must have the same worker count; each run's inputs are built
    (and its shared segment released) exactly as ``fit`` does.
    """
    from strata.operators.trainers.data import as_training_data

    data = as_training_data(data, "fit_on_one_gang")
    k = trainers[0].dist.workers
    assert all(t.dist.workers == k for t in trainers)
    spec = dataclasses.replace(trainers[0]._spec(), name="shared-gang")
    with contextlib.ExitStack() as stack:
        inputs = []
        for trainer in trainers:
            trainer._check(data)
            inputs.append(stack.enter_context(trainer._inputs(data)))
        report = run_gang_report(train_many, spec, inputs).to_dict()
    out = []
    for i, (trainer, one) in enumerate(zip(trainers, inputs, strict=True)):
        gang = {**report, "results": [r[i] for r in report["results"]]}
        out.append(trainer._assemble(gang, one))
    return out
