"""Gang worker functions of the distributed-trainer tests (module level: picklable)."""

from __future__ import annotations

from typing import Any

import torch

from engine.gang import GangContext
from operators.trainers.distributed.counters import TransferCounters
from operators.trainers.distributed.halo import HaloPlan, halo_exchange
from partition import PartitionBook


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
        counters.total("halo_send_rows", phase="fwd", peer=p)
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
