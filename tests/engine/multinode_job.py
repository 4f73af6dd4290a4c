"""A job with one gang step, for the multi-node tests (``strata run`` loads it).

``mode="hold"``: every rank all-reduces in a loop until ``seconds`` pass; rank
``ctx.rank`` writes ``<marker>/rank<r>`` once the gang runs, so a test knows when
to kill a node. ``mode="raise"``: rank ``fail_rank`` raises after one all-reduce.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from strata.engine import Pipeline
from strata.engine.gang import GangContext, GangSpec, gang_step


def hold(ctx: GangContext, marker: str, seconds: float, fail_rank: int) -> float:
    """All-reduce until ``seconds`` pass (or raise on ``fail_rank``)."""
    total = ctx.all_reduce(torch.ones(1)).item()
    if marker:
        Path(marker, f"rank{ctx.rank}").write_text("running")
    if ctx.rank == fail_rank:
        raise ValueError(f"rank {ctx.rank} fails on purpose")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        total += ctx.all_reduce(torch.ones(1)).item()
        time.sleep(0.01)
    return total


def summary(gang: dict[str, Any]) -> dict[str, Any]:
    """The ranks' results (every node must see all of them)."""
    return {"results": gang["results"], "world_size": gang["world_size"]}


def build(
    workers: int = 2,
    marker: str = "",
    seconds: float = 0.0,
    fail_rank: int = -1,
    timeout_s: float = 60.0,
) -> Pipeline:
    """One gang step of ``workers`` ranks, then its summary."""
    spec = GangSpec(
        workers=workers,
        device="cpu",
        timeout_s=timeout_s,
        startup_timeout_s=30,  # a stuck start fails before the test gives up
        name="hold",
    )
    p = Pipeline("multinode")
    p.step(
        "gang",
        gang_step(hold, spec),
        marker=marker,
        seconds=seconds,
        fail_rank=fail_rank,
    )
    p.step("summary", summary, "gang")
    p.record("summary")
    return p
