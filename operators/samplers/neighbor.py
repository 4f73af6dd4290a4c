"""Uniform neighbour sampling into per-layer blocks, reproducible per mini-batch.

:class:`NeighborSampler` samples, for a batch of seed nodes, up to ``fanouts[l]``
in-neighbours per destination node of layer ``l`` and returns one :class:`Block` per
layer. Every draw comes from the keyed stateless RNG of
:mod:`strata.operators.samplers.rng`: the neighbours of vertex ``v`` in layer ``l`` of
batch ``b`` of epoch ``e`` are a pure function of ``(seed, epoch, b, l, v)``. Any batch
of any epoch can therefore be regenerated alone, in any order, on any thread — which is
what lets a trainer compute an epoch's schedule ahead of time (``systems/rapidgnn.md``
§3.2).

Fan-outs are listed **in layer order**, as in DGL and the GraphSAGE paper:
``fanouts[0]`` is the fan-out of the input layer (the farthest hop) and
``fanouts[-1]`` the fan-out of the seeds' own neighbourhood. (PyG's
``num_neighbors`` lists hops from the seeds, i.e. the reverse.) ``-1`` takes every
in-neighbour.

Without replacement, a node with ``deg <= fanout`` keeps all its in-neighbours;
otherwise ``fanout`` distinct edges are chosen uniformly with Floyd's algorithm. With
replacement, a node with ``deg > 0`` gets exactly ``fanout`` independent uniform
draws (repeats possible), as in DGL and PyG.

References:
    William L. Hamilton, Rex Ying, Jure Leskovec. *Inductive Representation Learning
    on Large Graphs*. NeurIPS 2017, arXiv:1706.02216.
    Jon Bentley, Bob Floyd. *Programming Pearls: A Sample of Brilliance*. CACM 1987.

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2, 3, 3]), np.array([1, 2, 3, 0, 1]))
    >>> sampler = NeighborSampler(g, SamplerConfig(fanouts=(2, 2)), seed=0)
    >>> blocks = sampler.sample(np.array([1]), epoch=0, batch_index=0)
    >>> [b.num_dst for b in blocks], blocks[-1].dst_global_ids.tolist()
    ([3, 1], [1])
    >>> sorted(blocks[-1].src_global_ids.tolist())  # node 1 and its in-neighbours
    [0, 1, 3]
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np

from strata.operators.errors import OperatorError
from strata.operators.samplers.block import Block, Hop
from strata.operators.samplers.rng import batch_key, bounded, hash3
from strata.storage import CSRGraph
from strata.storage._types import Int64Array


@dataclass(frozen=True, slots=True)
class SamplerConfig:
    """How many in-neighbours to sample per layer.

    Attributes:
        fanouts: per-layer fan-outs in layer order (``fanouts[-1]`` is the seeds'
            layer); each ``>= 1``, or ``-1`` for all in-neighbours.
        replace: sample with replacement (exactly ``fanout`` draws per node).
    """

    fanouts: tuple[int, ...]
    replace: bool = False

    def __post_init__(self) -> None:
        where = "SamplerConfig"
        fanouts = tuple(int(f) for f in self.fanouts)
        object.__setattr__(self, "fanouts", fanouts)
        if not fanouts:
            raise OperatorError.build(
                "fanouts", where, "one fan-out per layer", "an empty list"
            )
        bad = [f for f in fanouts if f != -1 and f < 1]
        if bad:
            raise OperatorError.build(
                "fanouts",
                where,
                "fan-outs >= 1, or -1 for all neighbours",
                str(list(fanouts)),
            )

    @property
    def num_layers(self) -> int:
        """Number of layers (blocks) the config produces."""
        return len(self.fanouts)


def check_fanouts(config: SamplerConfig, num_layers: int, where: str) -> None:
    """Raise unless the sampler produces exactly one block per model layer.

    Trainers call this once, before the first batch, so a mismatch fails early.

    Args:
        config: the sampler configuration.
        num_layers: number of message-passing layers of the model.
        where: the caller, for the error message.

    Raises:
        OperatorError: when ``len(config.fanouts) != num_layers``.
    """
    if config.num_layers != num_layers:
        raise OperatorError.build(
            "fanouts",
            where,
            f"{num_layers} fan-outs (one per model layer)",
            f"{config.num_layers}: {list(config.fanouts)}",
            "give SamplerConfig one fan-out per message-passing layer",
        )


@numba.njit(cache=True, nogil=True)
def _counts(
    in_indptr: np.ndarray, dst: np.ndarray, fanout: int, replace: bool
) -> np.ndarray:
    """Row pointers of a layer: each destination keeps ``min(deg, fanout)`` edges."""
    num_dst = dst.shape[0]
    indptr = np.empty(num_dst + 1, dtype=np.int64)
    indptr[0] = 0
    for i in range(num_dst):
        v = dst[i]
        deg = in_indptr[v + 1] - in_indptr[v]
        take = deg
        if fanout >= 0 and deg > 0 and (replace or deg > fanout):
            take = fanout
        indptr[i + 1] = indptr[i] + take
    return indptr


@numba.njit(cache=True, nogil=True)
def _draw(
    start: np.int64,
    deg: np.int64,
    take: np.int64,
    fanout: int,
    replace: bool,
    key: np.uint64,
    vkey: np.uint64,
    out: np.ndarray,
    pos: int,
) -> None:
    """Write the positions (in ``in_indices``) of one node's sampled in-edges.

    ``out[pos:pos + take]`` receives them in draw order. Every layer kernel draws
    through this one function, so they all pick the same edges for a key.
    """
    if take == deg and (fanout < 0 or not replace):
        for k in range(deg):
            out[pos + k] = start + k
    elif replace:
        for t in range(take):
            out[pos + t] = start + bounded(hash3(key, vkey, t), deg)
    else:
        # Floyd: for j = deg-take .. deg-1 draw r in [0, j]; keep r unless
        # already chosen, else keep j. Every take-subset is equally likely.
        for chosen, j in enumerate(range(deg - take, deg)):
            pick = start + bounded(hash3(key, vkey, j), j + 1)
            for q in range(chosen):
                if out[pos + q] == pick:
                    pick = start + j
                    break
            out[pos + chosen] = pick


@numba.njit(cache=True, nogil=True)
def _sample_layer(
    in_indptr: np.ndarray,
    in_indices: np.ndarray,
    dst: np.ndarray,
    fanout: int,
    replace: bool,
    key: np.uint64,
    salt: np.int64,
    local_of: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Sample one layer; return (indptr, local src ids, src global ids, status).

    ``local_of`` is scratch of length num_nodes filled with -1; it maps a global id
    to its local id while the layer is built and is reset before returning.
    ``status`` is -1 on success, else the position of a repeated destination id.
    """
    num_dst = dst.shape[0]
    indptr = _counts(in_indptr, dst, fanout, replace)
    num_edges = indptr[num_dst]
    src = np.empty(num_dst + num_edges, dtype=np.int64)
    local = np.empty(num_edges, dtype=np.int64)
    status = -1
    for i in range(num_dst):
        v = dst[i]
        if local_of[v] != -1:
            status = i
            num_dst = i  # registered so far; reset them below
            break
        local_of[v] = i
        src[i] = v
    num_src = num_dst
    if status == -1:
        for i in range(num_dst):
            v = dst[i]
            start = in_indptr[v]
            deg = in_indptr[v + 1] - start
            pos = indptr[i]
            take = indptr[i + 1] - pos
            _draw(
                start, deg, take, fanout, replace, key, np.uint64(salt + v), local, pos
            )
            for k in range(pos, pos + take):
                u = in_indices[local[k]]
                lu = local_of[u]
                if lu == -1:
                    lu = num_src
                    local_of[u] = lu
                    src[num_src] = u
                    num_src += 1
                local[k] = lu
    for s in range(num_src):
        local_of[src[s]] = -1
    return indptr, local, src[:num_src].copy(), status


