"""What one epoch asks of the kernels: graph statistics and per-layer counts.

:class:`GraphStats` summarises the training graph (nodes, edges, self-loops,
feature width, classes, training nodes, the in-degree distribution the sampler
sees). :func:`layer_counts` turns a :class:`~strata.operators.trainers.ModelConfig`
and a graph's sizes into per-layer operation counts for one training step (forward
and backward) or one evaluation pass: how many (edge x feature) products each
SpMM does and at which width, how many multiply-adds each dense product does,
and how many elements dropout, bias and activation touch. The counts come from
the built layers' declarations (:mod:`strata.operators.planning.shapes`), never
from the model's name, and follow the layers' own choices: a layer with a linear
aggregation and a transform asks :func:`strata.operators.kernels.aggregate_first`
whether to aggregate before or after projecting, exactly as
``MessagePassing._propagate`` does, and the first layer's input needs no
gradient.

Examples:
    >>> from strata.operators.trainers import ModelConfig
    >>> sizes = LayerSizes(num_src=100, num_dst=100, num_edges=1000)
    >>> [c.spmm_width for c in layer_counts(ModelConfig("gcn", hidden=16),
    ...                                    128, 7, [sizes, sizes])]
    [128, 7]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from strata.operators.errors import OperatorError
from strata.operators.kernels import aggregate_first
from strata.operators.layers.message_passing import Mean
from strata.operators.planning.shapes import LayerShape, ModelShape, model_shape
from strata.operators.trainers.config import ModelConfig

__all__ = [
    "GraphStats",
    "LayerCounts",
    "LayerSizes",
    "epoch_counts",
    "graph_stats",
    "layer_counts",
]


@dataclass(frozen=True, slots=True)
class GraphStats:
    """The training graph as the cost model sees it.

    Attributes:
        name: the dataset's name.
        num_nodes: N.
        num_edges: E (stored edges, self-loops included).
        self_loops: stored self-loops (GCN replaces them with one per node).
        num_features: input width F.
        num_classes: output width.
        train_nodes: nodes in the training mask.
        graph_bytes: bytes of the CSR arrays.
        feature_bytes: bytes of the feature matrix.
        fanout_edges: per fan-out f, the mean of ``min(in_degree, f)``
            (``-1``: the mean in-degree); what one sampled destination costs.
        max_in_degree: the largest in-degree.
    """

    name: str
    num_nodes: int
    num_edges: int
    self_loops: int
    num_features: int
    num_classes: int
    train_nodes: int
    graph_bytes: int
    feature_bytes: int
    fanout_edges: dict[int, float]
    max_in_degree: int

    @property
    def avg_degree(self) -> float:
        """Mean in-degree."""
        return self.num_edges / max(self.num_nodes, 1)

    def describe(self) -> str:
        """One line: sizes and the degree spread."""
        return (
            f"{self.name}: {self.num_nodes:,} nodes, {self.num_edges:,} edges "
            f"(mean in-degree {self.avg_degree:.1f}, max {self.max_in_degree:,}), "
            f"{self.num_features} features, {self.num_classes} classes, "
            f"{self.train_nodes:,} training nodes"
        )


def graph_stats(data: object, fanouts: Sequence[int] = ()) -> GraphStats:
    """The statistics of a trainer's input (anything ``as_training_data`` takes).

    Args:
        data: a dataset payload, :class:`~strata.storage.GraphDataset`,
            :class:`~strata.operators.trainers.data.TrainingData` or directory.
        fanouts: fan-outs whose per-destination sampled edges to record.
    """
    from strata.operators.trainers.data import FEATURES, as_training_data

    training = as_training_data(data, "strata plan")
    graph = training.graph
    in_degree = np.asarray(graph.in_degree())
    src, dst = graph.to_coo()
    loops = int(np.count_nonzero(src == dst))
    schema = training.features.schema()[FEATURES]
    width = training.num_features
    itemsize = int(np.dtype(str(schema.dtype).replace("torch.", "")).itemsize)
    fan = {}
    for f in {*fanouts, -1}:
        fan[f] = float(in_degree.mean() if f < 0 else np.minimum(in_degree, f).mean())
    return GraphStats(
        name=training.name,
        num_nodes=graph.num_nodes,
        num_edges=int(graph.num_edges),
        self_loops=loops,
        num_features=width,
        num_classes=training.num_classes,
        train_nodes=int(training.masks["train"].sum()),
        graph_bytes=int(graph.nbytes()),
        feature_bytes=graph.num_nodes * width * itemsize,
        fanout_edges=fan,
        max_in_degree=int(in_degree.max(initial=0)),
    )


@dataclass(frozen=True, slots=True)
class LayerSizes:
    """The graph one layer runs over (a full graph or a sampled block).

    Attributes:
        num_src: rows of the layer's input.
        num_dst: rows of its output.
        num_edges: edges it aggregates over (before GCN's self-loops).
        self_loops: stored self-loops among them.
    """

    num_src: int
    num_dst: int
    num_edges: int
    self_loops: int = 0


@dataclass(frozen=True, slots=True)
class LayerCounts:
    """One layer's work in one pass (see :func:`layer_counts`).

    Attributes:
        in_width: input features per row.
        out_width: output features per row (all heads).
        aggregate_first: the layer aggregates, then projects.
        spmm_edges: edges of its SpMM (GCN: with one self-loop per node).
        spmm_width: the width its forward SpMM runs at.
        spmm_backward: whether backward runs the transposed SpMM.
        linear: ``(rows, in, out)`` of each forward dense product.
        linear_backward: per forward product, backward products (0, 1 or 2:
            the weight's gradient, and the input's when it needs one).
        dropout_elements: elements dropout draws a mask for (the layer input).
        elementwise: elements of bias, activation and normalisation passes.
        edge_elements: per-edge elements of attention (scores, softmax).
        kept_elements: floats the pass keeps for backward (0 in evaluation).
        input_grad: whether the layer's input needs a gradient.
        outputs: element counts of the tensors its forward creates (dropout,
            products, aggregate, bias, activation); backward creates as many.
        src_rows: rows its SpMM gathers from.
    """

    in_width: int
    out_width: int
    aggregate_first: bool
    spmm_edges: int
    spmm_width: int
    spmm_backward: bool
    linear: tuple[tuple[int, int, int], ...]
    linear_backward: tuple[int, ...]
    dropout_elements: int
    elementwise: int
    edge_elements: int
    kept_elements: int
    input_grad: bool = False
    outputs: tuple[int, ...] = ()
    src_rows: int = 0

    @property
    def spmm_products(self) -> int:
        """(edge x feature) products of the forward SpMM."""
        return self.spmm_edges * self.spmm_width

    @property
    def macs(self) -> int:
        """Multiply-adds of the forward dense products."""
        return sum(r * i * o for r, i, o in self.linear)

    @property
    def backward_macs(self) -> int:
        """Multiply-adds of the backward dense products."""
        return sum(
            r * i * o * k
            for (r, i, o), k in zip(self.linear, self.linear_backward, strict=True)
        )


def widths(model: ModelConfig, in_channels: int, out_channels: int) -> list[int]:
    """Input width of every layer and the output width: ``d_0 .. d_L``."""
    return list(model_shape(model, in_channels, out_channels).widths)


def layer_counts(
    model: ModelConfig,
    in_channels: int,
    out_channels: int,
    sizes: Sequence[LayerSizes],
    *,
    training: bool = True,
    aggregate_first_only: bool = False,
    steady: bool = True,
) -> list[LayerCounts]:
    """Per-layer operation counts of one pass of ``model``.

    The counts follow each built layer's declaration
    (:func:`~strata.operators.planning.shapes.model_shape`): its aggregation value,
    transform, root and update, never the model's name, so a user's
    MessagePassing layer (``ModelConfig(layer=...)``) is counted as the built-in
    ones are.

    Args:
        model: the model's config (a built-in stack or a user's MessagePassing
            layer).
        in_channels: input features.
        out_channels: output width (classes).
        sizes: the graph of every layer, first layer first.
        training: a training step (forward and backward, dropout) or an
            evaluation pass (forward only).
        aggregate_first_only: aggregate before projecting in every layer (the
            partition-parallel layer programs do), instead of the layers' choice;
            no aggregate is reused there.
        steady: count an epoch after the first, in which the single-device
            layers reuse the first layer's aggregate of an unchanged input (see
            :mod:`strata.operators.kernels.reuse` and :func:`_first_reused`):
            that SpMM then costs nothing.

    Raises:
        OperatorError: a model that is not a stack of MessagePassing layers, or a
            wrong number of layer sizes.
    """
    shape = _shape(model, in_channels, out_channels, sizes)
    orders = _orders(shape, sizes, training=training, agg_only=aggregate_first_only)
    reused = steady and _first_reused(shape, orders, training=training)
    return _counts(shape, sizes, orders, training=training, reused=reused)


def epoch_counts(
    model: ModelConfig,
    in_channels: int,
    out_channels: int,
    sizes: Sequence[LayerSizes],
    *,
    evaluate: bool = True,
) -> tuple[list[LayerCounts], list[LayerCounts]]:
    """Counts of a single-device epoch after the first: training, evaluation.

    A training step, then (with ``evaluate``) an evaluation pass over the same
    graph, as :class:`~strata.operators.trainers.FullGraphTrainer` runs them.
    The two share the graph's reuse cache (one aggregate per graph and
    aggregation value, :mod:`strata.operators.kernels.reuse`): the training
    step leaves the first layer's ``A . x`` there only without dropout (else it
    leaves ``A . dropout(x)``, which evaluation cannot use), and an evaluation
    pass whose later layers also aggregate first with an equal aggregation
    overwrites it before the next training step.

    Raises:
        OperatorError: as :func:`layer_counts`.
    """
    shape = _shape(model, in_channels, out_channels, sizes)
    train = _orders(shape, sizes, training=True, agg_only=False)
    evals = _orders(shape, sizes, training=False, agg_only=False)
    kept = train[0].caches and shape.dropout == 0  # training leaves A . x
    train_reused = kept and not (evaluate and _evicted(shape, evals))
    eval_reused = kept and evals[0].caches
    return (
        _counts(shape, sizes, train, training=True, reused=train_reused),
        _counts(shape, sizes, evals, training=False, reused=eval_reused),
    )


def _shape(
    model: ModelConfig, in_channels: int, out_channels: int, sizes: Sequence[LayerSizes]
) -> ModelShape:
    shape = model_shape(model, in_channels, out_channels)
    if len(sizes) != len(shape.layers):
        raise OperatorError.build(
            "sizes",
            "layer_counts",
            f"{len(shape.layers)} layer sizes",
            str(len(sizes)),
        )
    return shape


def _orders(
    shape: ModelShape, sizes: Sequence[LayerSizes], *, training: bool, agg_only: bool
) -> list[_Order]:
    return [
        _order(
            s,
            size,
            x_grad=training and i > 0,  # the first layer's input needs none
            training=training,
            agg_only=agg_only,
        )
        for i, (s, size) in enumerate(zip(shape.layers, sizes, strict=True))
    ]


def _counts(
    shape: ModelShape,
    sizes: Sequence[LayerSizes],
    orders: Sequence[_Order],
    *,
    training: bool,
    reused: bool,
) -> list[LayerCounts]:
    last = len(shape.layers) - 1
    return [
        _layer(
            s,
            size,
            order,
            last=i == last,
            training=training,
            dropout_p=shape.dropout,
            reused=reused and i == 0,
        )
        for i, (s, size, order) in enumerate(
            zip(shape.layers, sizes, orders, strict=True)
        )
    ]


@dataclass(frozen=True, slots=True)
class _Order:
    """How the single-device forward runs one layer (MessagePassing._propagate).

    Attributes:
        first: it aggregates, then projects.
        x_grad: its input needs a gradient (not the first layer's).
        message_grad: its messages need one (the input's, or the message's
            parameters).
        caches: it keeps its aggregate on the graph (kernels.reuse): its input
            needs no gradient, it sends its features, and it aggregates first.
    """

    first: bool
    x_grad: bool
    message_grad: bool
    caches: bool


def _edges(s: LayerShape, size: LayerSizes) -> int:
    """Edges aggregated over: existing loops replaced by one per destination."""
    if s.self_loops:
        return size.num_edges - size.self_loops + size.num_dst
    return size.num_edges


def _order(
    s: LayerShape, size: LayerSizes, *, x_grad: bool, training: bool, agg_only: bool
) -> _Order:
    message_grad = training and (x_grad or s.message_params)
    # an input needing no gradient, sent unchanged, is aggregated through the
    # reuse cache (the first layer's in training; every layer's in evaluation)
    constant = not agg_only and s.sends_features and not s.attention and not x_grad
    if s.attention:  # projects, then attends
        first = False
    elif s.transform is not None and s.aggregation.linear:
        first = (
            agg_only
            or (constant and training)
            or aggregate_first(
                num_src=size.num_src,
                num_dst=size.num_dst,
                num_edges=_edges(s, size),
                in_width=s.transform[0],
                out_width=s.transform[1],
                x_requires_grad=message_grad,
                training=training,
            )
        )
    else:  # no transform, or a non-linear aggregation: aggregate the messages
        first = True
    return _Order(first, x_grad, message_grad, constant and first)


def _first_reused(
    shape: ModelShape, orders: Sequence[_Order], *, training: bool
) -> bool:
    """Whether the first layer's aggregate is served from the cache next pass.

    For repeated passes of one kind (see :func:`epoch_counts` for a training
    step and an evaluation pass in turn). In training only the first layer's
    input needs no gradient; it is the same tensor every epoch when dropout is 0
    (counter dropout then returns its input). In evaluation every layer's input
    needs none, so a later layer that aggregates first with an equal
    aggregation value overwrites the first layer's entry (what the layers were
    measured to do, see tests/operators/test_planning.py).
    """
    if not orders[0].caches:
        return False
    if training:
        return shape.dropout == 0
    return not _evicted(shape, orders)


def _evicted(shape: ModelShape, orders: Sequence[_Order]) -> bool:
    """A later layer caches its aggregate under the first layer's key."""
    first = shape.layers[0].aggregation
    return any(
        order.caches and s.aggregation == first
        for s, order in zip(shape.layers[1:], orders[1:], strict=True)
    )


