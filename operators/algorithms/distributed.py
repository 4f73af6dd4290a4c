"""PageRank, BFS, SSSP and CC on a partitioned mesh of workers (tdorch.md §5, O3).

:func:`run_distributed` starts a mesh of ``workers`` ranks (``sim``: threads of
this process, counting traffic; ``zmq``: one process per rank over loopback;
``torch``: a torch.distributed gang), runs the algorithm's supersteps on every
rank (:func:`~strata.operators.algorithms.superstep.rank_main`) and assembles the
per-rank values into one array indexed by vertex id, with a
:class:`DistributedReport` of supersteps, time and per-rank load.

Output conventions: PageRank float64 ranks summing to 1; BFS int64 hop counts,
``-1`` where unreachable; SSSP float64 distances, ``inf`` where unreachable; CC
int64 labels, each vertex labelled by the smallest id of its weak component.

:func:`distributed_step` is the same run as a batch pipeline step (the mesh is
started inside the step), so a pipeline gives the same values on every executor.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from strata.operators.algorithms.errors import AlgorithmError
from strata.operators.algorithms.placement import Cut, Placement, placement_named
from strata.operators.algorithms.superstep import (
    ALGORITHMS,
    INT_INF,
    KernelParams,
    RankResult,
    rank_main,
)
from strata.operators.io.datasets import dataset_from_payload
from strata.storage.csr import CSRGraph

MeshKind = Literal["sim", "zmq", "torch"]


@dataclass(frozen=True, slots=True)
class RankLoad:
    """One rank's load over the supersteps (setup excluded).

    ``tasks``: edge tasks run + updates applied + pulled values served (the cost
    model's unit); ``busy_s``: CPU seconds of the rank's thread; ``wall_s``: its
    wall seconds (waits for peers included); ``process_s``: CPU seconds of the
    rank's whole process (the mesh's I/O threads included; meaningful when each
    rank has its own process, as on the zmq and torch meshes).
    """

    rank: int
    tasks: int
    bytes_sent: int
    frames_sent: int
    bytes_received: int
    busy_s: float
    wall_s: float
    process_s: float
    pulled: int


@dataclass(frozen=True, slots=True)
class DistributedReport:
    """What a distributed run did: supersteps, wall seconds, per-rank load."""

    algorithm: str
    placement: str
    workers: int
    mesh: str
    supersteps: int
    seconds: float
    ranks: tuple[RankLoad, ...]

    @staticmethod
    def _max_mean(values: Sequence[float]) -> float:
        mean = float(np.mean(values)) if values else 0.0
        return float(np.max(values)) / mean if mean > 0 else 1.0

    @property
    def max_tasks(self) -> int:
        """The busiest rank's tasks."""
        return max(r.tasks for r in self.ranks)

    @property
    def tasks_max_mean(self) -> float:
        """Task load max/mean over ranks (1.0 = perfectly balanced)."""
        return self._max_mean([r.tasks for r in self.ranks])

    @property
    def total_bytes(self) -> int:
        """Bytes sent between ranks, all ranks together."""
        return sum(r.bytes_sent for r in self.ranks)

    @property
    def bytes_max_mean(self) -> float:
        """Per-rank bytes sent, max/mean."""
        return self._max_mean([r.bytes_sent for r in self.ranks])

    @property
    def max_busy_s(self) -> float:
        """The busiest rank's CPU seconds."""
        return max(r.busy_s for r in self.ranks)

    @property
    def max_wall_s(self) -> float:
        """The slowest rank's wall seconds over the supersteps (start-up excluded)."""
        return max(r.wall_s for r in self.ranks)

    @property
    def max_process_s(self) -> float:
        """The busiest rank's process CPU seconds (one process per rank meshes)."""
        return max(r.process_s for r in self.ranks)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (the ``strata algo`` report), summaries included."""
        out = asdict(self)
        out["ranks"] = [asdict(r) for r in self.ranks]
        out.update(
            max_tasks=self.max_tasks,
            tasks_max_mean=self.tasks_max_mean,
            total_bytes=self.total_bytes,
            bytes_max_mean=self.bytes_max_mean,
            max_busy_s=self.max_busy_s,
            max_wall_s=self.max_wall_s,
            max_process_s=self.max_process_s,
        )
        return out


def _check(algorithm: str, graph: CSRGraph, workers: int, params: KernelParams) -> None:
    where = f"run_distributed({algorithm!r})"
    if algorithm not in ALGORITHMS:
        raise AlgorithmError.build(
            "algorithm", where, f"one of {list(ALGORITHMS)}", algorithm
        )
    if workers < 1:
        raise AlgorithmError.build("workers", where, "workers >= 1", str(workers))
    if algorithm in ("bfs", "sssp") and not 0 <= params.source < graph.num_nodes:
        expected = f"0 <= source < {graph.num_nodes}"
        raise AlgorithmError.build("source", where, expected, str(params.source))
    if (
        algorithm == "sssp"
        and graph.edge_weight is not None
        and (graph.edge_weight < 0).any()
    ):
        got = f"min weight {float(graph.edge_weight.min())}"
        raise AlgorithmError.build("edge_weight", where, "weights >= 0", got)
    if algorithm == "pagerank" and params.iterations < 1:
        raise AlgorithmError.build(
            "iterations", where, "iterations >= 1", str(params.iterations)
        )


def _symmetrised(graph: CSRGraph) -> CSRGraph:
    src, dst = graph.to_coo()
    return CSRGraph.from_edges(
        src, dst.astype(np.int64), graph.num_nodes, symmetrize=True
    )


def _start(kind: MeshKind) -> Callable[..., list[RankResult]]:
    """The engine's launcher for ``kind`` (imported late: the mesh is optional)."""
    from strata.engine.mesh import run_mesh

    def launch(
        fn: Callable[..., RankResult], workers: int, *args: Any
    ) -> list[RankResult]:
        return list(run_mesh(fn, workers, *args, kind=kind))

    return launch


