"""Worker functions for the gang tests (a module of their own: workers import it).

Kept free of pytest so a forked worker imports only this module and what the fork
server already holds (torch, the engine).
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from typing import Any

import torch

from strata.engine.gang import (
    GangContext,
    GradientAllReducer,
    SharedTensors,
    broadcast_module,
)


def describe(ctx: GangContext) -> dict[str, Any]:
    return {
        "rank": ctx.rank,
        "world_size": ctx.world_size,
        "device": str(ctx.device),
        "backend": ctx.backend,
        "seed": ctx.seed,
        "threads": torch.get_num_threads(),
        "pid": os.getpid(),
        "draw": torch.rand(1).item(),  # seeded with ctx.seed before fn runs
        "env": os.environ.get("STRATA_TEST_VAR"),
    }


def collectives(ctx: GangContext, values: torch.Tensor) -> dict[str, Any]:
    """Each rank contributes row ``rank`` of ``values``."""
    mine = values[ctx.rank]
    gathered = ctx.all_gather(mine.clone())
    last = ctx.world_size - 1
    return {
        "sum": ctx.all_reduce(mine.clone(), "sum"),
        "mean": ctx.all_reduce(mine.clone(), "mean"),
        "max": ctx.all_reduce(mine.clone(), "max"),
        "min": ctx.all_reduce(mine.clone(), "min"),
        "broadcast": ctx.broadcast(mine.clone(), src=last),
        "gathered": torch.stack(gathered),
        "objects": ctx.all_gather_object({"rank": ctx.rank}),
    }


def count(ctx: GangContext, epochs: int) -> str:
    for epoch in range(epochs):
        ctx.metrics.add("rows", 10 * (ctx.rank + 1))
        ctx.metrics.counter("bytes").inc(100)
        ctx.metrics.peak("tensor_bytes", 1000 * (epoch + 1))
        ctx.metrics.append("epoch_loss", 1.0 / (epoch + 1))
        ctx.heartbeat(f"epoch {epoch + 1}/{epochs}")
        ctx.barrier()
    return f"rank {ctx.rank} done"


def shared_sum(ctx: GangContext, big: torch.Tensor) -> dict[str, Any]:
    """Reads a tensor argument; returns tensors (a state dict) to the parent."""
    return {
        "sum": big.sum().item(),
        "is_shared": big.is_shared(),
        "state": {"w": torch.full((3, 2), float(ctx.rank)), "b": torch.arange(3)},
    }


def fill_rows(ctx: GangContext, shared: SharedTensors) -> float:
    """Each rank writes its row of the shared output; returns the input's sum."""
    shared["out"][ctx.rank] = float(ctx.rank + 1)
    ctx.barrier()
    return float(shared["x"].sum().item())


def raise_on(ctx: GangContext, rank: int) -> None:
    if ctx.rank == rank:
        raise ValueError(f"bad input on rank {rank}")
    for _ in range(1000):
        ctx.barrier()  # the others wait in a collective for the failed rank


def kill_in_collective(
    ctx: GangContext, rank: int, after: int, shared: SharedTensors | None = None
) -> None:
    if shared is not None:
        shared["x"].add_(1.0)  # mapped in this worker, then the worker is killed
    for step in range(100_000):
        ctx.heartbeat(f"step {step}")
        if ctx.rank == rank and step == after:
            os.kill(os.getpid(), signal.SIGKILL)
        ctx.all_reduce(torch.ones(1000))


def sleep_on(ctx: GangContext, rank: int, seconds: float) -> int:
    ctx.heartbeat("about to sleep")
    if ctx.rank == rank:
        time.sleep(seconds)
    return ctx.rank


def beat_then_stall(ctx: GangContext, rank: int) -> None:
    for _ in range(2):
        ctx.heartbeat("working")
        time.sleep(0.25)
    if ctx.rank == rank:
        time.sleep(60)


def crash_on(ctx: GangContext, rank: int, how: str) -> None:
    if ctx.rank == rank:
        if how == "segfault":
            ctypes.string_at(0)  # reads address 0: SIGSEGV in native code
        os._exit(3)  # leaves without a word
    time.sleep(60)