@numba.njit(cache=True, nogil=True)
def _sample_positions(
    in_indptr: np.ndarray,
    dst: np.ndarray,
    fanout: int,
    replace: bool,
    key: np.uint64,
    salt: np.int64,
) -> tuple[np.ndarray, np.ndarray]:
    """Sample one layer as (indptr, CSR position of every sampled in-edge).

    The same draws as :func:`_sample_layer` for the same key and salt. The
    positions index ``in_indices`` (the sources) and any per-edge array in CSR
    order (weights), so the typed sampler reads both from one draw.
    """
    indptr = _counts(in_indptr, dst, fanout, replace)
    positions = np.empty(indptr[dst.shape[0]], dtype=np.int64)
    for i in range(dst.shape[0]):
        v = dst[i]
        start = in_indptr[v]
        pos = indptr[i]
        take = indptr[i + 1] - pos
        deg = in_indptr[v + 1] - start
        _draw(
            start, deg, take, fanout, replace, key, np.uint64(salt + v), positions, pos
        )
    return indptr, positions


@numba.njit(cache=True, nogil=True)
def _sample_hop(
    in_indptr: np.ndarray,
    in_indices: np.ndarray,
    dst: np.ndarray,
    fanout: int,
    replace: bool,
    key: np.uint64,
    salt: np.int64,
) -> tuple[np.ndarray, np.ndarray]:
    """Sample one layer as (indptr, global source id of every edge): no numbering.

    The same draws as :func:`_sample_layer` for the same key and salt.
    """
    indptr, sources = _sample_positions(in_indptr, dst, fanout, replace, key, salt)
    for k in range(sources.shape[0]):
        sources[k] = in_indices[sources[k]]
    return indptr, sources


