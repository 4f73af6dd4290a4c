"""Random geometric graphs in the unit square.

``num_nodes`` points are drawn uniformly in ``[0, 1)^2`` and every pair closer than
``radius`` is joined (both directions, no self loops). Points are bucketed into a grid
of cells at least ``radius`` wide, so each point only compares against the 3x3 cells
around it: ``O(n + m)`` expected work instead of ``O(n**2)``. The expected degree is
about ``n * pi * radius**2`` (less near the border).

Random geometric graphs have high locality and diameter, unlike RMAT, which is what
makes them a useful second shape for partitioners.

References:
    Penrose, "Random Geometric Graphs", Oxford University Press, 2003.

Examples:
    >>> g, pos = random_geometric(500, 0.08, seed=0)
    >>> g.num_nodes, pos.shape, g.is_symmetric(), g.has_self_loops()
    (500, (500, 2), True, False)
    >>> src, dst = g.to_coo()
    >>> bool((((pos[src] - pos[dst]) ** 2).sum(axis=1) < 0.08**2).all())
    True
"""

from __future__ import annotations

import math

import numba
import numpy as np

from strata.storage._types import Int64Array
from strata.storage.csr import CSRGraph, index_dtype
from strata.storage.errors import GraphError

_WHERE = "random_geometric"
FloatPairs = np.ndarray


@numba.njit(parallel=True, cache=True)
def _neighbours(  # pragma: no cover - numba
    pos: np.ndarray,
    cell_of: np.ndarray,
    members: np.ndarray,
    cell_start: np.ndarray,
    grid: int,
    radius: float,
    indptr: np.ndarray,
    out: np.ndarray,
    fill: bool,
) -> np.ndarray:
    """Count (``fill=False``) or write (``fill=True``) each point's neighbours."""
    n = pos.shape[0]
    counts = np.zeros(n, dtype=np.int64)
    r2 = radius * radius
    for i in numba.prange(n):
        cx = cell_of[i] // grid
        cy = cell_of[i] % grid
        k = 0
        base = indptr[i] if fill else 0
        for gx in range(max(cx - 1, 0), min(cx + 2, grid)):
            for gy in range(max(cy - 1, 0), min(cy + 2, grid)):
                cell = gx * grid + gy
                for p in range(cell_start[cell], cell_start[cell + 1]):
                    j = members[p]
                    if j == i:
                        continue
                    dx = pos[i, 0] - pos[j, 0]
                    dy = pos[i, 1] - pos[j, 1]
                    if dx * dx + dy * dy < r2:
                        if fill:
                            out[base + k] = j
                        k += 1
        if fill:
            out[base : base + k] = np.sort(out[base : base + k])
        counts[i] = k
    return counts


def random_geometric(
    num_nodes: int, radius: float, *, seed: int = 0
) -> tuple[CSRGraph, FloatPairs]:
    """Generate a 2-D random geometric graph.

    Args:
        num_nodes: number of points (nodes).
        radius: connection distance, ``0 < radius``; pairs strictly closer connect.
        seed: random seed (positions and therefore edges).

    Returns:
        ``(graph, positions)``: a symmetric graph without loops and the float64
        ``(num_nodes, 2)`` point coordinates.

    Raises:
        GraphError: on ``num_nodes < 1`` or a non-positive radius.
    """
    if num_nodes < 1:
        raise GraphError.build("num_nodes", _WHERE, "num_nodes >= 1", str(num_nodes))
    if not radius > 0:
        raise GraphError.build("radius", _WHERE, "radius > 0", str(radius))
    pos = np.random.default_rng(seed).random((num_nodes, 2))
    # Cells at least `radius` wide, and no more cells than about 2n (tiny radii).
    grid = max(1, min(int(1.0 / radius), math.isqrt(2 * num_nodes) + 1))
    cell_xy = np.minimum((pos * grid).astype(np.int64), grid - 1)
    cell_of = cell_xy[:, 0] * grid + cell_xy[:, 1]
    members = np.argsort(cell_of, kind="stable").astype(np.int64)
    cell_start = np.zeros(grid * grid + 1, dtype=np.int64)
    np.cumsum(np.bincount(cell_of, minlength=grid * grid), out=cell_start[1:])

    empty_ptr = np.zeros(1, dtype=np.int64)
    empty_out = np.zeros(1, dtype=np.int64)
    counts = _neighbours(
        pos, cell_of, members, cell_start, grid, radius, empty_ptr, empty_out, False
    )
    indptr: Int64Array = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = np.empty(int(indptr[-1]), dtype=np.int64)
    _neighbours(pos, cell_of, members, cell_start, grid, radius, indptr, indices, True)
    graph = CSRGraph(
        indptr=indptr,
        indices=indices.astype(index_dtype(num_nodes), copy=False),
        num_nodes=num_nodes,
    )
    return graph, pos
