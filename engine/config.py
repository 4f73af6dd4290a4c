"""Run configuration: channel bounds, seed, progress, shutdown limits, checkpoints.

Examples:
    >>> config = RunConfig(channel=ChannelBounds(max_items=4, max_bytes=1 << 20))
    >>> config.channel.max_items, config.seed
    (4, 0)
    >>> CheckpointConfig("ckpt", every_items=1000).keep
    2
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ChannelBounds:
    """How much one step's inbound channel may hold before producers block.

    A channel holds at most ``max_items`` items and at most ``max_bytes`` bytes of
    data (items report their own size: Arrow ``nbytes``, tensor and ndarray
    ``nbytes``, a small estimate for other objects). One item larger than
    ``max_bytes`` is still admitted when the channel is empty, so a stream of
    oversized items flows one at a time instead of deadlocking.

    The bound is per consuming task (one per shard). On the process executor it is
    split evenly between the links feeding the task (one per producer task), each
    link getting at least one item of credit, and the oversized-item exception
    applies per idle link rather than per empty channel.
    """

    max_items: int = 8
    max_bytes: int = 64 << 20

    def __post_init__(self) -> None:
        if self.max_items < 1 or self.max_bytes < 1:
            msg = (
                f"ChannelBounds: expected max_items >= 1 and max_bytes >= 1, got {self}"
            )
            raise ValueError(msg)


@dataclass(frozen=True, slots=True)
class CheckpointConfig:
    """When and where a streaming run checkpoints (see :mod:`strata.engine.checkpoint`).

    A checkpoint starts after ``every_items`` items emitted by one source since the
    previous checkpoint, or ``interval_s`` seconds after the previous one started,
    whichever comes first; give at least one of the two.

    Attributes:
        directory: Where checkpoints live (created if missing); one run's directory.
        every_items: Start a checkpoint after this many items from a source.
        interval_s: Start a checkpoint at least this often (seconds).
        keep: How many complete checkpoints to keep (older ones are deleted).
    """

    directory: str | Path
    every_items: int | None = None
    interval_s: float | None = None
    keep: int = 2

    def __post_init__(self) -> None:
        problems = []
        if self.every_items is None and self.interval_s is None:
            problems.append("every_items or interval_s (at least one)")
        if self.every_items is not None and self.every_items < 1:
            problems.append(f"every_items >= 1 (got {self.every_items})")
        if self.interval_s is not None and not (
            self.interval_s > 0 and math.isfinite(self.interval_s)
        ):
            problems.append(f"interval_s > 0 (got {self.interval_s})")
        if self.keep < 1:
            problems.append(f"keep >= 1 (got {self.keep})")
        if problems:
            msg = f"CheckpointConfig: expected {'; '.join(problems)}"
            raise ValueError(msg)


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Options shared by every executor.

    Attributes:
        channel: Bounds of every step's inbound channel.
        seed: Base seed; each task gets ``StepContext.seed`` derived from it, the
            step id and the shard, so seeds match across executors.
        progress: Show tqdm progress bars (the CLI turns this on only when stderr
            is a terminal and ``--quiet`` is absent).
        stop_timeout_s: After a failure, how long to wait for steps to stop
            before worker processes are terminated.
        checkpoint: Checkpoint streaming state at barriers (``None``: never).
        resume: Continue from the last complete checkpoint in
            ``checkpoint.directory`` (from the start when there is none).
    """

    channel: ChannelBounds = field(default_factory=ChannelBounds)
    seed: int = 0
    progress: bool = False
    stop_timeout_s: float = 1.0
    checkpoint: CheckpointConfig | None = None
    resume: bool = False

    def __post_init__(self) -> None:
        if self.resume and self.checkpoint is None:
            msg = (
                "RunConfig: expected checkpoint=CheckpointConfig(...) with resume=True"
            )
            raise ValueError(msg)
