"""RMAT (recursive matrix) graphs with Graph500 parameters.

Each edge picks one quadrant of the adjacency matrix per level, with probabilities
``(a, b, c, d)``, for ``scale`` levels; the result is a skewed, power-law-like graph on
``2**scale`` nodes with ``edge_factor * 2**scale`` directed edges. Graph500 uses
``a, b, c, d = 0.57, 0.19, 0.19, 0.05`` and permutes the node ids so that degree is not
correlated with id (``permute=True`` here, too).

The kernel runs in parallel (numba ``prange``) and draws its randomness from a counter
hash, so a seed gives the same graph on any thread count.
:func:`rmat_edges_reference` is the vectorised numpy transcription of the Graph500
reference generator, kept as the benchmark baseline and the statistical oracle.

References:
    Chakrabarti, Zhan and Faloutsos, "R-MAT: A Recursive Model for Graph Mining",
    SDM 2004. Graph500 specification, Kernel 0 (graph500.org).

Examples:
    >>> g = rmat(scale=6, edge_factor=4, seed=1)
    >>> g.num_nodes, g.num_edges
    (64, 256)
    >>> src, dst = rmat_edges(scale=6, edge_factor=4, seed=1)
    >>> bool((src == rmat_edges(6, 4, seed=1)[0]).all())
    True
"""

from __future__ import annotations

import numba
import numpy as np

from strata.storage._types import Int64Array
from strata.storage.csr import CSRGraph, DuplicatePolicy, SelfLoopPolicy
from strata.storage.errors import GraphError
from strata.storage.generators.hashing import seed_key, splitmix64

GRAPH500_ABCD = (0.57, 0.19, 0.19, 0.05)
_WHERE = "rmat"
_LOW32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


