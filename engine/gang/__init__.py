"""Worker gangs: N processes running one function under ``torch.distributed``.

A training step asks for a gang (:class:`GangSpec`: how many workers, which
device kind, which timeouts); the engine starts the workers as local processes
from a fork server with torch preloaded, joins them into a process group (gloo on
CPU, NCCL on CUDA, one process per GPU; rendezvous through a ``TCPStore`` the
parent hosts on 127.0.0.1), runs ``fn(ctx, *args, **kwargs)`` on every rank and
returns the results in rank order. If a worker raises, dies or times out, every
other worker is stopped and a :class:`GangError` names the rank, its pid and what
happened; it never hangs. CPU processes stand in for GPUs on machines without
any: the code path is the same but for the backend and device.

==========================  ===================================================
name                        what it is
==========================  ===================================================
:class:`GangSpec`           the request (frozen); ``placement()`` resolves it
:func:`run_gang`            run a function on a gang; results in rank order
:func:`run_gang_report`     the same, plus each rank's times and metrics
:class:`GangContext`        what the function gets: rank, device, collectives,
                            ``heartbeat``, ``metrics``, seeds
:func:`gang_step`           a gang as a pipeline step (both executors)
:func:`local_gang`          one rank in this process (no process started)
:class:`SharedTensors`      large inputs / output buffers in shared memory
:class:`GradientAllReducer` gradient sum/mean, optionally bf16/fp16 with error
                            feedback
:func:`broadcast_module`    rank 0's weights to every rank
:class:`GangError`          the failure, naming ranks (``.rank``, ``.pid``)
:class:`NodeGroup`          this process's node of a job launched on several
                            (``strata run --nnodes``, torchrun): each gang
                            starts this node's share of its ranks
==========================  ===================================================

The engine knows nothing about graphs: a trainer passes handles (tensors,
``SharedTensors``, a partition book's arrays) and counts what it moves in
``ctx.metrics``.

Example (a data-parallel worker; starts processes, so not a doctest)::

    import torch
    from strata.engine.gang import (
        GangContext, GangSpec, GradientAllReducer, SharedTensors,
        broadcast_module, run_gang_report,
    )

    def train(ctx: GangContext, data: SharedTensors, epochs: int) -> dict:
        mine = slice(ctx.rank, None, ctx.world_size)      # this rank's rows
        x, y = data["x"][mine], data["y"][mine]
        model = broadcast_module(torch.nn.Linear(x.shape[1], 1))
        reducer = GradientAllReducer(model)               # mean over ranks
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(epochs):
            loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
            loss.backward()
            reducer.reduce()
            opt.step(); opt.zero_grad()
            ctx.metrics.append("loss", loss.item())
            ctx.heartbeat(f"epoch {epoch + 1}/{epochs}")
        return {"state": model.state_dict()} if ctx.is_main else {}

    if __name__ == "__main__":            # workers re-import this script
        with SharedTensors.from_arrays({"x": x, "y": y}) as data:
            report = run_gang_report(train, GangSpec(workers=2), data, epochs=20)
        state = report.results[0]["state"]
        losses = report.workers[0].metrics.series["loss"]

Examples:
    >>> spec = GangSpec(workers=2, device="cpu", timeout_s=60)
    >>> spec.placement().backend
    'gloo'
"""

from strata.engine.gang.allreduce import (
    Compression,
    GradientAllReducer,
    broadcast_module,
)
from strata.engine.gang.cluster import NodeGroup
from strata.engine.gang.context import GangContext, ReduceOp, rank_seed, seed_everything
from strata.engine.gang.errors import FailureKind, GangError, WorkerFailure
from strata.engine.gang.launcher import run_gang, run_gang_report
from strata.engine.gang.local import local_gang
from strata.engine.gang.metrics import WorkerMetrics
from strata.engine.gang.report import GangReport, WorkerReport
from strata.engine.gang.shared import SharedTensors
from strata.engine.gang.spec import GangPlacement, GangSpec
from strata.engine.gang.step import GangStep, gang_step

__all__ = [
    "Compression",
    "FailureKind",
    "GangContext",
    "GangError",
    "GangPlacement",
    "GangReport",
    "GangSpec",
    "GangStep",
    "GradientAllReducer",
    "NodeGroup",
    "ReduceOp",
    "SharedTensors",
    "WorkerFailure",
    "WorkerMetrics",
    "WorkerReport",
    "broadcast_module",
    "gang_step",
    "local_gang",
    "rank_seed",
    "run_gang",
    "run_gang_report",
    "seed_everything",
]
