"""Layer programs: a model's layer as aggregate-then-combine over a local slice.

The single-device layers (:mod:`strata.operators.layers`) aggregate over a whole graph
and normalise with that graph's degrees. A distributed worker instead owns a
slice (:class:`~strata.operators.trainers.distributed.local_graph.LocalGraph`) whose
coefficients were computed globally, so it runs each layer as two parts using
the layer's own parameters:

* ``aggregate(slice, x)``: the per-destination reduction (GCN-weighted sum,
  mean, sum or max) of the slice's source rows ``x``;
* ``combine(conv, z, root)``: the vertex-local rest (the dense transform, the
  root term of SAGE and GIN, GIN's MLP), which needs only destination rows.

Linear aggregations also provide ``aggregate_t``, the transposed reduction, so
chunked training can backpropagate a cached aggregate without its input rows
(``hongtu.md`` §3.5). GCN aggregates first: ``(A X) W`` equals the layer's
``A (X W)`` up to float rounding, and keeps the cached aggregate independent of
the weights.

Supported: ``gcn``, ``sage`` (mean, sum, max), ``gin``. GAT needs an edge
softmax over the slice and is not wired in (:func:`program_for` says so).

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> from strata.operators.layers import GCN
    >>> from strata.operators.trainers.distributed.local_graph import PropagationGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    >>> model = GCN(4, 8, 2, num_layers=1)
    >>> x = torch.randn(3, 4)
    >>> program = program_for(model)
    >>> part = SliceTensors.of(PropagationGraph.build(g, "gcn").slice(
    ...     np.arange(3), np.arange(3)), torch.device("cpu"))
    >>> y = program.combine(model.convs[0], program.aggregate(part, x), x)
    >>> bool(torch.allclose(y, model(g, x), atol=1e-6))
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

import torch
import torch.nn.functional as F

from strata.operators.errors import OperatorError
from strata.operators.kernels import DeviceGraph, aggregate, aggregate_first, spmm
from strata.operators.layers import BasicGNN
from strata.operators.trainers.distributed.local_graph import LocalGraph

#: Models a distributed trainer runs.
MODELS = ("gcn", "sage", "gin")
_WHERE = "DistributedTrainer"


class _Linear(Protocol):
    """What this module reads of a conv's dense transform (torch's or PyG's)."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    in_features: int
    out_features: int

    def __call__(self, x: torch.Tensor) -> torch.Tensor: ...


class _GCNConv(Protocol):
    lin: _Linear
    bias: torch.Tensor | None


class _SAGEConv(Protocol):
    lin_l: _Linear
    lin_r: _Linear | None
    normalize: bool


class _GINConv(Protocol):
    nn: Callable[[torch.Tensor], torch.Tensor]
    eps: torch.Tensor


# ``nn.Module.__getattr__`` types every submodule and parameter as
# ``Tensor | Module``; these casts name what PyG's GCNConv, SAGEConv and GINConv
# hold (``program_for`` admits only those models), without a runtime check.
def _gcn(conv: torch.nn.Module) -> _GCNConv:
    return cast(_GCNConv, conv)


def _sage(conv: torch.nn.Module) -> _SAGEConv:
    return cast(_SAGEConv, conv)


def _gin(conv: torch.nn.Module) -> _GINConv:
    return cast(_GINConv, conv)


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

    def transposed(self) -> tuple[DeviceGraph, torch.Tensor | None]:
        """The transposed graph and its edge values (built once, cached)."""
        return self.graph.cached("distributed.transposed", self._transpose)

    def _transpose(self) -> tuple[DeviceGraph, torch.Tensor | None]:
        graph, order = self.local.transposed(self.device)
        values = None
        if self.values is not None:
            values = self.values[torch.from_numpy(order).to(self.device)]
        return graph, values

    @property
    def nbytes(self) -> int:
        """Topology and coefficient bytes (the transpose adds as much again)."""
        return self.local.nbytes


