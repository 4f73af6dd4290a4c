"""One definition per GNN layer: message, aggregation, transform, root and update.

A layer subclasses :class:`MessagePassing` and declares, once, what it computes for
a destination ``i`` with in-neighbours ``j``::

    h_i   = W . AGG_{j -> i}( c_ji * message(x_j) ) + b        (``transform()``)
    out_i = update(h_i, root(x_i))

* :meth:`MessagePassing.message`: a per-*source* transform (it may not read the
  destination, so a change of ``x_j`` changes only ``j``'s messages);
* :attr:`MessagePassing.aggregation`: an :class:`Aggregation` value: :class:`Sum`,
  :class:`Mean`, :class:`Max` or :class:`SymNorm` (GCN's symmetric normalisation
  with self-loops); it owns the coefficients ``c_ji`` and the reduction;
* :meth:`MessagePassing.transform`: an optional linear map ``(W, b)``; for linear
  aggregations it commutes with the sum, so every execution may apply it before
  or after aggregating (whichever is cheaper);
* :meth:`MessagePassing.root`: an optional per-destination term (``None``: none);
* :meth:`MessagePassing.update`: the vertex-local rest.

From that one definition Strata derives every execution, and none of them knows a
layer by its name:

* the single-device forward (:meth:`MessagePassing.forward`) on the fused kernels,
  reusing the aggregate of a constant input across epochs
  (:mod:`strata.operators.kernels.reuse`);
* the partition-parallel program (exact halo exchange, HongTu chunks with offload,
  Emma moving aggregation): :mod:`strata.operators.trainers.distributed.programs`
  aggregates over a worker's slice with the coefficients the aggregation computed
  on the whole graph (:meth:`Aggregation.propagate`), then calls the layer's own
  :meth:`~MessagePassing.finish` on destination rows;
* the streaming incremental rule of D3-GNN (:mod:`strata.operators.streaming.rules`):
  messages are cached per source and reduced by mergeable, retractable
  accumulators of the same aggregation; a changed vertex is re-read through the
  layer's own ``transform``, ``root`` and ``update``.

Attention (GAT) declares :class:`Attention`: the single-device forward derives from
the definition; its partition-parallel and incremental executions are refused by
name (a softmax over a destination's in-edges needs every in-edge's score).

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> class GatedSum(MessagePassing):
    ...     '''out_i = sum_j sigmoid(g . x_j) * (W x_j) + R x_i.'''
    ...     aggregation = Sum()
    ...     def __init__(self, d_in: int, d_out: int) -> None:
    ...         super().__init__()
    ...         self.gate = torch.nn.Linear(d_in, 1)
    ...         self.lin = torch.nn.Linear(d_in, d_out)
    ...         self.lin_root = torch.nn.Linear(d_in, d_out, bias=False)
    ...     def message(self, x):
    ...         return torch.sigmoid(self.gate(x)) * x
    ...     def transform(self):
    ...         return self.lin.weight, self.lin.bias
    ...     def root(self, x):
    ...         return self.lin_root(x)
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    >>> GatedSum(4, 2)(g, torch.randn(3, 4)).shape
    torch.Size([3, 2])
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from strata.operators.errors import OperatorError
from strata.operators.kernels.aggregate import aggregate
from strata.operators.kernels.device_graph import DeviceGraph
from strata.operators.kernels.order import aggregate_first
from strata.operators.kernels.reuse import reuse_enabled
from strata.operators.kernels.spmm import spmm
from strata.operators.layers._common import Graph, needs_backward, resolve_graph


# ---------------------------------------------------------------------- propagation
@dataclass(frozen=True, slots=True, eq=False)
class Propagation:
    """What an aggregation sums on one graph (or one worker's slice of it).

    ``reduce(x)[i] = row_scale[i] * sum_{e: j -> i} values[e] * x[j]`` for linear
    aggregations (``values``/``row_scale`` None mean 1); the max takes the
    feature-wise max over the in-edges instead.

    Attributes:
        graph: rows are destinations, columns sources.
        values: per-edge coefficients, or None.
        row_scale: per-destination factor applied after the sum, or None.
    """

    graph: DeviceGraph
    values: torch.Tensor | None = None
    row_scale: torch.Tensor | None = None


# ---------------------------------------------------------------------- aggregations
class Aggregation:
    """How a layer reduces the messages of a destination's in-edges.

    Every aggregation is a value (frozen dataclass): it computes its coefficients
    on a graph (:meth:`propagate`, once per graph, cached), reduces messages over
    them (:meth:`reduce`), and, when linear, backpropagates a destination gradient
    to its sources (:meth:`reduce_t`). The streaming layers read the incremental
    algebra off its attributes.

    Attributes:
        name: ``sum``, ``mean``, ``max`` or ``gcn``: the accumulator kind (for
            reports and the incremental algebra), never a layer's name.
        linear: whether the reduction commutes with a linear map.
        self_loop: whether every destination also receives its own message
            (GCN's ``A + I``; the streaming rule adds it from the vertex itself).
        degree_dependent: whether a message's coefficient depends on its
            sender's in-degree (GCN), so a degree change re-sends its messages.
    """

    name: ClassVar[str] = "sum"
    linear: ClassVar[bool] = True
    self_loop: ClassVar[bool] = False
    degree_dependent: ClassVar[bool] = False

    def propagate(self, graph: DeviceGraph) -> Propagation:
        """The coefficients on ``graph`` (cached on it)."""
        return graph.cached(("propagation", self), lambda: self._build(graph))

    def _build(self, graph: DeviceGraph) -> Propagation:
        return Propagation(graph)

    def reduce(self, prop: Propagation, x: torch.Tensor) -> torch.Tensor:
        """``[num_src, ...]`` messages to ``[num_dst, ...]`` aggregates."""
        out = spmm(prop.graph, x, _like(prop.values, x))
        if prop.row_scale is not None:
            out = out * _like(prop.row_scale, x).view(-1, *([1] * (x.dim() - 1)))
        return out

    def reduce_t(
        self, prop_t: Propagation, row_scale: torch.Tensor | None, dz: torch.Tensor
    ) -> torch.Tensor:
        """The transposed reduction: destination gradients to source rows.

        Args:
            prop_t: the transposed propagation (rows: sources), its values.
            row_scale: the forward's per-destination scale, or None.
            dz: ``[num_dst, ...]`` gradients of the aggregates.

        Raises:
            OperatorError: for a non-linear aggregation (it has no transpose).
        """
        if not self.linear:
            raise OperatorError.build(
                "aggregation",
                f"{type(self).__name__}.reduce_t",
                "a linear aggregation (sum, mean, gcn)",
                self.name,
                "max has no transpose; recompute it (policy 'refetch')",
            )
        if row_scale is not None:
            dz = dz * _like(row_scale, dz).unsqueeze(1)
        return spmm(prop_t.graph, dz, _like(prop_t.values, dz))

    def numpy_propagation(
        self, graph: DeviceGraph
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """``(indptr, indices, values, row_scale)`` of :meth:`propagate`, as numpy.

        The partition-parallel trainers slice this whole-graph view per worker,
        so every slice keeps the global coefficients (``hongtu.md`` pitfall 4).
        """
        prop = self.propagate(graph)
        values = None if prop.values is None else prop.values.cpu().numpy()
        scale = None if prop.row_scale is None else prop.row_scale.cpu().numpy()
        return (
            prop.graph.indptr.cpu().numpy().astype(np.int64),
            prop.graph.src_index().cpu().numpy().astype(np.int64),
            None if values is None else values.astype(np.float32),
            None if scale is None else scale.astype(np.float32),
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _like(t: torch.Tensor | None, x: torch.Tensor) -> Any:
    return None if t is None else t.to(dtype=x.dtype, device=x.device)


@dataclass(frozen=True, slots=True)
class Sum(Aggregation):
    """Sum of in-neighbour messages (unweighted, as PyG's ``aggr="add"``)."""

    name: ClassVar[str] = "sum"

    def reduce(self, prop: Propagation, x: torch.Tensor) -> torch.Tensor:
        """The sum kernel on a whole graph; the weighted sum on a slice."""
        if prop.values is None and prop.row_scale is None:
            return aggregate(prop.graph, x, "sum")
        return Aggregation.reduce(self, prop, x)


@dataclass(frozen=True, slots=True)
class Mean(Aggregation):
    """Mean of in-neighbour messages (zeros without in-edges)."""

    name: ClassVar[str] = "mean"

    def _build(self, graph: DeviceGraph) -> Propagation:
        # float64, cast to the messages' dtype when used: 1/d rounds once either way
        degree = graph.in_degree().clamp(min=1).to(torch.float64)
        return Propagation(graph, None, 1.0 / degree)


@dataclass(frozen=True, slots=True)
class Max(Aggregation):
    """Feature-wise max of in-neighbour messages (zeros without in-edges)."""

    name: ClassVar[str] = "max"
    linear: ClassVar[bool] = False

    def reduce(self, prop: Propagation, x: torch.Tensor) -> torch.Tensor:
        """The segment max over every destination's in-edges."""
        return aggregate(prop.graph, x, "max")


@dataclass(frozen=True, slots=True)
class WeightedSum(Aggregation):
    """Sum of in-neighbour messages times the graph's edge weights (1 if none)."""

    name: ClassVar[str] = "sum"

    def _build(self, graph: DeviceGraph) -> Propagation:
        return Propagation(graph, graph.edge_weight, None)


@dataclass(frozen=True, slots=True)
class SymNorm(Aggregation):
    """GCN's ``D^-1/2 (A + w I) D^-1/2``: symmetric coefficients with self-loops.

    Existing self-loops are replaced by one loop of weight ``loop_weight`` per
    node (PyG's ``add_remaining_self_loops``); degrees are weighted in-degrees,
    used for both endpoints on a full graph. On a sampled block (bipartite),
    sources use their out-degree in the block (DGL's ``norm="both"``).

    Attributes:
        loop_weight: 1, or 2 for ``improved`` GCN.
        add_self_loops: add the loops (without: ``D^-1/2 A D^-1/2``).
    """

    loop_weight: float = 1.0
    add_self_loops: bool = True
    name: ClassVar[str] = "gcn"
    degree_dependent: ClassVar[bool] = True

    @property
    def self_loop(self) -> bool:  # type: ignore[override]
        """Whether every destination also receives its own message."""
        return self.add_self_loops

    def _build(self, graph: DeviceGraph) -> Propagation:
        looped = (
            graph.with_self_loops(self.loop_weight) if self.add_self_loops else graph
        )
        weight = looped.edge_weight
        if weight is None:
            weight = torch.ones(looped.num_edges, device=looped.device)
        src, dst = looped.src_index(), looped.dst_index(cache=False)
        deg_dst = weight.new_zeros(looped.num_dst).index_add_(0, dst, weight)
        if looped.bipartite:
            deg_src = weight.new_zeros(looped.num_src).index_add_(0, src, weight)
        else:
            deg_src = deg_dst
        inv_dst = deg_dst.pow(-0.5).masked_fill_(deg_dst == 0, 0.0)
        inv_src = deg_src.pow(-0.5).masked_fill_(deg_src == 0, 0.0)
        values = self.coefficients(inv_src[src], weight, inv_dst[dst])
        return Propagation(looped, values, None)

    @staticmethod
    def coefficients(
        inv_src: torch.Tensor, weight: torch.Tensor, inv_dst: torch.Tensor
    ) -> torch.Tensor:
        """Edge coefficients ``d_src^-1/2 w d_dst^-1/2`` from inverse square roots."""
        return inv_src * weight * inv_dst


@dataclass(frozen=True, slots=True)
class Attention(Aggregation):
    """A softmax over each destination's in-edges of per-edge scores (GAT).

    The layer computes the scores and the weighted sum itself (its ``forward``);
    this value marks the layer as attention so that executions which cannot
    derive it (partition-parallel, incremental) refuse it by name.
    """

    name: ClassVar[str] = "attention"
    linear: ClassVar[bool] = False


# ---------------------------------------------------------------------- the layer
class MessagePassing(nn.Module):
    """Base class of every layer: one definition, every execution (module docs).

    Subclasses set :attr:`aggregation` (class or instance attribute) and override
    :meth:`message`, :meth:`transform`, :meth:`root` and :meth:`update` as needed.

    Attributes:
        aggregation: the :class:`Aggregation`.
        work_units: ``((d_in, d_out) forward, (d_in, d_out) backward)``: the
            destination-row temporaries of ``finish`` per input/output width, a
            bound HongTu's memory model plans with; conservative by default.
    """

    aggregation: Aggregation = Sum()
    work_units: ClassVar[tuple[tuple[int, int], tuple[int, int]]] = ((2, 3), (6, 9))
    #: Whether :meth:`update` is exactly ``h + root`` (or ``h`` without a root):
    #: the streaming layers then read changed vertices with a fused kernel.
    update_is_sum: bool = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Record every layer's constructor arguments (to rebuild it elsewhere).

        A streaming layer crosses the process executor's wire and enters
        checkpoints as plain data: its import path, these arguments and its
        parameters (:meth:`init_arguments`).
        """
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return

        @functools.wraps(init)
        def recorded(self: MessagePassing, *args: Any, **kw: Any) -> None:
            init(self, *args, **kw)
            # The most derived class's constructor returns last, so its
            # arguments are the ones that stay.
            object.__setattr__(self, "_init_arguments", (args, dict(kw)))

        setattr(cls, "__init__", recorded)  # noqa: B010 (wrapping the constructor)

    def init_arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The positional and keyword arguments this layer was built with."""
        recorded: tuple[tuple[Any, ...], dict[str, Any]] = self.__dict__.get(
            "_init_arguments", ((), {})
        )
        return recorded

    # ------------------------------------------------------------------ definition
    def message(self, x: torch.Tensor) -> torch.Tensor:
        """Per-source message (default: the source's features)."""
        return x

    def transform(self) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """``(W, b)`` applied to the aggregate (``W . agg + b``), or None."""
        return None

    def root(self, x: torch.Tensor) -> torch.Tensor | None:
        """Per-destination term from the destination's own features (or None)."""
        return None

    def update(self, h: torch.Tensor, root: torch.Tensor | None) -> torch.Tensor:
        """The output from the transformed aggregate and the root term."""
        return h if root is None else h + root

    # ------------------------------------------------------------------ derived
    @property
    def sends_features(self) -> bool:
        """Whether :meth:`message` is the identity (the layer sends its input).

        Then a cached aggregate backpropagates through the aggregation alone.
        A layer whose ``message`` is the identity only for some settings says so
        by overriding this.
        """
        return type(self).message is MessagePassing.message

    @property
    def uses_root(self) -> bool:
        """Whether :meth:`root` is defined (``finish`` needs destination rows)."""
        return type(self).root is not MessagePassing.root

    def finish(self, z: torch.Tensor, x_root: torch.Tensor | None) -> torch.Tensor:
        """The output from the aggregate ``z`` of messages (before ``transform``).

        The vertex-local part every execution shares: ``update(W z + b, root)``.
        """
        wb = self.transform()
        h = z if wb is None else F.linear(z, wb[0], wb[1])
        root = None if x_root is None or not self.uses_root else self.root(x_root)
        return self.update(h, root)

    def propagate(
        self, prop: Propagation, x: torch.Tensor, x_root: torch.Tensor | None
    ) -> torch.Tensor:
        """The layer over ``prop`` in the cheaper order (message rows ``x``).

        Linear aggregations commute with ``W``: transform-first ``A (M W)`` when
        narrowing, aggregate-first ``(A M) W`` otherwise
        (:func:`strata.operators.kernels.aggregate_first`), the same result.
        """
        return self._propagate(prop, x, x_root, reuse=False)

    def _propagate(
        self,
        prop: Propagation,
        x: torch.Tensor,
        x_root: torch.Tensor | None,
        *,
        reuse: bool,
    ) -> torch.Tensor:
        constant = reuse and self._constant_aggregate(x)
        messages = self.message(x)
        wb = self.transform()
        if wb is not None and self.aggregation.linear:
            weight, bias = wb
            training = needs_backward(self)
            # A reused aggregate costs nothing after the first epoch: in training
            # aggregate first whatever the widths.
            first = (constant and training) or aggregate_first(
                num_src=prop.graph.num_src,
                num_dst=prop.graph.num_dst,
                num_edges=prop.graph.num_edges,
                in_width=weight.shape[1],
                out_width=weight.shape[0],
                x_requires_grad=messages.requires_grad,
                training=training,
            )
            if not first:
                h = self.aggregation.reduce(prop, F.linear(messages, weight))
                if bias is not None:
                    h = h + bias
                root = None
                if x_root is not None and self.uses_root:
                    root = self.root(x_root)
                return self.update(h, root)
        if constant:
            z = prop.graph.cached_for(
                ("constant_aggregate", self.aggregation),
                x,
                lambda: self.aggregation.reduce(prop, x),
            )
        else:
            z = self.aggregation.reduce(prop, messages)
        return self.finish(z, x_root)

    def _constant_aggregate(self, x: torch.Tensor) -> bool:
        """Whether ``A . x`` is the same every time ``x`` is (kernels.reuse).

        True when reuse is on, the layer sends ``x`` unchanged, ``x`` needs no
        gradient, and the aggregation has no parameters (all but attention).
        """
        return (
            reuse_enabled()
            and self.sends_features
            and not x.requires_grad
            and not isinstance(self.aggregation, Attention)
        )

    def forward(
        self, graph: Graph, x: torch.Tensor | tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        """Run the layer on a full graph, a sampled block or a DeviceGraph.

        ``x`` is one tensor (sources and destinations are the same nodes, or a
        block's destinations are its first ``num_dst`` sources), or a **bipartite
        pair** ``(x_src, x_dst)``: messages come from ``x_src``'s rows and the
        root term reads ``x_dst``'s, so sources and destinations may be different
        node sets of different widths (one relation of a typed graph, PyG's
        ``(x_src, x_dst)`` convention). Both forms run the same definition.

        When the message input needs no gradient and is sent unchanged
        (first-layer input features), the aggregate ``A . x`` is computed once and
        reused while ``x`` and the graph are unchanged
        (:mod:`strata.operators.kernels.reuse`; exact, and safe against in-place
        changes of ``x``).

        Raises:
            OperatorError: if ``x`` (or ``x_src``) does not have one row per
                source node, ``x_dst`` one row per destination, or a pair meets
                an aggregation that adds self-loops (a loop needs a destination
                to also be a source).
        """
        where = f"{type(self).__name__}.forward"
        if isinstance(x, tuple):
            x_src, x_dst = _bipartite_pair(x, where)
            dg = resolve_graph(graph, x_src, where)
            _check_destination_rows(dg, x_dst, where)
            if self.aggregation.self_loop:
                raise OperatorError.build(
                    "x",
                    where,
                    "one tensor (an aggregation with self-loops)",
                    "an (x_src, x_dst) pair",
                    f"{self.aggregation!r} adds a self-loop per destination, which "
                    "needs destination i to be source i; pass one tensor",
                )
            prop = self.aggregation.propagate(dg)
            return self._propagate(prop, x_src, x_dst, reuse=True)
        dg = resolve_graph(graph, x, where)
        prop = self.aggregation.propagate(dg)
        return self._propagate(prop, x, destination_rows(x, dg.num_dst), reuse=True)


def _bipartite_pair(
    x: tuple[torch.Tensor, torch.Tensor], where: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` checked to be two tensors ``(x_src, x_dst)``."""
    if len(x) != 2 or not all(isinstance(t, torch.Tensor) for t in x):
        raise OperatorError.build(
            "x",
            where,
            "a tensor or an (x_src, x_dst) pair of tensors",
            f"a tuple of {len(x)} {[type(t).__name__ for t in x]}",
        )
    return x[0], x[1]


def _check_destination_rows(dg: DeviceGraph, x_dst: torch.Tensor, where: str) -> None:
    """Raise unless ``x_dst`` has one row per destination of ``dg``."""
    if x_dst.dim() < 2 or x_dst.shape[0] != dg.num_dst:
        raise OperatorError.build(
            "x_dst",
            where,
            f"[{dg.num_dst}, features] (one row per destination)",
            f"shape {tuple(x_dst.shape)}",
            "in a pair (x_src, x_dst), x_dst holds the destinations' own features",
        )


def destination_rows(x: torch.Tensor, num_dst: int) -> torch.Tensor:
    """``x[:num_dst]``, or ``x`` itself when that is every row (a full graph).

    A slice that covers the whole tensor still records a ``SliceBackward`` that
    zero-fills and copies an input-sized gradient; ``x`` itself records nothing.
    """
    return x if x.shape[0] == num_dst else x[:num_dst]


def message_passing_layer(conv: nn.Module, where: str) -> MessagePassing:
    """``conv`` as a :class:`MessagePassing` layer whose executions derive.

    Raises:
        OperatorError: for a module that is not one, or an attention layer.
    """
    if not isinstance(conv, MessagePassing):
        raise OperatorError.build(
            "layer",
            where,
            "a strata.operators.layers.MessagePassing layer",
            type(conv).__name__,
            "write the layer as a MessagePassing subclass (message, aggregation, "
            "transform, root, update) and every execution derives from it",
        )
    if isinstance(conv.aggregation, Attention):
        raise OperatorError.build(
            "aggregation",
            where,
            "sum, mean, max or gcn (a reduction of per-source messages)",
            f"attention ({type(conv).__name__})",
            "an edge softmax needs every in-edge's score at once; train attention "
            "layers with the single-device trainers",
        )
    return conv
