"""What one epoch asks of the kernels: graph statistics and per-layer counts.

:class:`GraphStats` summarises the training graph (nodes, edges, self-loops,
feature width, classes, training nodes, the in-degree distribution the sampler
sees). :func:`layer_counts` turns a :class:`~strata.operators.trainers.ModelConfig`
and a graph's sizes into per-layer operation counts for one training step (forward
and backward) or one evaluation pass: how many (edge x feature) products each
SpMM does and at which width, how many multiply-adds each dense product does,
and how many elements dropout, bias and activation touch. It follows the layers'
own choices: GCN and GraphSAGE ask
:func:`strata.operators.kernels.aggregate_first` whether to aggregate before or
after projecting, exactly as their ``propagate`` does, and the first layer's
input needs no gradient.

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
from strata.operators.trainers.config import ModelConfig

__all__ = ["GraphStats", "LayerCounts", "LayerSizes", "graph_stats", "layer_counts"]

#: Models whose operations the cost model counts.
COUNTED_MODELS = ("gcn", "sage", "gin", "gat")


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
    hidden = model.hidden * (model.heads if model.name == "gat" else 1)
    return [in_channels] + [hidden] * (model.num_layers - 1) + [out_channels]


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

    Args:
        model: the model's config (``gcn``, ``sage`` with a linear aggregator,
            ``gin``, ``gat``).
        in_channels: input features.
        out_channels: output width (classes).
        sizes: the graph of every layer, first layer first.
        training: a training step (forward and backward, dropout) or an
            evaluation pass (forward only).
        aggregate_first_only: aggregate before projecting in every layer (the
            partition-parallel layer programs do), instead of the layers' choice;
            no aggregate is reused there.
        steady: count an epoch after the first, in which the single-device
            layers reuse the first layer's aggregate of an unchanged input
            (training without dropout, SAGE's evaluation; see
            :mod:`strata.operators.kernels.reuse`): that SpMM then costs nothing.

    Raises:
        OperatorError: a model the cost model does not count, or a wrong
            number of layer sizes.
    """
    if model.module is not None or model.layer is not None:
        raise OperatorError.build(
            "model",
            "strata plan",
            f"one of {COUNTED_MODELS}",
            "a user's module or layer",
            "the planner counts the built-in layer stacks only",
        )
    if model.name not in COUNTED_MODELS:
        raise OperatorError.build(
            "model", "strata plan", f"one of {COUNTED_MODELS}", repr(model.name)
        )
    if len(sizes) != model.num_layers:
        raise OperatorError.build(
            "sizes",
            "layer_counts",
            f"{model.num_layers} layer sizes",
            str(len(sizes)),
        )
    dims = widths(model, in_channels, out_channels)
    counts = []
    for layer, size in enumerate(sizes):
        last = layer == model.num_layers - 1
        counts.append(
            _layer(
                model,
                layer,
                (dims[layer], dims[layer + 1]),
                size,
                last=last,
                training=training,
                agg_only=aggregate_first_only,
                steady=steady,
            )
        )
    return counts


def _layer(
    model: ModelConfig,
    layer: int,
    dims: tuple[int, int],
    size: LayerSizes,
    *,
    last: bool,
    training: bool,
    agg_only: bool,
    steady: bool,
) -> LayerCounts:
    d_in, d_out = dims
    # The single-device forward reuses A.x of a first-layer input that needs no
    # gradient (kernels.reuse): it aggregates first in training whatever the
    # widths, and an input that is the same tensor every epoch is aggregated
    # once: in training when dropout is 0 (counter dropout then returns its
    # input); in evaluation only where the layer's finish leaves the cached
    # aggregate untouched (SAGE; GCN and GIN update it in place, so its version
    # changes and the cache misses: what the layers were measured to do, see
    # tests/operators/test_planning.py).
    constant = layer == 0 and not agg_only and model.name != "gat"
    unchanged = constant and (
        (training and model.dropout == 0) or (not training and model.name == "sage")
    )
    x_grad = training and layer > 0  # the first layer's input needs no gradient
    n_src, n_dst, edges = size.num_src, size.num_dst, size.num_edges
    dropout = n_src * d_in if training and model.dropout > 0 else 0
    act = 0 if last else n_dst * d_out
    name = model.name
    if name in ("gcn", "sage"):
        if name == "gcn":  # existing loops replaced by one per destination
            edges = edges - size.self_loops + n_dst
        first = (
            agg_only
            or (constant and training)
            or aggregate_first(
                num_src=n_src,
                num_dst=n_dst,
                num_edges=edges,
                in_width=d_in,
                out_width=d_out,
                x_requires_grad=x_grad,
                training=training,
            )
        )
        width = d_in if first else d_out
        spmm_edges = 0 if (first and unchanged and steady) else edges
        rows = n_dst if first else n_src
        linear = [(rows, d_in, d_out)]
        backward = [1 + int(x_grad)] if training else [0]
        if name == "sage":  # the root term W_r x_i over the destinations
            linear.append((n_dst, d_in, d_out))
            backward.append(1 + int(x_grad) if training else 0)
        spmm_backward = training and (x_grad or not first)
        elementwise = n_dst * d_out + act  # bias, activation
        if name == "sage":  # mean's 1/deg scale and the root sum
            elementwise += n_dst * width + n_dst * d_out
        kept = (n_dst * d_in if first else n_src * d_out) + n_dst * d_out
        kept += n_src * d_in if x_grad else 0
        outputs = [dropout, n_dst * width, *(r * o for r, _, o in linear)]
        outputs += [n_dst * d_out, act]
        return LayerCounts(
            d_in,
            d_out,
            first,
            spmm_edges,
            width,
            spmm_backward,
            tuple(linear),
            tuple(backward),
            dropout,
            elementwise,
            0,
            kept if training else 0,
            x_grad,
            tuple(o for o in outputs if o),
            n_src,
        )
    if name == "gin":  # sum first, then Linear -> ReLU -> Linear
        mlp = ((n_dst, d_in, d_out), (n_dst, d_out, d_out))
        reused = unchanged and steady
        # the trainable eps makes the MLP's input need a gradient in every layer
        mlp_backward = (2, 2) if training else (0, 0)
        kept = n_dst * d_in + 3 * n_dst * d_out + (n_src * d_in if x_grad else 0)
        return LayerCounts(
            d_in,
            d_out,
            True,
            0 if reused else edges,
            d_in,
            x_grad,
            mlp,
            mlp_backward,
            dropout,
            n_dst * (3 * d_out + d_in) + act,
            0,
            kept if training else 0,
            x_grad,
            tuple(
                o for o in (dropout, n_dst * d_in, n_dst * d_out, n_dst * d_out) if o
            ),
            n_src,
        )
    # gat: project, then attention-weighted SpMM over every head
    heads = model.heads if not last else model.output_heads
    width = d_out if not last else d_out * heads
    edges = edges - size.self_loops + n_dst
    project = ((n_src, d_in, width),)
    project_backward = (1 + int(x_grad),) if training else (0,)
    edge_elements = 6 * edges * heads  # scores, leaky ReLU, softmax, dropout
    kept = n_src * width + 3 * edges * heads + n_dst * width
    return LayerCounts(
        d_in,
        d_out,
        False,
        edges,
        width,
        training,
        project,
        project_backward,
        dropout,
        n_dst * width + act,
        edge_elements,
        kept if training else 0,
        x_grad,
        tuple(o for o in (dropout, n_src * width, n_dst * width, act) if o),
        n_src,
    )
