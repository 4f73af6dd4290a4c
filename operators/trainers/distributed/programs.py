"""Layer programs: a model's layer as aggregate-then-finish over a local slice.

Derived from the layers' one definition
(:class:`~strata.operators.layers.message_passing.MessagePassing`), never from their
names. The single-device layers aggregate over a whole graph; a distributed worker
owns a slice (:class:`~strata.operators.trainers.distributed.local_graph.LocalGraph`)
whose coefficients the layer's aggregation computed on the whole graph, so it runs
each layer as two parts with the layer's own parameters:

* ``aggregate(slice, x, conv)``: the layer's messages of the slice's source rows
  ``x``, reduced per destination by the layer's aggregation;
* ``combine(conv, z, root)``: the layer's :meth:`MessagePassing.finish` (its
  ``transform``, ``root`` and ``update``), which needs only destination rows.

Linear aggregations of layers whose message is the identity also provide
``aggregate_t``, the transposed reduction, so chunked training can backpropagate a
cached aggregate without its input rows (``hongtu.md`` §3.5). Aggregating first
keeps the cached aggregate independent of the weights (``(A X) W`` equals the
layer's ``A (X W)`` up to float rounding).

Any :class:`MessagePassing` layer runs: GCN, SAGE (mean, sum, max, max-pool), GIN
and a user's own. Attention layers (GAT) need a distributed edge softmax and are
refused by name (:func:`program_for` says so).

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> from strata.operators.layers import GCN
    >>> from strata.operators.trainers.distributed.local_graph import PropagationGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    >>> model = GCN(4, 8, 2, num_layers=1)
    >>> x = torch.randn(3, 4)
    >>> program = program_for(model)
    >>> prop = PropagationGraph.build(g, program.aggregation)
    >>> local = prop.slice(np.arange(3), np.arange(3))
    >>> part = SliceTensors.of(local, torch.device("cpu"))
    >>> conv = model.convs[0]
    >>> y = program.combine(conv, program.aggregate(part, x, conv), x)
    >>> bool(torch.allclose(y, model(g, x), atol=1e-6))
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from strata.operators.errors import OperatorError
from strata.operators.kernels import DeviceGraph
from strata.operators.layers import BasicGNN
from strata.operators.layers.message_passing import (
    Aggregation,
    MessagePassing,
    Propagation,
    message_passing_layer,
)
from strata.operators.trainers.distributed.local_graph import LocalGraph

_WHERE = "DistributedTrainer"


@dataclass(frozen=True, slots=True, eq=False)
class SliceTensors:
    """A :class:`LocalGraph` as tensors on a device (the transpose on demand).

    Attributes:
        graph: the slice as a bipartite DeviceGraph (rows: destinations).
        values: per-edge coefficients, or None.
        row_scale: per-destination factor, or None.
        local: the numpy slice it came from.
        device: where the tensors live.
    """

    graph: DeviceGraph
    values: torch.Tensor | None
    row_scale: torch.Tensor | None
    local: LocalGraph
    device: torch.device

    @classmethod
    def of(cls, local: LocalGraph, device: torch.device) -> SliceTensors:
        """Move ``local`` to ``device``."""

        def tensor(a: Any) -> torch.Tensor | None:
            return None if a is None else torch.from_numpy(a).to(device)

        return cls(
            local.device_graph(device),
            tensor(local.values),
            tensor(local.row_scale),
            local,
            device,
        )

    @property
    def propagation(self) -> Propagation:
        """The slice as the aggregation reduces it."""
        return Propagation(self.graph, self.values, self.row_scale)

    def transposed(self) -> Propagation:
        """The transposed slice and its edge values (built once, cached)."""
        return self.graph.cached("distributed.transposed", self._transpose)

    def _transpose(self) -> Propagation:
        graph, order = self.local.transposed(self.device)
        values = None
        if self.values is not None:
            values = self.values[torch.from_numpy(order).to(self.device)]
        return Propagation(graph, values, None)

    @property
    def nbytes(self) -> int:
        """Topology and coefficient bytes (the transpose adds as much again)."""
        return self.local.nbytes


@dataclass(frozen=True, slots=True)
class LayerProgram:
    """How a model's layers aggregate and finish (see the module docstring).

    Attributes:
        aggregation: the layers' aggregation (every layer shares it).
        needs_root: whether ``combine`` reads the destinations' own input rows.
        identity_message: whether the layers send their input rows unchanged.
        work_units: the layers' ``finish`` temporaries per width (forward,
            backward), for HongTu's memory model.
    """

    aggregation: Aggregation
    needs_root: bool
    identity_message: bool
    work_units: tuple[tuple[int, int], tuple[int, int]]

    @property
    def kind(self) -> str:
        """The aggregation's accumulator kind (``gcn``, ``mean``, ``sum``, ``max``)."""
        return self.aggregation.name

    @property
    def linear(self) -> bool:
        """Whether a cached aggregate can be backpropagated by the transpose."""
        return self.aggregation.linear and self.identity_message

    def messages(self, conv: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        """The layer's messages of source rows ``x``."""
        return x if self.identity_message else _layer(conv).message(x)

    def aggregate(
        self,
        part: SliceTensors,
        x: torch.Tensor,
        conv: torch.nn.Module | None = None,
    ) -> torch.Tensor:
        """Reduce the messages of ``x`` (the slice's source rows) per destination.

        ``conv`` sends the messages; without it the rows themselves are sent,
        which is only right for layers whose message is the identity.
        """
        if conv is not None:
            x = self.messages(conv, x)
        elif not self.identity_message:
            raise OperatorError.build(
                "conv", "LayerProgram.aggregate", "the layer (its messages)", "None"
            )
        return self.aggregation.reduce(part.propagation, x)

    def aggregate_t(self, part: SliceTensors, dz: torch.Tensor) -> torch.Tensor:
        """The transposed reduction: a destination gradient to its source rows."""
        if not self.identity_message:
            raise OperatorError.build(
                "message",
                "LayerProgram.aggregate_t",
                "a layer that sends its input rows (identity message)",
                "a message transform",
                "backpropagate through the message: recompute (policy 'refetch')",
            )
        return self.aggregation.reduce_t(part.transposed(), part.row_scale, dz)

    def combine(
        self, conv: torch.nn.Module, z: torch.Tensor, root: torch.Tensor | None
    ) -> torch.Tensor:
        """The layer's output (before the activation) from ``z`` and ``root``."""
        return _layer(conv).finish(z, root)

    def layer(
        self,
        conv: torch.nn.Module,
        part: SliceTensors,
        x: torch.Tensor,
        root: torch.Tensor | None,
    ) -> torch.Tensor:
        """The whole layer (before the activation), in the cheaper order.

        The layer's own :meth:`MessagePassing.propagate` over the slice: a
        linear aggregation may run after the transform (``A (X W) == (A X) W``).
        """
        return _layer(conv).propagate(part.propagation, x, root)

    def work_bytes(self, num_dst: int, d_in: int, d_out: int, backward: bool) -> int:
        """A bound on ``combine``'s temporaries (and its backward's), in bytes.

        ``combine`` runs small dense work on destination rows; its intermediates
        live inside torch, so the arena counts this modelled bound for them.
        """
        units = self.work_units[1 if backward else 0]
        return 4 * num_dst * (units[0] * d_in + units[1] * d_out)


def _layer(conv: torch.nn.Module) -> MessagePassing:
    return message_passing_layer(conv, _WHERE)


def program_for(model: BasicGNN) -> LayerProgram:
    """The :class:`LayerProgram` of a built model, read off its layers' definition.

    Raises:
        OperatorError: for a layer that is not a :class:`MessagePassing` one, an
            attention layer, or layers that aggregate differently.
    """
    convs = [_layer(conv) for conv in model.convs]
    first = convs[0]
    for i, conv in enumerate(convs[1:], start=2):
        if conv.aggregation != first.aggregation or conv.uses_root != first.uses_root:
            raise OperatorError.build(
                f"layer {i}",
                _WHERE,
                f"the aggregation of layer 1 ({first.aggregation!r})",
                repr(conv.aggregation),
                "a partition-parallel model's layers share one propagation graph",
            )
    return LayerProgram(
        first.aggregation,
        needs_root=first.uses_root,
        identity_message=all(conv.sends_features for conv in convs),
        work_units=first.work_units,
    )


def layer_widths(model: BasicGNN) -> list[tuple[int, int]]:
    """``(d_in, d_out)`` of every layer."""
    widths = []
    width = model.in_channels
    for i in range(model.num_layers):
        out = model.out_channels if i == model.num_layers - 1 else model.hidden_channels
        widths.append((width, out))
        width = out
    return widths