class _ScratchPool:
    """Reusable id-map scratch arrays, one per concurrent ``sample`` call.

    Each array has one slot per graph node, is handed out whole to one caller and
    returned all -1, so threads never share one and nothing is reallocated per batch.
    """

    def __init__(self, num_nodes: int) -> None:
        self._num_nodes = num_nodes
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()

    def acquire(self) -> np.ndarray:
        with self._lock:
            if self._free:
                return self._free.pop()
        dtype = np.int32 if self._num_nodes < 2**31 else np.int64
        return np.full(self._num_nodes, -1, dtype=dtype)

    def release(self, scratch: np.ndarray) -> None:
        with self._lock:
            self._free.append(scratch)


class NeighborSampler:
    """Samples per-layer blocks around seed nodes, reproducibly per batch.

    Args:
        graph: the graph; messages flow along its edges, so a node's candidates
            are its in-neighbours (``graph.csc()``, computed once and cached).
        config: fan-outs and replacement.
        seed: the run's seed; with ``(epoch, batch_index)`` it fixes every draw.
        rank: worker rank in a data-parallel gang (0 alone); part of the key.

    ``sample`` is thread-safe and releases the GIL while it samples, so a
    background thread can prepare the next batches while the model trains.
    """

    def __init__(
        self, graph: CSRGraph, config: SamplerConfig, seed: int = 0, rank: int = 0
    ) -> None:
        where = "NeighborSampler"
        if not isinstance(graph, CSRGraph):
            raise OperatorError.build(
                "graph", where, "a strata.storage.CSRGraph", type(graph).__name__
            )
        if seed < 0 or rank < 0:
            raise OperatorError.build(
                "seed and rank", where, "integers >= 0", f"seed={seed}, rank={rank}"
            )
        self.graph = graph
        self.config = config
        self.seed = int(seed)
        self.rank = int(rank)
        in_adj = graph.csc()
        self._in_indptr = in_adj.indptr
        self._in_indices = in_adj.indices
        self._scratch = _ScratchPool(graph.num_nodes)

    @property
    def num_layers(self) -> int:
        """Number of blocks :meth:`sample` returns."""
        return self.config.num_layers

    def sample(
        self, seeds: Sequence[int] | np.ndarray, epoch: int = 0, batch_index: int = 0
    ) -> list[Block]:
        """Sample the blocks of one mini-batch.

        Args:
            seeds: distinct global ids of the batch's output nodes.
            epoch: epoch number (part of the RNG key).
            batch_index: the batch's position in its epoch (part of the RNG key).

        Returns:
            ``config.num_layers`` blocks in layer order: ``blocks[0]`` feeds the
            first layer (its sources are the input nodes whose features to
            gather) and ``blocks[-1].dst_global_ids`` equals ``seeds``. Layer
            ``l``'s outputs are layer ``l + 1``'s inputs:
            ``blocks[l].dst_global_ids == blocks[l + 1].src_global_ids``.

        Raises:
            OperatorError: on non-integer, out-of-range or repeated seeds.
        """
        where = "NeighborSampler.sample"
        dst = self._check_seeds(seeds, where)
        key = batch_key(self.seed, epoch, batch_index, self.rank)
        return self._blocks(dst, key, 0, where)

    def sample_hop(
        self, seeds: Sequence[int] | np.ndarray, epoch: int = 0, batch_index: int = 0
    ) -> tuple[Hop, list[Block]]:
        """Sample like :meth:`sample`, with the first layer as a :class:`Hop`.

        The draws are those of :meth:`sample` for the same key: the hop lists, in
        global ids, the edges ``sample(...)[0]`` holds in local ids, in the same
        order. A trainer that aggregates the first layer's inputs straight from
        the feature table needs no local numbering of its sources (the largest
        set of a batch), so none is built.

        Returns:
            ``(hop, blocks)``: the first layer, and the ``num_layers - 1`` blocks
            of the later layers, in layer order (``hop.dst_global_ids`` is
            ``blocks[0].src_global_ids``; with one layer, the seeds).

        Raises:
            OperatorError: as :meth:`sample`.
        """
        where = "NeighborSampler.sample_hop"
        dst = self._check_seeds(seeds, where)
        key = batch_key(self.seed, epoch, batch_index, self.rank)
        blocks = self._blocks(dst, key, 1, where)
        if blocks:
            dst = blocks[0].src_global_ids
        elif np.unique(dst).size != dst.size:
            self._blocks(dst, key, 0, where)  # raises, naming the repeated seed
        indptr, sources = _sample_hop(
            self._in_indptr,
            self._in_indices,
            dst,
            self.config.fanouts[0],
            self.config.replace,
            key,
            np.int64(0),
        )
        return Hop(indptr=indptr, sources=sources, dst_global_ids=dst), blocks

    def _blocks(
        self, dst: Int64Array, key: np.uint64, first: int, where: str
    ) -> list[Block]:
        """Blocks of layers ``first .. num_layers - 1`` around ``dst``, layer order."""
        n = self.graph.num_nodes
        fanouts = self.config.fanouts
        blocks: list[Block] = []
        scratch = self._scratch.acquire()
        try:
            # Sample outward from the seeds: the last layer first.
            for layer in range(len(fanouts) - 1, first - 1, -1):
                indptr, local, src, status = _sample_layer(
                    self._in_indptr,
                    self._in_indices,
                    dst,
                    fanouts[layer],
                    self.config.replace,
                    key,
                    np.int64(layer) * np.int64(n),
                    scratch,
                )
                if status != -1:
                    raise OperatorError.build(
                        "seeds",
                        where,
                        "distinct node ids",
                        f"node {int(dst[status])} repeated at position {status}",
                        "deduplicate the batch (np.unique) before sampling",
                    )
                blocks.append(
                    Block(
                        indptr=indptr,
                        indices=local,
                        src_global_ids=src,
                        num_dst=dst.shape[0],
                    )
                )
                dst = src
        finally:
            self._scratch.release(scratch)
        blocks.reverse()
        return blocks

    def _check_seeds(self, seeds: Sequence[int] | np.ndarray, where: str) -> Int64Array:
        array = np.asarray(seeds)
        if array.ndim != 1:
            raise OperatorError.build(
                "seeds", where, "a 1-D id array", f"shape {array.shape}"
            )
        if array.size and not np.issubdtype(array.dtype, np.integer):
            raise OperatorError.build(
                "seeds", where, "integer node ids", f"dtype {array.dtype}"
            )
        ids = array.astype(np.int64, copy=False)
        if ids.size:
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or high >= self.graph.num_nodes:
                raise OperatorError.build(
                    "seeds",
                    where,
                    f"ids in [0, {self.graph.num_nodes})",
                    f"ids in [{low}, {high}]",
                )
        return np.ascontiguousarray(ids)

    def __repr__(self) -> str:
        return (
            f"NeighborSampler(num_nodes={self.graph.num_nodes}, "
            f"fanouts={list(self.config.fanouts)}, replace={self.config.replace}, "
            f"seed={self.seed})"
        )
