"""Relation-wise message passing on typed graphs (PyG's ``HeteroConv``).

:class:`HeteroConv` holds one :class:`~strata.operators.layers.MessagePassing`
layer per :class:`~strata.storage.hetero.Relation`. Each relation's layer runs on
that relation alone, as a **bipartite** graph: messages from the rows of its
source type, the root term from the rows of its destination type, through the
layer's one definition (``conv(graph, (x_src, x_dst))``, see
:meth:`MessagePassing.forward`); nothing here knows which layer it runs. The
outputs of the relations into one destination type are then combined (summed by
default), so a 2-layer heterogeneous GraphSAGE is
``out_t = sum_{r: s -> t} (W_l^r mean_{j in N_r(i)} x_j + W_r^r x_i + b^r)``.

The same layer runs on a sampled :class:`~strata.operators.samplers.TypedBlock`
(:meth:`HeteroConv.forward`) and on the whole :class:`~strata.storage.hetero.TypedGraph`
(:meth:`HeteroConv.forward_full`, full-neighbourhood layer-wise inference for
evaluation: each relation is one fused sparse product over all its edges).

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage.hetero import Relation, TypedGraph
    >>> clicked = Relation("user", "clicked", "item")
    >>> g = TypedGraph.from_edges(
    ...     {clicked: (np.array([0, 1, 2]), np.array([0, 0, 1]))},
    ...     num_nodes={"user": 3, "item": 2},
    ... ).with_reverse(clicked, "clicked_by")
    >>> conv = HeteroSAGE({"user": 4, "item": 6}, 8, g.relations)
    >>> x = {"user": torch.randn(3, 4), "item": torch.randn(2, 6)}
    >>> {t: tuple(h.shape) for t, h in conv.forward_full(g, x).items()}
    {'item': (2, 8), 'user': (3, 8)}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import nn

from strata.operators.errors import OperatorError
from strata.operators.kernels.device_graph import DeviceGraph
from strata.operators.layers.message_passing import (
    MessagePassing,
    destination_rows,
    message_passing_layer,
)
from strata.operators.layers.sage_conv import SAGEConv
from strata.operators.samplers.typed_block import TypedBlock, full_graph_block
from strata.storage.hetero import Relation, RelationCSR, TypedGraph

_COMBINE = ("sum", "mean", "max")


def relation_graph(csr: RelationCSR, num_src: int, device: torch.device) -> DeviceGraph:
    """One relation as a bipartite :class:`DeviceGraph` on ``device`` (cached).

    Rows are the relation's destinations and columns its ``num_src`` sources;
    the graph is cached on the CSR, so its derived structures (degrees,
    transpose) are built once per relation and device.
    """
    key = (device, num_src)
    cache = csr._device_cache
    if key not in cache:
        weight = None
        if csr.weights is not None:
            weight = torch.from_numpy(csr.weights).to(device)
        cache[key] = DeviceGraph(
            torch.from_numpy(csr.indptr).to(device),
            torch.from_numpy(csr.indices).to(device),
            num_src,
            csr.num_dst,
            edge_weight=weight,
            # Sources and destinations are separate row sets (x_src, x_dst).
            bipartite=True,
        )
    graph: DeviceGraph = cache[key]
    return graph


class HeteroConv(nn.Module):
    """One message-passing layer per relation, combined per destination type.

    Args:
        convs: the layer of every relation; each is called with
            ``(x[rel.src], x[rel.dst] destination rows)``.
        aggr: how the relations into one node type are combined: ``"sum"``
            (default, as PyG), ``"mean"`` or ``"max"``.

    Raises:
        OperatorError: on an unknown ``aggr``, no relations, or a layer that is
            not a :class:`MessagePassing` reduction (attention is refused).
    """

    def __init__(self, convs: Mapping[Relation, nn.Module], aggr: str = "sum") -> None:
        super().__init__()
        where = "HeteroConv"
        if aggr not in _COMBINE:
            raise OperatorError.build(
                "aggr", where, f"one of {list(_COMBINE)}", repr(aggr)
            )
        if not convs:
            raise OperatorError.build("convs", where, "at least one relation", "none")
        self.relations: tuple[Relation, ...] = tuple(
            sorted((Relation(*r) for r in convs), key=tuple)
        )
        by_relation = {Relation(*r): c for r, c in convs.items()}
        layers: list[MessagePassing] = [
            message_passing_layer(by_relation[r], f"{where}[{r}]")
            for r in self.relations
        ]
        # A list, not a ModuleDict: relation names may hold any character.
        self.convs = nn.ModuleList(layers)
        self.aggr = aggr

    def reset_parameters(self) -> None:
        """Reset every relation's layer."""
        for conv in self.convs:
            conv.reset_parameters()  # type: ignore[operator]

    def conv(self, rel: Relation) -> MessagePassing:
        """The layer of relation ``rel``."""
        return message_passing_layer(
            self.convs[self.relations.index(Relation(*rel))], "HeteroConv.conv"
        )

    @property
    def dst_types(self) -> tuple[str, ...]:
        """The node types this layer outputs (those some relation points into)."""
        return tuple(sorted({r.dst for r in self.relations}))

    def forward(
        self, block: TypedBlock, x: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Run every relation's layer on ``block`` and combine per destination type.

        Args:
            block: one layer of a sampled batch (or :func:`full_graph_block`).
            x: per node type, ``[block.num_src(type), F_type]`` input rows.

        Returns:
            Per destination type ``t`` (sorted), ``[block.num_dst[t], out]``.

        Raises:
            OperatorError: on a relation missing from the block, a node type
                missing from ``x``, or a row count that differs from the block's.

        Shapes:
            x[t]: ``[num_src(t), F_t]``; returns ``[num_dst[t], out]``.
        """
        where = "HeteroConv.forward"
        outputs: dict[str, list[torch.Tensor]] = {}
        for rel, conv in zip(self.relations, self.convs, strict=True):
            csr = block.relations.get(rel)
            if csr is None:
                raise OperatorError.build(
                    "block",
                    where,
                    f"relation {rel}",
                    f"relations {[str(r) for r in block.relations]}",
                    "sample the graph the layer was built for",
                )
            x_src, x_all_dst = _rows(x, rel.src, where), _rows(x, rel.dst, where)
            x_dst = destination_rows(x_all_dst, block.num_dst[rel.dst])
            graph = relation_graph(csr, block.num_src(rel.src), x_src.device)
            outputs.setdefault(rel.dst, []).append(conv(graph, (x_src, x_dst)))
        return {t: self._combine(outputs[t]) for t in sorted(outputs)}

    def forward_full(
        self, graph: TypedGraph, x: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """The layer on every node of ``graph`` (full neighbourhoods, no sampling).

        Layer-wise inference: call it once per layer, feeding one layer's outputs
        to the next; each relation is one sparse product over all its edges.

        Args:
            graph: the typed graph.
            x: per node type, ``[num_nodes[type], F_type]`` rows.
        """
        return self(full_graph_block(graph), x)

    def _combine(self, outs: list[torch.Tensor]) -> torch.Tensor:
        if len(outs) == 1:
            return outs[0]
        if self.aggr == "sum":
            total = outs[0] + outs[1]
            for out in outs[2:]:
                total = total + out
            return total
        stacked = torch.stack(outs)
        if self.aggr == "mean":
            return stacked.mean(dim=0)
        return stacked.max(dim=0).values

    def __repr__(self) -> str:
        inner = ", ".join(
            f"{r}: {c!r}" for r, c in zip(self.relations, self.convs, strict=True)
        )
        return f"{type(self).__name__}({{{inner}}}, aggr={self.aggr!r})"


class HeteroSAGE(HeteroConv):
    """Relation-wise GraphSAGE: a :class:`SAGEConv` per relation, summed.

    Args:
        in_dims: input width per node type.
        out_dim: output width (every destination type).
        relations: the relations to aggregate over (e.g. ``graph.relations``).
        aggr: SAGE's per-relation aggregation (``"mean"`` default).
        combine: how relations into one type are combined (``"sum"``).
        root_weight: add each relation's ``W_r x_i`` (as PyG).
    """

    def __init__(
        self,
        in_dims: Mapping[str, int],
        out_dim: int,
        relations: Iterable[Relation],
        *,
        aggr: str = "mean",
        combine: str = "sum",
        root_weight: bool = True,
    ) -> None:
        convs: dict[Relation, nn.Module] = {}
        for rel in relations:
            rel = Relation(*rel)
            for node_type in (rel.src, rel.dst):
                if node_type not in in_dims:
                    raise OperatorError.build(
                        f"in_dims[{node_type!r}]",
                        "HeteroSAGE",
                        "an input width for every node type of the relations",
                        f"types {sorted(in_dims)}",
                    )
            convs[rel] = SAGEConv(
                (in_dims[rel.src], in_dims[rel.dst]),
                out_dim,
                aggr=aggr,
                root_weight=root_weight,
            )
        super().__init__(convs, aggr=combine)


def _rows(x: Mapping[str, torch.Tensor], node_type: str, where: str) -> torch.Tensor:
    if node_type not in x:
        raise OperatorError.build(
            f"x[{node_type!r}]",
            where,
            "input rows for every node type the relations read",
            f"types {sorted(x)}",
        )
    return x[node_type]
