"""What the cost model reads off a model's built layers (never off its name).

:func:`model_shape` builds the model a :class:`~strata.operators.trainers.ModelConfig`
describes (on the ``meta`` device: no memory, no random draws) and reads every
:class:`~strata.operators.layers.message_passing.MessagePassing` layer's declaration:
its aggregation value, whether it sends its features unchanged, its transform's
weight shape, and the dense products of its ``message``, ``root`` and ``update``
(traced once on a one-row ``meta`` input, so a user's layer is read the same way
as the built-in ones). Widths follow from the same trace: a layer's output width
is what its ``update`` returns, its heads the message's middle dimension.

Examples:
    >>> from strata.operators.trainers import ModelConfig
    >>> shape = model_shape(ModelConfig("sage", hidden=16), 100, 7)
    >>> [(s.in_width, s.out_width, s.transform, s.root) for s in shape.layers]
    [(100, 16, (100, 16), ((100, 16),)), (16, 7, (16, 7), ((16, 7),))]
    >>> model_shape(ModelConfig("gat", hidden=8, heads=4), 100, 7).widths
    (100, 32, 7)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from strata.operators.errors import OperatorError
from strata.operators.layers.message_passing import (
    Aggregation,
    Attention,
    MessagePassing,
)
from strata.operators.trainers.config import ModelConfig

__all__ = ["LayerShape", "ModelShape", "model_shape"]

#: A dense product ``(in, out)`` per row of its input.
Product = tuple[int, int]


@dataclass(frozen=True, slots=True)
class LayerShape:
    """One layer's declaration, as the cost model counts it.

    Attributes:
        aggregation: the layer's :class:`Aggregation` value.
        in_width: input features per row.
        out_width: output features per row (all heads).
        sends_features: ``message`` is the identity (the aggregate of a constant
            input can be reused, :mod:`strata.operators.kernels.reuse`).
        transform: ``(in, out)`` of the transform's weight, or None.
        message: dense products of ``message``, per source row.
        root: dense products of ``root``, per destination row.
        update: dense products of ``update``, per destination row, in order.
        message_params: ``message`` reads parameters (its output needs a
            gradient even when the input does not).
        has_root: ``root`` returns a term (``uses_root`` and not None).
        root_params: the root term reads parameters.
        message_width: features per message row (all heads).
        heads: the message's heads (1 for a flat message).
        self_loops: the layer aggregates over one self-loop per destination
            (existing loops replaced): the aggregation's ``self_loop``, or an
            attention layer's declared ``add_self_loops``.
    """

    aggregation: Aggregation
    in_width: int
    out_width: int
    sends_features: bool
    transform: Product | None
    message: tuple[Product, ...]
    root: tuple[Product, ...]
    update: tuple[Product, ...]
    message_params: bool
    has_root: bool
    root_params: bool
    message_width: int
    heads: int
    self_loops: bool

    @property
    def attention(self) -> bool:
        """The layer attends (its own forward: project, score, weighted sum)."""
        return isinstance(self.aggregation, Attention)


@dataclass(frozen=True, slots=True)
class ModelShape:
    """A model's layers, its feature dropout and its parameter count.

    Attributes:
        layers: every layer, first first.
        dropout: feature dropout before every layer.
        parameters: trainable scalars of the whole model.
    """

    layers: tuple[LayerShape, ...]
    dropout: float
    parameters: int

    @property
    def widths(self) -> tuple[int, ...]:
        """Input width of every layer and the output width: ``d_0 .. d_L``."""
        return (self.layers[0].in_width, *(s.out_width for s in self.layers))

    @property
    def attention(self) -> bool:
        """Some layer attends (partition-parallel and incremental runs refuse it)."""
        return any(s.attention for s in self.layers)

    @property
    def self_loops(self) -> bool:
        """Some layer aggregates over added self-loops (the cached graph has them)."""
        return any(s.self_loops for s in self.layers)


def model_shape(model: ModelConfig, in_channels: int, out_channels: int) -> ModelShape:
    """The shape of ``model`` built for ``in_channels`` -> ``out_channels``.

    Raises:
        OperatorError: a model that is not a stack of MessagePassing layers (a
            user's ``module`` returning anything else).
    """
    try:
        hash(model)
    except TypeError:  # a user's unhashable layer factory: not cached
        return _model_shape.__wrapped__(model, in_channels, out_channels)
    return _model_shape(model, in_channels, out_channels)


@functools.lru_cache(maxsize=64)
def _model_shape(model: ModelConfig, in_channels: int, out_channels: int) -> ModelShape:
    try:
        return _build_shape(model, in_channels, out_channels, torch.device("meta"))
    except (NotImplementedError, RuntimeError):
        # a user's layer with an operation that has no meta kernel: one row
        # on the CPU instead (its parameters are allocated, that is all)
        return _build_shape(model, in_channels, out_channels, torch.device("cpu"))


def _build_shape(
    model: ModelConfig, in_channels: int, out_channels: int, device: torch.device
) -> ModelShape:
    # meta: no parameter memory; fork_rng: the caller's random stream untouched
    with torch.random.fork_rng(devices=[]), device:
        built = model.build_module(in_channels, out_channels)
    convs = getattr(built, "convs", None)
    if not isinstance(convs, nn.ModuleList) or not all(
        isinstance(c, MessagePassing) for c in convs
    ):
        raise OperatorError.build(
            "model",
            "strata plan",
            "a stack of MessagePassing layers (a built-in model or layer=...)",
            f"a user's module ({type(built).__name__})",
            "the planner counts what each MessagePassing layer declares",
        )
    layers = []
    width = in_channels
    for conv in convs:
        assert isinstance(conv, MessagePassing)
        layers.append(_layer_shape(conv, width, device))
        width = layers[-1].out_width
    parameters = sum(p.numel() for p in built.parameters() if p.requires_grad)
    return ModelShape(tuple(layers), float(getattr(built, "dropout", 0.0)), parameters)


class _Products(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Records ``(in, out)`` of every dense product dispatched."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.products: list[Product] = []

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if func.overloadpacket.__name__ in ("mm", "addmm"):
            a, b = args[-2], args[-1]
            self.products.append((int(a.shape[1]), int(b.shape[1])))
        return func(*args, **(kwargs or {}))


def _traced(call: Any) -> tuple[Any, tuple[Product, ...]]:
    with _Products() as mode:
        out = call()
    return out, tuple(mode.products)


def _layer_shape(
    conv: MessagePassing, in_width: int, device: torch.device
) -> LayerShape:
    """Trace the layer's vertex-local parts on one ``meta`` row of ``in_width``."""
    with torch.enable_grad():  # requires_grad tells which parts read parameters
        return _trace(conv, in_width, device)


def _trace(conv: MessagePassing, in_width: int, device: torch.device) -> LayerShape:
    x = torch.zeros(1, in_width, device=device)
    message, message_products = _traced(lambda: conv.message(x))
    wb = conv.transform()
    z = message
    if wb is not None:
        z = F.linear(message, wb[0], wb[1])
    root: torch.Tensor | None = None
    root_products: tuple[Product, ...] = ()
    if conv.uses_root:
        root, root_products = _traced(lambda: conv.root(x))
    out, update_products = _traced(lambda: conv.update(z, root))
    attention = isinstance(conv.aggregation, Attention)
    loops = conv.aggregation.self_loop
    if attention:  # the layer's own forward adds the loops it declares
        loops = bool(getattr(conv, "add_self_loops", loops))
    return LayerShape(
        aggregation=conv.aggregation,
        in_width=in_width,
        out_width=int(out.shape[-1]),
        sends_features=conv.sends_features,
        transform=None if wb is None else (int(wb[0].shape[1]), int(wb[0].shape[0])),
        message=message_products,
        root=root_products,
        update=update_products,
        message_params=bool(message.requires_grad),
        has_root=root is not None,
        root_params=root is not None and bool(root.requires_grad),
        message_width=int(message[0].numel()),
        heads=int(message.shape[1]) if message.dim() == 3 else 1,
        self_loops=bool(loops),
    )
