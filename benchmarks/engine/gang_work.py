"""Worker functions of the gang benchmark (its own module: workers import it).

``noop`` measures start-up alone. ``train_mlp`` is a fixed CPU workload, a
data-parallel MLP on synthetic rows: each rank takes ``1/W`` of the rows, and one
full-batch step per epoch ends in a gradient all-reduce, so 1 and 2 workers do the
same arithmetic and the 2-worker run adds one all-reduce per epoch.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from strata.engine.gang import GangContext, GradientAllReducer, broadcast_module

ROWS = 32_768
FEATURES = 128
HIDDEN = 256


def noop(ctx: GangContext) -> int:
    return ctx.rank


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, 1),
    )


def data() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(ROWS, FEATURES, generator=generator)
    return x, x[:, :4].sum(dim=1, keepdim=True)


def train_mlp(
    ctx: GangContext, x: torch.Tensor, y: torch.Tensor, epochs: int
) -> dict[str, Any]:
    torch.manual_seed(ctx.base_seed)
    model = broadcast_module(mlp())
    reducer = GradientAllReducer(model, op="sum")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    mine = slice(ctx.rank, None, ctx.world_size)
    x, y = x[mine].contiguous(), y[mine].contiguous()
    ctx.barrier()
    start = time.perf_counter()
    for epoch in range(epochs):
        loss = torch.nn.functional.mse_loss(model(x), y, reduction="sum") / ROWS
        loss.backward()
        reducer.reduce()
        optimizer.step()
        optimizer.zero_grad()
        ctx.heartbeat(f"epoch {epoch}")
    ctx.barrier()
    return {"epoch_s": (time.perf_counter() - start) / epochs, "loss": loss.item()}


def train_mlp_here(x: torch.Tensor, y: torch.Tensor, epochs: int) -> float:
    """The same epochs in this process, without a gang: seconds per epoch."""
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    start = time.perf_counter()
    for _ in range(epochs):
        loss = torch.nn.functional.mse_loss(model(x), y, reduction="sum") / ROWS
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return (time.perf_counter() - start) / epochs
