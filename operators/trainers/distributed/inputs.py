"""What every worker of a distributed run receives: :class:`WorkerInputs`.

The parent builds the run's arrays once, before the gang starts, and places them
in one shared-memory segment (:class:`strata.engine.gang.SharedTensors`): features,
labels, split masks, the partition book, the propagation graph and, for HongTu,
the host store and the chunk plans. Workers receive a small picklable
:class:`WorkerInputs` and map the segment, so nothing graph-sized is pickled
per worker. Arrays are named ``"<group>.<name>"``; :meth:`WorkerInputs.arrays`
returns one group as numpy views.

Examples:
    >>> import numpy as np
    >>> from strata.engine.gang import SharedTensors
    >>> shared = SharedTensors.from_arrays(prefixed("book.", {"owner": np.zeros(3)}))
    >>> sorted(group(shared, "book."))
    ['owner']
    >>> shared.close()
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from strata.engine.gang import SharedTensors
from strata.operators.trainers.config import TrainConfig
from strata.operators.trainers.distributed.config import DistributedConfig


def prefixed(prefix: str, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``arrays`` with every name prefixed."""
    return {prefix + name: array for name, array in arrays.items()}


def group(shared: Mapping[str, Any], prefix: str) -> dict[str, np.ndarray]:
    """The arrays named ``prefix...`` (prefix removed), as numpy views."""
    return {
        name[len(prefix) :]: shared[name].numpy()
        for name in shared
        if name.startswith(prefix)
    }


@dataclass(frozen=True, slots=True)
class WorkerInputs:
    """The run as a worker sees it (small; the arrays are in ``shared``).

    Attributes:
        shared: the run's shared segment (features ``x``, labels ``y``, masks
            ``mask.<split>``, ``book.*``, ``prop.*``, HongTu's store and plans).
        config: model, optimiser, epochs, seed.
        dist: the distributed settings.
        num_nodes: vertices of the graph.
        num_features: input width.
        num_classes: output width.
        split_nodes: global node count per split (``train``, ``val``, ``test``).
        extra: mode-specific metadata (HongTu: the chunk plan summary).
    """

    shared: SharedTensors
    config: TrainConfig
    dist: DistributedConfig
    num_nodes: int
    num_features: int
    num_classes: int
    split_nodes: dict[str, int]
    extra: dict[str, Any] = field(default_factory=dict)

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """One group of shared arrays as numpy views (see :func:`group`)."""
        return group(self.shared, prefix)
