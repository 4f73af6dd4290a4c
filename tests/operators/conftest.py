import warnings
from collections.abc import Iterator

import numpy as np
import pytest
import torch

# PyG 2.8 scripts a class with torch.jit at import, which torch 2.13 deprecates;
# import it once here so the project's "error" warning filter does not fail tests.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import torch_geometric.nn  # noqa: F401

from strata.operators.kernels import Backend, use_backend
from strata.storage import CSRGraph


def random_graph(
    num_nodes: int = 40,
    num_edges: int = 200,
    *,
    seed: int = 0,
    weighted: bool = False,
    loops: bool = True,
) -> CSRGraph:
    """A directed multigraph with isolated nodes, self-loops and parallel edges."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_edges)
    dst = rng.integers(0, num_nodes - 3, num_edges)  # the last 3 have no in-edges
    if loops:
        src[:3] = dst[:3]  # a few self-loops
        src[3], dst[3] = src[4], dst[4]  # a parallel edge
    else:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    weight = rng.uniform(0.5, 2.0, src.shape[0]) if weighted else None
    return CSRGraph.from_edges(src, dst, num_nodes, edge_weight=weight)


def edge_index_of(graph: CSRGraph) -> torch.Tensor:
    """PyG's edge_index (row 0 sources, row 1 destinations), in CSR order."""
    src, dst = graph.to_coo()
    return torch.stack([torch.from_numpy(src), torch.from_numpy(dst.astype(np.int64))])


@pytest.fixture(params=[Backend.NUMBA, Backend.TORCH], ids=["numba", "torch"])
def backend(request):
    """Run a test once per kernel formulation."""
    with use_backend(request.param):
        yield request.param


@pytest.fixture
def make_graph():
    """The :func:`random_graph` builder."""
    return random_graph


@pytest.fixture
def to_edge_index():
    """The :func:`edge_index_of` converter."""
    return edge_index_of


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Run torch single-threaded for the test (recsys tests use it module-wide).

    Their tensors are tiny, and on a shared, oversubscribed CPU torch's spinning
    worker threads made tiny steps ~30x slower.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