@numba.njit(parallel=True, cache=True)
def _rmat_kernel(  # pragma: no cover - numba
    num_edges: int,
    scale: int,
    key: np.uint64,
    t_a: np.uint64,
    t_ab: np.uint64,
    t_abc: np.uint64,
    perm: np.ndarray,
    use_perm: bool,
) -> tuple[np.ndarray, np.ndarray]:
    src = np.empty(num_edges, dtype=np.int64)
    dst = np.empty(num_edges, dtype=np.int64)
    words = (scale + 1) // 2  # one 64-bit hash gives two 32-bit draws (two levels)
    for i in numba.prange(num_edges):
        s = 0
        d = 0
        base = key + np.uint64(i) * np.uint64(words)
        h = np.uint64(0)
        for level in range(scale):
            if level % 2 == 0:
                h = splitmix64(base + np.uint64(level // 2))
                r = h & _LOW32
            else:
                r = h >> _S32
            s <<= 1
            d <<= 1
            if r >= t_ab:
                s |= 1
                if r >= t_abc:
                    d |= 1
            elif r >= t_a:
                d |= 1
        if use_perm:
            s = perm[s]
            d = perm[d]
        src[i] = s
        dst[i] = d
    return src, dst


def _check(
    scale: int, edge_factor: int, abcd: tuple[float, float, float, float]
) -> None:
    if not 1 <= scale <= 40:
        raise GraphError.build("scale", _WHERE, "1 <= scale <= 40", str(scale))
    if edge_factor < 0:
        raise GraphError.build(
            "edge_factor", _WHERE, "edge_factor >= 0", str(edge_factor)
        )
    if min(abcd) < 0 or abs(sum(abcd) - 1.0) > 1e-9:
        raise GraphError.build(
            "a, b, c",
            _WHERE,
            "probabilities >= 0 with a + b + c <= 1 (d = 1 - a - b - c)",
            str(abcd),
        )


def rmat_edges(
    scale: int,
    edge_factor: int = 16,
    *,
    a: float = 0.57,
    b: float = 0.19,
    c: float = 0.19,
    seed: int = 0,
    permute: bool = True,
) -> tuple[Int64Array, Int64Array]:
    """Draw ``edge_factor * 2**scale`` RMAT edges (with loops and duplicates).

    Args:
        scale: log2 of the node count.
        edge_factor: directed edges per node.
        a: probability of the top-left quadrant (src bit 0, dst bit 0).
        b: top-right (src 0, dst 1).
        c: bottom-left (src 1, dst 0); ``d = 1 - a - b - c``.
        seed: random seed; equal seeds give equal edges on any thread count.
        permute: relabel nodes by a seeded random permutation (Graph500 does).

    Returns:
        ``(src, dst)`` int64 arrays in generation order.

    Raises:
        GraphError: on a scale outside ``[1, 40]`` or invalid probabilities.
    """
    abcd = (a, b, c, 1.0 - a - b - c)
    _check(scale, edge_factor, abcd)
    num_nodes = 1 << scale
    # Thresholds on a uniform 32-bit draw; resolution 2**-32 is far below any
    # probability anyone sets.
    full = float(1 << 32)
    t_a, t_ab, t_abc = (
        np.uint64(min(int(p * full), 1 << 32)) for p in (a, a + b, a + b + c)
    )
    rng = np.random.default_rng(seed)
    # int32 ids halve the permutation's cache footprint, which the random lookups
    # are bound by.
    perm_dtype = np.int32 if scale <= 31 else np.int64
    perm = rng.permutation(num_nodes) if permute else np.empty(0)
    src, dst = _rmat_kernel(
        edge_factor * num_nodes,
        scale,
        seed_key(seed),
        t_a,
        t_ab,
        t_abc,
        perm.astype(perm_dtype),
        permute,
    )
    return src, dst


def rmat(
    scale: int,
    edge_factor: int = 16,
    *,
    a: float = 0.57,
    b: float = 0.19,
    c: float = 0.19,
    seed: int = 0,
    permute: bool = True,
    symmetrize: bool = False,
    self_loops: SelfLoopPolicy = SelfLoopPolicy.KEEP,
    duplicates: DuplicatePolicy = DuplicatePolicy.KEEP,
) -> CSRGraph:
    """Generate an RMAT graph on ``2**scale`` nodes as a :class:`CSRGraph`.

    The defaults keep the raw Graph500 edge list (loops and duplicate edges included,
    directed). For a simple undirected graph pass ``symmetrize=True,
    self_loops=SelfLoopPolicy.REMOVE, duplicates=DuplicatePolicy.REMOVE``.

    Args:
        scale: log2 of the node count.
        edge_factor: directed edges per node before any policy is applied.
        a: top-left quadrant probability (see :func:`rmat_edges`).
        b: top-right quadrant probability.
        c: bottom-left quadrant probability.
        seed: random seed.
        permute: relabel nodes randomly (Graph500 does).
        symmetrize: add the reverse of every edge.
        self_loops: policy for ``v -> v`` edges.
        duplicates: policy for repeated pairs.

    Returns:
        The graph.

    Examples:
        >>> g = rmat(8, 8, seed=0, symmetrize=True, self_loops=SelfLoopPolicy.REMOVE,
        ...          duplicates=DuplicatePolicy.REMOVE)
        >>> g.is_symmetric(), g.has_self_loops()
        (True, False)
    """
    src, dst = rmat_edges(scale, edge_factor, a=a, b=b, c=c, seed=seed, permute=permute)
    return CSRGraph.from_edges(
        src,
        dst,
        1 << scale,
        self_loops=self_loops,
        duplicates=duplicates,
        symmetrize=symmetrize,
    )


def rmat_edges_reference(
    scale: int,
    edge_factor: int = 16,
    *,
    a: float = 0.57,
    b: float = 0.19,
    c: float = 0.19,
    seed: int = 0,
) -> tuple[Int64Array, Int64Array]:
    """Vectorised numpy RMAT, transcribed from Graph500's ``kronecker_generator.m``.

    The baseline for benchmarks and the oracle for tests; ids are not permuted. Draws
    differ from :func:`rmat_edges` (another random stream), the distribution does not.

    Args:
        scale: log2 of the node count.
        edge_factor: directed edges per node.
        a: top-left quadrant probability.
        b: top-right quadrant probability.
        c: bottom-left quadrant probability.
        seed: random seed.

    Returns:
        ``(src, dst)`` int64 arrays.
    """
    abcd = (a, b, c, 1.0 - a - b - c)
    _check(scale, edge_factor, abcd)
    rng = np.random.default_rng(seed)
    m = edge_factor << scale
    src = np.zeros(m, dtype=np.int64)
    dst = np.zeros(m, dtype=np.int64)
    ab = a + b
    c_norm = c / (1.0 - ab)
    a_norm = a / ab
    for bit in range(scale):
        src_bit = rng.random(m) > ab
        dst_bit = rng.random(m) > np.where(src_bit, c_norm, a_norm)
        src |= src_bit.astype(np.int64) << bit
        dst |= dst_bit.astype(np.int64) << bit
    return src, dst