def _layer(
    s: LayerShape,
    size: LayerSizes,
    order: _Order,
    *,
    last: bool,
    training: bool,
    dropout_p: float,
    reused: bool,
) -> LayerCounts:
    d_in, d_out = s.in_width, s.out_width
    n_src, n_dst = size.num_src, size.num_dst
    edges = _edges(s, size)
    x_grad, m_grad = order.x_grad, order.message_grad

    def backward(input_grad: bool) -> int:
        """Backward products of one forward product: the weight's, the input's."""
        return 1 + int(input_grad) if training else 0

    dropout = n_src * d_in if training and dropout_p > 0 else 0
    act = 0 if last else n_dst * d_out
    message = [(n_src, i, o) for i, o in s.message]
    root = [(n_dst, i, o) for i, o in s.root]
    update = [(n_dst, i, o) for i, o in s.update]
    # the update's first product reads the aggregate (and the root term); an
    # MLP's later products read the previous one's output
    h_grad = m_grad or s.transform is not None
    r_grad = training and s.has_root and (x_grad or s.root_params)
    update_backward = [backward(h_grad or r_grad)] + [backward(True)] * len(update)
    side = (
        [*root, *update, *message],
        [backward(x_grad)] * len(root)
        + update_backward[: len(update)]
        + [backward(x_grad)] * len(message),
    )
    outs = sum(o for _, _, o in update)
    inner = outs - (update[-1][2] if update else 0)  # activations between them
    mean = n_dst if isinstance(s.aggregation, Mean) else 0  # the 1/deg scale
    if s.attention:  # project, then attention-weighted SpMM over every head
        width, heads = s.message_width, s.heads
        kept = n_src * width + 3 * edges * heads + n_dst * width
        return LayerCounts(
            d_in,
            d_out,
            False,
            edges,
            width,
            training,
            tuple(side[0]),
            tuple(side[1]),
            dropout,
            n_dst * width + act,
            6 * edges * heads,  # scores, leaky ReLU, softmax, dropout
            kept if training else 0,
            x_grad,
            tuple(o for o in (dropout, n_src * width, n_dst * width, act) if o),
            n_src,
        )
    if s.transform is None:  # aggregate, then the update (GIN's MLP)
        width = s.message_width
        kept = n_dst * width + n_dst * (outs + inner) + (n_src * d_in if x_grad else 0)
        elementwise = n_dst * width * int(s.has_root) + mean * width
        return LayerCounts(
            d_in,
            d_out,
            True,
            0 if reused else edges,
            width,
            m_grad,
            tuple(side[0]),
            tuple(side[1]),
            dropout,
            elementwise + n_dst * (outs + inner) + act,
            0,
            kept if training else 0,
            x_grad,
            tuple(
                o for o in (dropout, n_dst * width, *(r * o for r, _, o in update)) if o
            ),
            n_src,
        )
    w_in, w_out = s.transform
    first = order.first
    width = w_in if first else w_out
    rows = n_dst if first else n_src
    linear = [(rows, w_in, w_out), *side[0]]
    linear_backward = [backward(m_grad), *side[1]]
    # bias, activation, mean's scale, the root sum, the update's own passes
    elementwise = n_dst * w_out + act + mean * width + n_dst * d_out * int(s.has_root)
    elementwise += n_dst * (outs + inner)
    kept = (n_dst * w_in if first else n_src * w_out) + n_dst * d_out
    kept += n_src * d_in if x_grad else 0
    kept += n_dst * (outs + inner) + sum(r * o for r, _, o in message)
    outputs = [dropout, n_dst * width, *(r * o for r, _, o in linear)]
    outputs += [n_dst * d_out, act]
    return LayerCounts(
        d_in,
        d_out,
        first,
        0 if (first and reused) else edges,
        width,
        training and (m_grad or not first),
        tuple(linear),
        tuple(linear_backward),
        dropout,
        elementwise,
        0,
        kept if training else 0,
        x_grad,
        tuple(o for o in outputs if o),
        n_src,
    )
