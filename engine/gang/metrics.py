"""Per-worker metrics: counters, peaks and per-epoch series, sent to the parent.

Each worker owns one :class:`WorkerMetrics` (``ctx.metrics``). The engine knows
nothing about what is counted: a trainer adds bytes moved host->device, halo rows
exchanged, seconds per epoch. Three shapes cover what training reports need:

* ``add(name, amount)`` / ``counter(name).inc(amount)``: a sum (bytes, rows);
  the same ``Counter`` interface as ``StepContext.metrics``;
* ``peak(name, value)``: a running maximum (peak tensor bytes);
* ``append(name, value)``: a series, one value per epoch or per step.

Every heartbeat carries a snapshot, so a failed gang still shows how far each rank
got; the final values come back in :class:`~strata.engine.gang.report.WorkerReport`.

Examples:
    >>> m = WorkerMetrics()
    >>> m.add("h2d_bytes", 4096)
    >>> m.counter("h2d_bytes").inc(1024)
    >>> m.peak("tensor_bytes", 10); m.peak("tensor_bytes", 7)
    >>> m.append("epoch_s", 0.5); m.append("epoch_s", 0.4)
    >>> m.to_dict()
    {'counters': {'h2d_bytes': 5120.0}, 'peaks': {'tensor_bytes': 10.0}, \
'series': {'epoch_s': [0.5, 0.4]}}
    >>> WorkerMetrics.from_dict(m.to_dict()) == m
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from strata.engine.metrics import Counter


@dataclass(slots=True)
class WorkerMetrics:
    """One worker's metrics (see the module docstring).

    Attributes:
        counters: Sums, by name.
        peaks: Running maxima, by name.
        series: Lists of values (one per epoch, say), by name.
    """

    counters: dict[str, float] = field(default_factory=dict)
    peaks: dict[str, float] = field(default_factory=dict)
    series: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, amount: float = 1.0) -> None:
        """Add ``amount`` to the counter ``name`` (created at zero)."""
        self.counters[name] = self.counters.get(name, 0.0) + float(amount)

    def counter(self, name: str) -> Counter:
        """Return the counter ``name``, as ``StepContext.metrics.counter`` does."""
        self.counters.setdefault(name, 0.0)
        return Counter(name, self.counters)

    def peak(self, name: str, value: float) -> None:
        """Keep the largest ``value`` seen under ``name``."""
        self.peaks[name] = max(self.peaks.get(name, float(value)), float(value))

    def append(self, name: str, value: float) -> None:
        """Append ``value`` to the series ``name``."""
        self.series.setdefault(name, []).append(float(value))

    def to_dict(self) -> dict[str, Any]:
        """Return the metrics as JSON-able data."""
        return {
            "counters": dict(self.counters),
            "peaks": dict(self.peaks),
            "series": {name: list(values) for name, values in self.series.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkerMetrics:
        """Rebuild metrics from :meth:`to_dict`."""
        return cls(
            dict(data.get("counters", {})),
            dict(data.get("peaks", {})),
            {name: list(values) for name, values in data.get("series", {}).items()},
        )
