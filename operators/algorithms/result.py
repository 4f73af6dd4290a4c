"""What every algorithm returns: per-vertex values plus how the run went.

Examples:
    >>> import numpy as np
    >>> r = AlgorithmResult("bfs", np.array([0, 1, -1]), iterations=2, seconds=0.0)
    >>> r.to_dict()["iterations"], r.values.tolist()
    (2, [0, 1, -1])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True)
class AlgorithmResult:
    """Per-vertex values of one algorithm run, with its report.

    Attributes:
        algorithm: ``pagerank``, ``bfs``, ``sssp`` or ``cc``.
        values: one value per vertex (internal ids ``0..n-1``): float64 ranks, int64
            hop counts (``-1`` unreachable), float64 distances (``inf``
            unreachable) or int64 labels (smallest vertex id of the component).
        iterations: PageRank iterations, BFS levels, SSSP settled vertices, CC 1.
        seconds: wall time of the kernel (graph preparation excluded).
        extra: algorithm-specific report fields (``converged``, ``l1_change``, ...).
    """

    algorithm: str
    values: np.ndarray
    iterations: int
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (values excluded)."""
        return {
            "algorithm": self.algorithm,
            "iterations": self.iterations,
            "seconds": self.seconds,
            "num_nodes": int(self.values.shape[0]),
            **self.extra,
        }
