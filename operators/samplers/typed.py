"""Typed neighbour sampling: per-relation fan-outs into per-layer typed blocks.

:class:`TypedNeighborSampler` is :class:`~strata.operators.samplers.NeighborSampler`
on a :class:`~strata.storage.hetero.TypedGraph`. For each layer, outward from the
seeds, every relation ``src -r-> dst`` samples up to ``fanout`` in-neighbours (of
type ``src``) for each destination node of type ``dst``, with the **same kernel**
and the same keyed RNG as the homogeneous sampler
(:func:`~strata.operators.samplers.neighbor._sample_positions`): the draws for
vertex ``v`` of relation ``r`` in layer ``l`` of batch ``b`` of epoch ``e`` are a
pure function of ``(seed, epoch, b, rank, l, r, v)``, so any batch can be
regenerated alone. The sources a relation reaches join its source type's node
set, numbered after that type's destinations (destinations first, as in a
:class:`~strata.operators.samplers.Block`); the next layer's destinations are
all of this layer's sources, of every type.

Fan-outs are in **layer order** (``fanouts[-1]`` is the seeds' own hop), one list
for every relation or a list per relation; ``-1`` takes every in-neighbour.
Without replacement a node keeps ``min(deg, fanout)`` distinct in-edges per
relation, chosen uniformly (Floyd's algorithm).

Examples:
    >>> import numpy as np
    >>> from strata.storage.hetero import Relation, TypedGraph
    >>> clicked = Relation("user", "clicked", "item")
    >>> g = TypedGraph.from_edges(
    ...     {clicked: (np.array([0, 1, 2, 2]), np.array([0, 0, 0, 1]))},
    ...     num_nodes={"user": 3, "item": 2},
    ... ).with_reverse(clicked, "clicked_by")
    >>> sampler = TypedNeighborSampler(g, fanouts=[2, 2], seed=0)
    >>> blocks = sampler.sample({"user": np.array([2])}, epoch=0, batch=0)
    >>> blocks[-1].dst_global_ids("user").tolist(), blocks[-1].num_dst["item"]
    ([2], 0)
    >>> sorted(blocks[-1].src_global_ids["item"].tolist())  # user 2 clicked 0, 1
    [0, 1]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numba
import numpy as np

from strata.operators.errors import OperatorError
from strata.operators.samplers.neighbor import (
    SamplerConfig,
    _sample_positions,
    _ScratchPool,
)
from strata.operators.samplers.rng import batch_key
from strata.operators.samplers.typed_block import TypedBlock, full_graph_block
from strata.storage._types import Int64Array
from strata.storage.hetero import Relation, RelationCSR, TypedGraph

__all__ = ["TypedBlock", "TypedNeighborSampler", "full_blocks", "full_graph_block"]

Fanouts = Sequence[int] | Mapping[Relation, Sequence[int]]


@numba.njit(cache=True, nogil=True)
def _register_destinations(
    dst: np.ndarray, local_of: np.ndarray, src: np.ndarray
) -> int:
    """Number ``dst`` as local ``0..len-1`` (written to ``src``); -1 or a repeat.

    On a repeated id the ids registered so far are reset and its position is
    returned, so the scratch map stays all -1.
    """
    for i in range(dst.shape[0]):
        v = dst[i]
        if local_of[v] != -1:
            for k in range(i):
                local_of[dst[k]] = -1
            return i
        local_of[v] = i
        src[i] = v
    return -1


@numba.njit(cache=True, nogil=True)
def _number_sources(
    sources: np.ndarray, local_of: np.ndarray, src: np.ndarray, num_src: int
) -> tuple[np.ndarray, int]:
    """Local ids of ``sources``, appending unseen ones to ``src`` after ``num_src``."""
    local = np.empty(sources.shape[0], dtype=np.int64)
    for k in range(sources.shape[0]):
        u = sources[k]
        lu = local_of[u]
        if lu == -1:
            lu = num_src
            local_of[u] = lu
            src[num_src] = u
            num_src += 1
        local[k] = lu
    return local, num_src


@numba.njit(cache=True, nogil=True)
def _reset(local_of: np.ndarray, src: np.ndarray, num_src: int) -> None:
    for s in range(num_src):
        local_of[src[s]] = -1


class TypedNeighborSampler:
    """Samples per-layer typed blocks around typed seeds, reproducibly per batch.

    Args:
        graph: the typed graph; a relation's messages flow from its ``src`` type
            to its ``dst`` type, so a node's candidates are its in-neighbours.
        fanouts: per-layer fan-outs in layer order, the same for every relation,
            or ``{relation: fan-outs}`` covering every relation of ``graph`` (all
            of the same length). Each ``>= 1``, or ``-1`` for all.
        seed: the run's seed; with ``(epoch, batch)`` it fixes every draw.
        rank: worker rank in a data-parallel gang (0 alone); part of the key.
        replace: sample with replacement (exactly ``fanout`` draws per node).

    ``sample`` is thread-safe (its kernels release the GIL).

    Raises:
        OperatorError: on a graph that is not a TypedGraph, bad fan-outs, or a
            fan-out mapping that misses or adds relations.
    """

    def __init__(
        self,
        graph: TypedGraph,
        fanouts: Fanouts,
        seed: int = 0,
        *,
        rank: int = 0,
        replace: bool = False,
    ) -> None:
        where = "TypedNeighborSampler"
        if not isinstance(graph, TypedGraph):
            raise OperatorError.build(
                "graph",
                where,
                "a strata.storage.hetero.TypedGraph",
                type(graph).__name__,
            )
        if seed < 0 or rank < 0:
            raise OperatorError.build(
                "seed and rank", where, "integers >= 0", f"seed={seed}, rank={rank}"
            )
        self.graph = graph
        self.seed = int(seed)
        self.rank = int(rank)
        self.replace = bool(replace)
        self.fanouts = _per_relation(graph, fanouts, where)
        if self.fanouts:
            self.num_layers = len(next(iter(self.fanouts.values())))
        elif isinstance(fanouts, Mapping):
            self.num_layers = 0  # no relations, no fan-outs: nothing to sample
        else:
            self.num_layers = SamplerConfig(fanouts=tuple(fanouts)).num_layers
        self._relations = tuple(graph.relations)
        self._pools = {t: _ScratchPool(n) for t, n in graph.num_nodes.items()}
        # Per-(layer, relation) salts keep every vertex's draws distinct.
        self._stride = max([1, *graph.num_nodes.values()])

    def sample(
        self, seeds: Mapping[str, Sequence[int] | np.ndarray], epoch: int, batch: int
    ) -> list[TypedBlock]:
        """Sample the typed blocks of one mini-batch.

        Args:
            seeds: per node type, distinct global ids of the batch's output nodes
                (types left out have none).
            epoch: epoch number (part of the RNG key).
            batch: the batch's position in its epoch (part of the RNG key).

        Returns:
            ``num_layers`` blocks in layer order: ``blocks[0]``'s sources are the
            input rows to gather per type, ``blocks[-1]``'s destinations the
            seeds, and ``blocks[l].dst_global_ids(t) == blocks[l + 1]
            .src_global_ids[t]`` for every type.

        Raises:
            OperatorError: on an unknown node type, non-integer, out-of-range or
                repeated seeds.
        """
        where = "TypedNeighborSampler.sample"
        dst = self._check_seeds(seeds, where)
        key = batch_key(self.seed, epoch, batch, self.rank)
        blocks: list[TypedBlock] = []
        for layer in range(self.num_layers - 1, -1, -1):
            block = self._layer(dst, layer, key, where)
            blocks.append(block)
            dst = dict(block.src_global_ids)
        blocks.reverse()
        return blocks

    def _layer(
        self, dst: dict[str, Int64Array], layer: int, key: np.uint64, where: str
    ) -> TypedBlock:
        """One block: every relation sampled into its destinations, then numbered."""
        drawn: dict[Relation, tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {}
        for index, rel in enumerate(self._relations):
            csr = self.graph.relations[rel]
            salt = np.int64((layer * len(self._relations) + index) * self._stride)
            indptr, positions = _sample_positions(
                csr.indptr,
                dst[rel.dst],
                self.fanouts[rel][layer],
                self.replace,
                key,
                salt,
            )
            weights = None if csr.weights is None else csr.weights[positions]
            drawn[rel] = (indptr, csr.indices[positions], weights)
        src_ids: dict[str, Int64Array] = {}
        local: dict[Relation, RelationCSR] = {}
        for node_type, node_dst in dst.items():
            into = [r for r in self._relations if r.src == node_type]
            size = node_dst.shape[0] + sum(drawn[r][1].shape[0] for r in into)
            buffer = np.empty(size, dtype=np.int64)
            scratch = self._pools[node_type].acquire()
            try:
                status = _register_destinations(node_dst, scratch, buffer)
                if status != -1:
                    raise OperatorError.build(
                        f"seeds[{node_type!r}]",
                        where,
                        "distinct node ids",
                        f"node {int(node_dst[status])} repeated at position {status}",
                        "deduplicate the batch (np.unique) before sampling",
                    )
                num_src = node_dst.shape[0]
                for rel in into:
                    indptr, sources, weights = drawn[rel]
                    ids, num_src = _number_sources(sources, scratch, buffer, num_src)
                    local[rel] = RelationCSR(indptr, ids, weights)
                _reset(scratch, buffer, num_src)
            finally:
                self._pools[node_type].release(scratch)
            src_ids[node_type] = buffer[:num_src].copy()
        return TypedBlock(
            src_global_ids=src_ids,
            num_dst={t: int(d.shape[0]) for t, d in dst.items()},
            relations={rel: local[rel] for rel in self._relations},
        )

    def _check_seeds(
        self, seeds: Mapping[str, Sequence[int] | np.ndarray], where: str
    ) -> dict[str, Int64Array]:
        unknown = sorted(set(seeds) - set(self.graph.node_types))
        if unknown:
            raise OperatorError.build(
                "seeds",
                where,
                f"node types among {list(self.graph.node_types)}",
                str(unknown),
            )
        out: dict[str, Int64Array] = {}
        for node_type, count in self.graph.num_nodes.items():
            array = np.asarray(seeds.get(node_type, np.empty(0, dtype=np.int64)))
            subject = f"seeds[{node_type!r}]"
            if array.ndim != 1:
                raise OperatorError.build(
                    subject, where, "a 1-D id array", f"shape {array.shape}"
                )
            if array.size and not np.issubdtype(array.dtype, np.integer):
                raise OperatorError.build(
                    subject, where, "integer node ids", f"dtype {array.dtype}"
                )
            ids = np.ascontiguousarray(array, dtype=np.int64)
            if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= count):
                raise OperatorError.build(
                    subject,
                    where,
                    f"ids in [0, {count}) (num_nodes[{node_type!r}])",
                    f"ids in [{int(ids.min())}, {int(ids.max())}]",
                )
            out[node_type] = ids
        return out

    def __repr__(self) -> str:
        fanouts = {str(r): list(f) for r, f in self.fanouts.items()}
        return (
            f"TypedNeighborSampler(fanouts={fanouts}, replace={self.replace}, "
            f"seed={self.seed})"
        )


def _per_relation(
    graph: TypedGraph, fanouts: Fanouts, where: str
) -> dict[Relation, tuple[int, ...]]:
    """Fan-outs for every relation of ``graph``, validated, all of one length."""
    if isinstance(fanouts, Mapping):
        given = {Relation(*r): f for r, f in fanouts.items()}
        missing = [str(r) for r in graph.relations if r not in given]
        extra = [str(r) for r in given if r not in graph.relations]
        if missing or extra:
            raise OperatorError.build(
                "fanouts",
                where,
                "one fan-out list per relation of the graph",
                f"missing {missing}, unknown {extra}",
            )
    else:
        given = dict.fromkeys(graph.relations, fanouts)
    out = {r: SamplerConfig(fanouts=tuple(given[r])).fanouts for r in graph.relations}
    lengths = {len(f) for f in out.values()}
    if len(lengths) > 1:
        raise OperatorError.build(
            "fanouts",
            where,
            "the same number of layers for every relation",
            str({str(r): list(f) for r, f in out.items()}),
        )
    return out


def full_blocks(
    graph: TypedGraph, seeds: Mapping[str, Sequence[int] | np.ndarray], num_layers: int
) -> list[TypedBlock]:
    """Full-neighbourhood blocks around ``seeds`` (every fan-out ``-1``).

    For evaluating a few nodes exactly; for every node, run the layers on
    :func:`full_graph_block` instead (layer-wise inference, no sampling).
    """
    return TypedNeighborSampler(graph, [-1] * num_layers).sample(seeds, 0, 0)
