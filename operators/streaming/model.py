"""StreamingModel: a trained batch GNN as a stack of incremental layer rules.

:meth:`StreamingModel.from_module` takes a trained model whose layers are
:class:`~strata.operators.layers.message_passing.MessagePassing` layers (GCN,
GraphSAGE with mean, sum, max or max-pool aggregation, GIN, or a user's own), a
single such layer, or any module with ``convs`` and ``act`` built from them, and
derives one float64 :class:`~strata.operators.streaming.rules.LayerRule` per layer
from the layer's definition. The result is plain data: :meth:`to_arrays` gives a
dict of numpy arrays and scalars (each layer's import path, constructor arguments
and float64 parameters), so it crosses the process executor's wire and goes into
checkpoints (no pickle).

Examples:
    >>> import torch
    >>> from strata.operators.layers import GraphSAGE
    >>> _ = torch.manual_seed(0)
    >>> model = StreamingModel.from_module(GraphSAGE(8, 16, 4, num_layers=2))
    >>> model.num_layers, model.in_dim, model.out_dim, model.act
    (2, 8, 4, 'relu')
    >>> StreamingModel.from_arrays(model.to_arrays()).rules[1]
    LayerRule(SAGEConv, aggr=mean, 16 -> 4)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from strata.operators.errors import OperatorError
from strata.operators.streaming.rules import LayerRule

_ACTS = {F.relu: "relu", torch.relu: "relu", F.elu: "elu"}


def _act_name(act: Any) -> str:
    if act is None:
        return "identity"
    for fn, name in _ACTS.items():
        if act is fn:
            return name
    if isinstance(act, nn.ReLU):
        return "relu"
    if isinstance(act, nn.ELU) and act.alpha == 1.0:
        return "elu"
    raise OperatorError.build(
        "act",
        "StreamingModel.from_module",
        "relu, elu or no activation",
        repr(act),
        "the streaming layers apply the activation in numpy",
    )


@dataclass(frozen=True, slots=True, eq=False)
class StreamingModel:
    """Layer rules of an L-layer model, and the activation between layers.

    Attributes:
        rules: One rule per layer, input layer first.
        act: ``"relu"``, ``"elu"`` or ``"identity"``.
    """

    rules: tuple[LayerRule, ...]
    act: str = "relu"

    def __post_init__(self) -> None:
        for i in range(1, len(self.rules)):
            if self.rules[i].in_dim != self.rules[i - 1].out_dim:
                raise OperatorError.build(
                    f"layer {i}",
                    "StreamingModel",
                    f"input width {self.rules[i - 1].out_dim}",
                    str(self.rules[i].in_dim),
                )

    @classmethod
    def from_module(cls, model: nn.Module) -> StreamingModel:
        """Copy the weights of a trained model (see the module docstring).

        Raises:
            OperatorError: for a layer without an incremental rule (attention)
                or an unsupported activation.
        """
        convs = getattr(model, "convs", None)
        if convs is None:
            return cls((LayerRule.from_module(model),), "identity")
        rules = tuple(LayerRule.from_module(conv) for conv in convs)
        return cls(rules, _act_name(getattr(model, "act", None)))

    @property
    def num_layers(self) -> int:
        """Number of layers."""
        return len(self.rules)

    @property
    def in_dim(self) -> int:
        """Input feature width."""
        return self.rules[0].in_dim

    @property
    def out_dim(self) -> int:
        """Embedding width."""
        return self.rules[-1].out_dim

    def to_arrays(self) -> dict[str, Any]:
        """A wire- and checkpoint-friendly dict."""
        return {"act": self.act, "rules": [rule.to_arrays() for rule in self.rules]}

    @classmethod
    def from_arrays(cls, data: dict[str, Any]) -> StreamingModel:
        """Inverse of :meth:`to_arrays`."""
        rules = tuple(LayerRule.from_arrays(r) for r in data["rules"])
        return cls(rules, str(data["act"]))

    def __repr__(self) -> str:
        kinds = ", ".join(f"{r.kind}-{r.aggr}" for r in self.rules)
        return f"StreamingModel([{kinds}], act={self.act})"
