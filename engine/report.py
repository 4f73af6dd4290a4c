"""The JSON run report: what ran, how it went, what each step did, what it produced.

Examples:
    >>> report = RunReport(job="demo", executor="local", params={"n": 3}, status="ok")
    >>> sorted(report.to_dict())
    ['channels', 'checkpoint', 'error', 'executor', 'job', 'outputs', 'params', 'status', 'steps', 'wall_s']
    >>> import json
    >>> json.loads(report.to_json())["status"]
    'ok'
"""  # noqa: E501

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from strata.engine.config import ChannelBounds
from strata.engine.metrics import StepMetrics


@dataclass(frozen=True, slots=True)
class StepReport:
    """One step's counters, summed over its shards (wall time: the slowest shard).

    After a resume (``RunReport.checkpoint.resumes > 0``) the items, bytes, busy
    and blocked seconds and the operator's counters cover the whole run: what the
    checkpoint resumed from had counted, plus this run's work (items replayed after
    that checkpoint count once, as this run processed them). ``wall_s`` and the
    channel peaks cover this run only.
    """

    kind: str
    shards: int
    items_in: int
    items_out: int
    bytes_in: int
    bytes_out: int
    busy_s: float
    blocked_s: float
    wall_s: float
    counters: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_metrics(cls, kind: str, shards: int, metrics: StepMetrics) -> StepReport:
        """Build the row of one step from its merged metrics."""
        return cls(
            kind=kind,
            shards=shards,
            items_in=metrics.items_in,
            items_out=metrics.items_out,
            bytes_in=metrics.bytes_in,
            bytes_out=metrics.bytes_out,
            busy_s=round(metrics.busy_s, 6),
            blocked_s=round(metrics.blocked_s, 6),
            wall_s=round(metrics.wall_s, 6),
            counters=dict(metrics.counters),
        )


@dataclass(frozen=True, slots=True)
class ChannelReport:
    """A step's inbound channel: its bounds and the most it held (worst shard).

    On the process executor the peak is measured by the producers, as bytes sent but
    not yet taken by the consumer, summed over links: an upper bound of the true
    peak.
    """

    max_items: int
    max_bytes: int
    peak_items: int
    peak_bytes: int

    @classmethod
    def from_metrics(cls, bounds: ChannelBounds, metrics: StepMetrics) -> ChannelReport:
        """Build the row of one step's channel."""
        return cls(
            bounds.max_items, bounds.max_bytes, metrics.peak_items, metrics.peak_bytes
        )


@dataclass(frozen=True, slots=True)
class CheckpointReport:
    """What a run did with checkpoints (``RunReport.checkpoint``).

    Attributes:
        directory: The checkpoint directory.
        completed: Checkpoints this run completed.
        last: The id of the newest complete checkpoint this run wrote, if any.
        resumed_from: The checkpoint this run resumed from, if any.
        resumes: How many times the run resumed, counting this run and the runs
            before it that resumed (0: a fresh run). When above 0, the step
            counters cover the whole run (see :class:`StepReport`).
        bytes: State bytes written in the completed checkpoints.
        seconds: Time tasks spent taking and writing snapshots, summed over tasks.
        mean_latency_s: Mean time from a checkpoint's start to its completion.
    """

    directory: str
    completed: int = 0
    last: int | None = None
    resumed_from: int | None = None
    resumes: int = 0
    bytes: int = 0
    seconds: float = 0.0
    mean_latency_s: float = 0.0


@dataclass(frozen=True, slots=True)
class RunReport:
    """The record of one run, written by ``strata run --report PATH``.

    Attributes:
        job: The job file or module, or the pipeline's name.
        executor: ``local`` or ``process``.
        params: The job's parameters after ``--set`` overrides.
        status: ``ok``, ``failed`` (a step or the executor failed) or
            ``interrupted`` (Ctrl-C). ``strata run --report`` writes the report in
            every case; a run that ended without a result has no step rows.
        error: What went wrong, when ``status`` is not ``ok``.
        steps: Per step id, its :class:`StepReport`.
        channels: Per consuming step id, its :class:`ChannelReport`.
        outputs: The job's own results: the recorded steps' mappings, merged.
        wall_s: Seconds this run took (a resumed run: since it resumed).
        checkpoint: Checkpoint counts and sizes, and where and how often the run
            resumed, when the run checkpointed.
    """

    job: str
    executor: str
    params: Mapping[str, Any] = field(default_factory=dict)
    status: str = "ok"
    error: str | None = None
    steps: Mapping[str, StepReport] = field(default_factory=dict)
    channels: Mapping[str, ChannelReport] = field(default_factory=dict)
    outputs: Mapping[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    checkpoint: CheckpointReport | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the report as plain data."""
        return asdict(self)

    def to_json(self) -> str:
        """Return the report as indented JSON (numpy values become plain numbers)."""
        return json.dumps(self.to_dict(), indent=2, default=_plain)

    def write(self, path: str | Path) -> None:
        """Write the report as JSON to ``path``."""
        Path(path).write_text(self.to_json() + "\n")


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"not JSON-able: {type(value).__qualname__}")
