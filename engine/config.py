"""Run configuration: channel bounds, seed, progress and shutdown limits.

Examples:
    >>> config = RunConfig(channel=ChannelBounds(max_items=4, max_bytes=1 << 20))
    >>> config.channel.max_items, config.seed
    (4, 0)
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
    """

    channel: ChannelBounds = field(default_factory=ChannelBounds)
    seed: int = 0
    progress: bool = False
    stop_timeout_s: float = 1.0
