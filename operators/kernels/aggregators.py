"""The aggregator registry: small named reducers that layers look up by name.

Layers take ``aggr="mean"`` (etc.) and resolve it here, so adding a reducer is one
registry entry, not a change to every layer (STYLE.md: aggregators come from a small
dict registry, as PyG's ``aggr`` strings do).

Examples:
    >>> get_aggregator("mean")
    MeanAggregation()
    >>> sorted(AGGREGATORS)
    ['max', 'mean', 'sum']
"""

from __future__ import annotations

import torch

from strata.operators.errors import OperatorError
from strata.operators.kernels.aggregate import aggregate
from strata.operators.kernels.device_graph import DeviceGraph


class Aggregation:
    """Reduces in-neighbour features; subclasses name the reduction.

    Attributes:
        reduce: the :func:`strata.operators.kernels.aggregate` reduction.
        linear: whether the reduction commutes with a linear map (sum and mean
            do, max does not), so a layer may transform before aggregating.
    """

    reduce = "sum"
    linear = True

    def __call__(self, graph: DeviceGraph, x: torch.Tensor) -> torch.Tensor:
        """Aggregate ``x`` (``[num_src, ...]``) into ``[num_dst, ...]``."""
        return aggregate(graph, x, self.reduce)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class SumAggregation(Aggregation):
    """Sum of in-neighbour features."""

    reduce = "sum"


class MeanAggregation(Aggregation):
    """Mean of in-neighbour features (zeros without in-edges)."""

    reduce = "mean"


class MaxAggregation(Aggregation):
    """Feature-wise max of in-neighbour features (zeros without in-edges)."""

    reduce = "max"
    linear = False


AGGREGATORS: dict[str, type[Aggregation]] = {
    "sum": SumAggregation,
    "mean": MeanAggregation,
    "max": MaxAggregation,
}


def get_aggregator(name: str, where: str = "get_aggregator") -> Aggregation:
    """Look up an aggregator by name.

    Raises:
        OperatorError: for a name not in :data:`AGGREGATORS`.
    """
    try:
        return AGGREGATORS[name]()
    except KeyError:
        raise OperatorError.build(
            "aggr", where, f"one of {sorted(AGGREGATORS)}", repr(name)
        ) from None