@dataclass(frozen=True, slots=True)
class LayerProgram:
    """How one model's layers aggregate and combine (see the module docstring).

    Attributes:
        model: ``gcn``, ``sage`` or ``gin``.
        kind: the propagation kind (``gcn``, ``mean``, ``sum`` or ``max``).
        needs_root: whether ``combine`` reads the destinations' own input rows.
    """

    model: str
    kind: str
    needs_root: bool

    @property
    def linear(self) -> bool:
        """Whether the aggregation is linear (it has a transpose; it can be cached)."""
        return self.kind != "max"

    def aggregate(self, part: SliceTensors, x: torch.Tensor) -> torch.Tensor:
        """Reduce ``x`` (the slice's source rows) per destination."""
        if self.kind == "max":
            return aggregate(part.graph, x, "max")
        z = spmm(part.graph, x, part.values)
        if part.row_scale is not None:
            z = z * part.row_scale.unsqueeze(1)
        return z

    def aggregate_t(self, part: SliceTensors, dz: torch.Tensor) -> torch.Tensor:
        """The transposed reduction: a destination gradient to its source rows."""
        if not self.linear:
            raise OperatorError.build(
                "aggregation",
                "LayerProgram.aggregate_t",
                "a linear aggregation (gcn, mean, sum)",
                self.kind,
                "max has no transpose; recompute it (policy 'refetch')",
            )
        if part.row_scale is not None:
            dz = dz * part.row_scale.unsqueeze(1)
        graph, values = part.transposed()
        return spmm(graph, dz, values)

    def combine(
        self, conv: torch.nn.Module, z: torch.Tensor, root: torch.Tensor | None
    ) -> torch.Tensor:
        """The layer's output (before the activation) from ``z`` and ``root``."""
        if self.model == "gcn":
            gcn = _gcn(conv)
            return F.linear(z, gcn.lin.weight, gcn.bias)
        assert root is not None
        if self.model == "sage":
            sage = _sage(conv)
            out = sage.lin_l(z)
            if sage.lin_r is not None:
                out = out + sage.lin_r(root)
            if sage.normalize:
                out = F.normalize(out, p=2.0, dim=-1)
            return out
        gin = _gin(conv)
        return gin.nn(z + (1 + gin.eps) * root)

    def layer(
        self,
        conv: torch.nn.Module,
        part: SliceTensors,
        x: torch.Tensor,
        root: torch.Tensor | None,
    ) -> torch.Tensor:
        """The whole layer (before the activation), in the cheaper order.

        GCN and SAGE with a linear aggregation may transform before aggregating
        (``A (X W) == (A X) W``); :func:`strata.operators.kernels.aggregate_first`
        decides, as the single-device layers do. GIN's MLP comes after the sum.
        """
        if self.model == "gin" or not self.linear:
            return self.combine(conv, self.aggregate(part, x), root)
        lin = _gcn(conv).lin if self.model == "gcn" else _sage(conv).lin_l
        first = aggregate_first(
            num_src=part.graph.num_src,
            num_dst=part.graph.num_dst,
            num_edges=part.graph.num_edges,
            in_width=lin.in_features,
            out_width=lin.out_features,
            x_requires_grad=x.requires_grad,
            training=torch.is_grad_enabled(),
        )
        if first:
            return self.combine(conv, self.aggregate(part, x), root)
        out = self.aggregate(part, F.linear(x, lin.weight))
        bias = _gcn(conv).bias if self.model == "gcn" else lin.bias
        if bias is not None:
            out = out + bias
        if self.model == "sage":
            sage = _sage(conv)
            if sage.lin_r is not None:
                assert root is not None  # SAGE's program needs_root
                out = out + sage.lin_r(root)
            if sage.normalize:
                out = F.normalize(out, p=2.0, dim=-1)
        return out

    def work_bytes(self, num_dst: int, d_in: int, d_out: int, backward: bool) -> int:
        """A bound on ``combine``'s temporaries (and its backward's), in bytes.

        ``combine`` runs small dense work on destination rows; its intermediates
        live inside torch, so the arena counts this modelled bound for them.
        """
        units = {
            "gcn": (0, 1) if not backward else (2, 4),
            "sage": (0, 3) if not backward else (4, 7),
            "gin": (2, 3) if not backward else (6, 9),
        }[self.model]
        return 4 * num_dst * (units[0] * d_in + units[1] * d_out)


def program_for(model: BasicGNN) -> LayerProgram:
    """The :class:`LayerProgram` of a built model.

    Raises:
        OperatorError: for models or options the distributed trainers do not run.
    """
    name = type(model).__name__.lower().replace("graphsage", "sage")
    if name not in MODELS:
        raise OperatorError.build(
            "model",
            _WHERE,
            f"one of {list(MODELS)}",
            repr(type(model).__name__),
            "attention layers (GAT) need a distributed edge softmax; train GAT "
            "with the single-device FullGraphTrainer",
        )
    if name == "gcn":
        return LayerProgram("gcn", "gcn", needs_root=False)
    if name == "gin":
        return LayerProgram("gin", "sum", needs_root=True)
    if getattr(model, "project", False):
        raise OperatorError.build(
            "project", _WHERE, "project=False for SAGE", "True", None
        )
    return LayerProgram("sage", str(model.aggr), needs_root=True)


def layer_widths(model: BasicGNN) -> list[tuple[int, int]]:
    """``(d_in, d_out)`` of every layer."""
    widths = []
    width = model.in_channels
    for i in range(model.num_layers):
        out = model.out_channels if i == model.num_layers - 1 else model.hidden_channels
        widths.append((width, out))
        width = out
    return widths
