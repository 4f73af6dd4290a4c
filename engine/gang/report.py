"""What a finished gang hands back: results in rank order, and a report per rank.

Examples:
    >>> from strata.engine.gang.metrics import WorkerMetrics
    >>> workers = tuple(
    ...     WorkerReport(rank, 100 + rank, "cpu", 0.05, 1.0, 1 << 20, None,
    ...                  WorkerMetrics(counters={"rows": 10.0 * (rank + 1)}))
    ...     for rank in range(2)
    ... )
    >>> report = GangReport("train", ["a", "b"], workers, "cpu", "gloo", 0.1, 1.2)
    >>> report.results, report.total("rows")
    (['a', 'b'], 30.0)
    >>> report.to_dict()["workers"][1]["counters"]
    {'rows': 20.0}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from strata.engine.gang.metrics import WorkerMetrics


@dataclass(frozen=True, slots=True)
class WorkerReport:
    """One rank's run.

    Attributes:
        rank: The rank.
        pid: Its process id.
        device: Its torch device (``"cpu"``, ``"cuda:1"``).
        startup_s: Seconds from the gang's launch until this rank joined the
            process group.
        wall_s: Seconds the worker function ran.
        peak_rss_bytes: The process's peak resident memory (``ru_maxrss``; a
            forked worker shares pages with the fork server, so this includes
            the preloaded libraries).
        peak_device_bytes: Peak CUDA memory allocated by torch on its device, or
            ``None`` on CPU (count CPU tensor bytes with ``metrics.peak``).
        metrics: The worker's own counters, peaks and series.
    """

    rank: int
    pid: int
    device: str
    startup_s: float
    wall_s: float
    peak_rss_bytes: int
    peak_device_bytes: int | None
    metrics: WorkerMetrics

    def to_dict(self) -> dict[str, Any]:
        """Return the report as JSON-able data (metrics flattened in)."""
        return {
            "rank": self.rank,
            "pid": self.pid,
            "device": self.device,
            "startup_s": round(self.startup_s, 6),
            "wall_s": round(self.wall_s, 6),
            "peak_rss_bytes": self.peak_rss_bytes,
            "peak_device_bytes": self.peak_device_bytes,
            **self.metrics.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class GangReport:
    """A finished gang.

    Attributes:
        name: The gang's name.
        results: What the worker function returned, one per rank, in rank order.
        workers: One :class:`WorkerReport` per rank, in rank order.
        device: ``"cpu"`` or ``"cuda"``.
        backend: The ``torch.distributed`` backend used.
        startup_s: Seconds from launch until every rank joined the process group.
        wall_s: Seconds from launch until every rank returned.
        startup_attempts: How many times the gang was started: more than one
            when joining the process group failed before any rank ran (a
            retried rendezvous, see ``GangSpec.startup_retries``).
    """

    name: str
    results: list[Any]
    workers: tuple[WorkerReport, ...]
    device: str
    backend: str
    startup_s: float
    wall_s: float
    startup_attempts: int = 1

    @property
    def world_size(self) -> int:
        """How many ranks ran."""
        return len(self.workers)

    def total(self, counter: str) -> float:
        """Sum one counter over every rank (0 where a rank never counted it)."""
        return sum(w.metrics.counters.get(counter, 0.0) for w in self.workers)

    def to_dict(self) -> dict[str, Any]:
        """Return results and reports as plain data (the pipeline step's output).

        Every value but ``results`` is JSON-able; ``results`` holds what the
        workers returned.
        """
        return {
            "name": self.name,
            "results": list(self.results),
            "workers": [w.to_dict() for w in self.workers],
            "world_size": self.world_size,
            "device": self.device,
            "backend": self.backend,
            "startup_s": round(self.startup_s, 6),
            "wall_s": round(self.wall_s, 6),
            "startup_attempts": self.startup_attempts,
        }