def assemble(
    algorithm: str, num_nodes: int, results: Sequence[RankResult]
) -> NDArray[np.float64] | NDArray[np.int64]:
    """Per-rank values -> one array by vertex id (the module's output conventions)."""
    dtype = np.float64 if algorithm in ("pagerank", "sssp") else np.int64
    values: np.ndarray = np.empty(num_nodes, dtype=dtype)
    for r in results:
        values[r.own] = r.values
    if algorithm == "bfs":
        values[values == INT_INF] = -1
    return values


def run_distributed(
    algorithm: str,
    graph: CSRGraph,
    workers: int,
    placement: Placement | str = "hash-combiner",
    *,
    mesh: MeshKind = "zmq",
    launch: Callable[..., list[RankResult]] | None = None,
    **params: Any,
) -> tuple[NDArray[np.float64] | NDArray[np.int64], DistributedReport]:
    """Run ``algorithm`` on ``workers`` ranks; return (values by vertex id, report).

    Args:
        algorithm: ``pagerank`` | ``bfs`` | ``sssp`` | ``cc``.
        graph: The graph (directed; CC uses its weak components).
        workers: Ranks P.
        placement: :class:`~strata.operators.algorithms.placement.Hash`,
            :class:`~strata.operators.algorithms.placement.HubSplit` or its name.
        mesh: ``sim`` (threads, counted), ``zmq`` (processes) or ``torch``.
        launch: Run ``fn(mesh, *args)`` on every rank and return the per-rank
            results, instead of the engine's ``run_mesh`` (tests, embedding).
        **params: :class:`~strata.operators.algorithms.superstep.KernelParams`
            fields: ``source``, ``damping``, ``iterations``, ``tol``.

    Raises:
        AlgorithmError: Unknown algorithm or placement, a source outside the
            graph, negative SSSP weights, ``workers < 1``.

    Examples:
        >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]), 4)
        >>> dist, report = run_distributed("bfs", g, 2, "hubsplit", mesh="sim")
        >>> dist.tolist(), report.supersteps
        ([0, 1, 2, -1], 3)
    """
    kernel = KernelParams(**params)
    _check(algorithm, graph, workers, kernel)
    chosen = placement_named(placement) if isinstance(placement, str) else placement
    if algorithm == "cc":
        graph = _symmetrised(graph)
    start = time.perf_counter()
    cut = Cut.build(graph, workers, chosen)
    results = (launch or _start(mesh))(
        rank_main, workers, graph, algorithm, chosen, kernel, cut
    )
    seconds = time.perf_counter() - start
    results = sorted(results, key=lambda r: r.rank)
    report = DistributedReport(
        algorithm=algorithm,
        placement=chosen.name,
        workers=workers,
        mesh=mesh if launch is None else "custom",
        supersteps=max(r.supersteps for r in results),
        seconds=seconds,
        ranks=tuple(
            RankLoad(
                r.rank,
                r.tasks,
                r.bytes_sent,
                r.frames_sent,
                r.bytes_received,
                r.busy_s,
                r.wall_s,
                r.process_s,
                r.pulled,
            )
            for r in results
        ),
    )
    return assemble(algorithm, graph.num_nodes, results), report


def graph_of(graph: CSRGraph | Mapping[str, Any]) -> CSRGraph:
    """A CSRGraph, or the graph of a dataset payload (with ``edge_weight`` if present).

    Payloads (:func:`strata.operators.io.datasets.dataset_payload`) are how a graph
    crosses the process and Ray executors.
    """
    if isinstance(graph, CSRGraph):
        return graph
    g = dataset_from_payload(graph).graph
    weight = graph.get("edge_weight")
    if weight is None:
        return g
    return CSRGraph(g.indptr, g.indices, g.num_nodes, edge_weight=np.asarray(weight))


def distributed_step(
    graph: CSRGraph | Mapping[str, Any],
    *,
    algorithm: str,
    workers: int,
    placement: str = "hash-combiner",
    mesh: MeshKind = "sim",
    **params: Any,
) -> dict[str, Any]:
    """A batch step: :func:`run_distributed` inside the step (the mesh starts there).

    ``graph`` is a CSRGraph or a dataset payload (what crosses executors). Returns
    ``{"values": array by internal vertex id, "report": the report's dict}``.
    """
    values, report = run_distributed(
        algorithm, graph_of(graph), workers, placement, mesh=mesh, **params
    )
    return {"values": values, "report": report.to_dict()}
