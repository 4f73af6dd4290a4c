"""A sampled message-flow block: one bipartite layer of a mini-batch.

A :class:`Block` says, for one GNN layer, which source nodes send messages to which
destination nodes. It is a CSR over the destination nodes (row ``i`` lists the local
ids of the sampled in-neighbours of destination ``i``), with local ids numbered so
that **the destination nodes come first among the sources**: source ``i`` is
destination ``i`` for ``i < num_dst``. Layers use this to find a destination's own
features (``x[:num_dst]``) and to add self-loops, as DGL's blocks and PyG's bipartite
layers do.

Examples:
    >>> import numpy as np
    >>> # 2 dst nodes (global 7, 3); dst 0 <- src {1, 2}, dst 1 <- src {0}
    >>> b = Block(indptr=np.array([0, 2, 3]), indices=np.array([1, 2, 0]),
    ...           src_global_ids=np.array([7, 3, 9]), num_dst=2)
    >>> b.num_src, b.num_edges, b.dst_global_ids.tolist()
    (3, 3, [7, 3])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from strata.operators.errors import OperatorError
from strata.storage._types import Int64Array


@dataclass(frozen=True, slots=True, eq=False)
class Block:
    """One layer of a sampled mini-batch, as a CSR over its destination nodes.

    Attributes:
        indptr: int64 ``[num_dst + 1]``; the in-edges of destination ``i`` are
            ``indices[indptr[i]:indptr[i + 1]]``.
        indices: int64 local source ids in ``[0, num_src)``.
        src_global_ids: int64 ``[num_src]`` global id of every source node; the
            first ``num_dst`` are the destination nodes' global ids.
        num_dst: number of destination nodes (``<= num_src``).

    A block feeds one layer: that layer takes ``num_src`` input rows and returns
    ``num_dst`` output rows. The sampler returns blocks in layer order, so
    ``blocks[0].src_global_ids`` are the rows to gather from the feature store and
    ``blocks[-1].dst_global_ids`` are the seeds.
    """

    indptr: Int64Array
    indices: Int64Array
    src_global_ids: Int64Array
    num_dst: int
    # Tensors built from this block per device (strata.operators.kernels.DeviceGraph).
    _device_cache: dict[Any, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        where = "Block"
        num_src = int(self.src_global_ids.shape[0])
        if not 0 <= self.num_dst <= num_src:
            raise OperatorError.build(
                "num_dst",
                where,
                f"0 <= num_dst <= num_src ({num_src})",
                str(self.num_dst),
                "destination nodes are the first num_dst source nodes",
            )
        if self.indptr.shape != (self.num_dst + 1,) or self.indptr.dtype != np.int64:
            raise OperatorError.build(
                "indptr",
                where,
                f"int64 of shape ({self.num_dst + 1},)",
                f"{self.indptr.dtype} of shape {self.indptr.shape}",
            )
        num_edges = int(self.indptr[-1]) if self.num_dst else 0
        if self.indices.shape != (num_edges,) or self.indices.dtype != np.int64:
            raise OperatorError.build(
                "indices",
                where,
                f"int64 of shape ({num_edges},) (indptr[-1])",
                f"{self.indices.dtype} of shape {self.indices.shape}",
            )
        if num_edges and (
            int(self.indices.min()) < 0 or int(self.indices.max()) >= num_src
        ):
            raise OperatorError.build(
                "indices",
                where,
                f"local ids in [0, {num_src})",
                f"ids in [{int(self.indices.min())}, {int(self.indices.max())}]",
            )

    @property
    def num_src(self) -> int:
        """Number of source nodes (destination nodes included)."""
        return int(self.src_global_ids.shape[0])

    @property
    def num_edges(self) -> int:
        """Number of sampled edges."""
        return int(self.indices.shape[0])

    @property
    def dst_global_ids(self) -> Int64Array:
        """Global ids of the destination nodes (a view of ``src_global_ids``)."""
        return self.src_global_ids[: self.num_dst]

    def nbytes(self) -> int:
        """Bytes held by the block's arrays."""
        return self.indptr.nbytes + self.indices.nbytes + self.src_global_ids.nbytes

    def __repr__(self) -> str:
        return (
            f"Block(num_src={self.num_src}, num_dst={self.num_dst}, "
            f"num_edges={self.num_edges})"
        )


@dataclass(frozen=True, slots=True, eq=False)
class Hop:
    """One sampled layer in global ids: a CSR over destinations, sources unnumbered.

    What :meth:`~strata.operators.samplers.NeighborSampler.sample_hop` returns for
    the first layer: the in-edges of destination ``i`` come from the global nodes
    ``sources[indptr[i]:indptr[i + 1]]`` (repeats across rows are kept as they
    are; no local numbering is built).

    Attributes:
        indptr: int64 ``[num_dst + 1]``.
        sources: int64 global source id of every edge.
        dst_global_ids: int64 ``[num_dst]`` global ids of the destinations.

    Examples:
        >>> import numpy as np
        >>> hop = Hop(indptr=np.array([0, 2, 3]), sources=np.array([9, 3, 7]),
        ...           dst_global_ids=np.array([7, 3]))
        >>> hop.num_dst, hop.num_edges
        (2, 3)
    """

    indptr: Int64Array
    sources: Int64Array
    dst_global_ids: Int64Array

    @property
    def num_dst(self) -> int:
        """Number of destination nodes."""
        return int(self.dst_global_ids.shape[0])

    @property
    def num_edges(self) -> int:
        """Number of sampled edges."""
        return int(self.sources.shape[0])

    def __repr__(self) -> str:
        return f"Hop(num_dst={self.num_dst}, num_edges={self.num_edges})"