def broadcast_weights(ctx: GangContext) -> dict[str, torch.Tensor]:
    torch.manual_seed(ctx.seed)  # a different initialisation on every rank
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    broadcast_module(model)
    return {k: v.clone() for k, v in model.state_dict().items()}


def reduce_grads(ctx: GangContext, grads: torch.Tensor, op: str) -> list[torch.Tensor]:
    """``grads[rank]`` holds this rank's gradients for two parameters."""
    params = [torch.nn.Parameter(torch.zeros(5, 3)), torch.nn.Parameter(torch.zeros(7))]
    params[0].grad = grads[ctx.rank, :15].reshape(5, 3).clone()
    params[1].grad = grads[ctx.rank, 15:].clone()
    GradientAllReducer(params, op=op).reduce()  # type: ignore[arg-type]
    return [p.grad for p in params if p.grad is not None]


def accumulate_compressed(
    ctx: GangContext, steps: int, checkpoints: list[int], compression: str
) -> dict[str, Any]:
    """Sum ``steps`` reductions of seeded gradients: exact, compressed with error
    feedback, and compressed without; report the relative gaps at checkpoints."""
    n = 1000
    base = torch.Generator().manual_seed(1234 + ctx.rank)
    fixed = torch.randn(n, generator=base) + 1.0  # a persistent bias per element
    reducers = {
        "exact": GradientAllReducer([], op="mean"),
        "feedback": GradientAllReducer([], op="mean", compression=compression),  # type: ignore[arg-type]
        "rounding": GradientAllReducer(
            [],
            op="mean",
            compression=compression,
            error_feedback=False,  # type: ignore[arg-type]
        ),
    }
    sums = {name: torch.zeros(n, dtype=torch.float64) for name in reducers}
    errors: dict[str, dict[int, float]] = {"feedback": {}, "rounding": {}}
    noise = torch.Generator().manual_seed(99 + ctx.rank)
    for step in range(1, steps + 1):
        grad = fixed + 0.01 * torch.randn(n, generator=noise)
        for name, reducer in reducers.items():
            reduced = grad.clone()
            reducer.reduce_tensors([reduced])
            sums[name] += reduced.double()
        if step in checkpoints:
            for name in errors:
                gap = (sums[name] - sums["exact"]).norm() / sums["exact"].norm()
                errors[name][step] = gap.item()
    worker, server = reducers["feedback"].residuals()
    owed = ctx.all_reduce(worker + server, "sum").double()
    return {
        "errors": errors,
        # sum(compressed) == sum(exact) - residuals owed, up to fp32 arithmetic
        "identity_gap": (sums["feedback"] - sums["exact"] + owed).abs().max().item(),
        "scale": sums["exact"].abs().max().item(),
        "payload_bytes": reducers["feedback"].payload_bytes,
        "exact_payload_bytes": reducers["exact"].payload_bytes,
    }


def train_share(ctx: GangContext, data: dict[str, Any], epochs: int) -> dict[str, Any]:
    """A pipeline gang step: sums this rank's share of ``data["x"]`` each epoch."""
    x = data["x"]
    for epoch in range(epochs):
        part = x[ctx.rank :: ctx.world_size].sum()
        total = ctx.all_reduce(part.clone())
        ctx.metrics.add("rows", x[ctx.rank :: ctx.world_size].numel())
        ctx.heartbeat(f"epoch {epoch}")
    return {"total": float(total.item()), "rank": ctx.rank}


def make_data(n: int) -> dict[str, torch.Tensor]:
    """A pipeline's data step."""
    return {"x": torch.arange(n, dtype=torch.float64)}


def summarize(train: dict[str, Any]) -> dict[str, Any]:
    """A pipeline step reading a gang step's output."""
    return {
        "totals": [r["total"] for r in train["results"]],
        "rows": [w["counters"]["rows"] for w in train["workers"]],
        "world_size": train["world_size"],
    }


def record_pid_then_sleep(ctx: GangContext, folder: str) -> None:
    """Leaves its pid in ``folder`` for a test to watch, then sleeps."""
    with open(os.path.join(folder, f"rank{ctx.rank}.pid"), "w") as file:
        file.write(str(os.getpid()))
    time.sleep(600)
