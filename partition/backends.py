"""External partitioning engines behind Strata's interface: pymetis and KaHIP.

Each is a frozen config with ``partition(graph) -> Partition`` like Strata's own
partitioners, and reports the same :class:`~strata.partition.types.PartitionReport`
(cut, balance, seconds; ``backend`` names the library). Both libraries are optional
extras, imported on first use: ``pip install 'strata-gnn[metis]'`` (pymetis) and
``pip install 'strata-gnn[kahip]'`` (PyPI ``kahip``). :func:`backend_available`
says whether one can be imported; ``strata.partition.methods.resolve`` picks an
engine by name and falls back to Strata's multilevel for ``metis``.

Both engines get the undirected simple graph with integer weights, as Strata's
multilevel does (``strata.partition.metrics``), so their reports compare directly.

References:
    Karypis and Kumar, "A Fast and High Quality Multilevel Scheme for Partitioning
    Irregular Graphs", SIAM J. Sci. Comput. 20(1), 1998; METIS 5, via pymetis
    (github.com/inducer/pymetis).
    Sanders and Schulz, "Think Locally, Act Globally: Highly Balanced Graph
    Partitioning", SEA 2013; KaHIP (github.com/KaHIP/KaHIP).

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> src = np.arange(64); ring = CSRGraph.from_edges(src, (src + 1) % 64)
    >>> if backend_available("pymetis"):
    ...     report = PymetisPartitioner(k=4).partition(ring).report
    ...     assert (report.backend, report.edge_cut) == ("pymetis", 4.0)
    >>> KahipPartitioner(k=4, mode=KahipMode.STRONG).mode.value
    'strong'
"""

from __future__ import annotations

import enum
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from strata.partition._graph import PhaseTimer, WeightedCSR, edge_cut_partition, prepare
from strata.partition._params import check_settings
from strata.partition._types import Float64Array, Int32Array
from strata.partition.errors import PartitionError
from strata.partition.types import Partition
from strata.storage import CSRGraph

#: The pip extra that installs each optional engine (module name -> extra).
EXTRAS = {"pymetis": "metis", "kahip": "kahip"}


def backend_available(module: str) -> bool:
    """Whether the optional engine ``module`` (``pymetis``, ``kahip``) imports."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def import_backend(module: str, where: str) -> ModuleType:
    """Import an optional engine, or raise a :class:`PartitionError` naming its extra.

    Raises:
        PartitionError: when ``module`` cannot be imported.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        extra = EXTRAS.get(module, module)
        raise PartitionError.build(
            module,
            where,
            f"the optional package {module!r} installed",
            f"ImportError ({exc})",
            f"pip install 'strata-gnn[{extra}]' (or pip install {module})",
        ) from exc


def _trivial(wgraph: WeightedCSR) -> Int32Array:
    """The one-part assignment (the engines refuse or misbehave at ``k = 1``)."""
    return np.zeros(wgraph.num_nodes, dtype=np.int32)


@dataclass(frozen=True, slots=True)
class PymetisPartitioner:
    """METIS 5 k-way through pymetis (``pip install 'strata-gnn[metis]'``).

    Passes ``recursive=False`` unless asked (pymetis otherwise runs recursive
    bisection for ``k <= 8``), ``ufactor = 1000 * imbalance`` and the seed. METIS
    aims at the cap but does not promise it on every graph.

    Attributes:
        k: number of parts.
        imbalance: eps (METIS ``ufactor / 1000``).
        seed: METIS seed (METIS seeds 0 and 1 give the same result).
        recursive: recursive bisection instead of k-way (report backend
            ``pymetis-rb``).
        edge_imbalance: balance edges too: METIS ``ncon = 2`` with vertex
            weights ``[w, degree]``. pymetis exposes one tolerance (``ufactor``)
            for both, so METIS gets ``min(imbalance, edge_imbalance)``. METIS
            may miss multi-constraint caps on power-law graphs (on RMAT it
            does); the report shows what it reached.
    """

    k: int
    imbalance: float = 0.03
    seed: int = 0
    recursive: bool = False
    edge_imbalance: float | None = None

    def __post_init__(self) -> None:
        check_settings(
            "PymetisPartitioner",
            ints={"k": self.k, "seed": self.seed},
            floats={"imbalance": self.imbalance, "edge_imbalance": self.edge_imbalance},
        )

    def partition(
        self, graph: CSRGraph, *, node_weights: Float64Array | None = None
    ) -> Partition:
        """Run pymetis on the undirected simple graph.

        Raises:
            PartitionError: when pymetis is not installed, or on bad input.
        """
        pymetis = import_backend("pymetis", "PymetisPartitioner")

        def solve(simple: CSRGraph, wgraph: WeightedCSR) -> Int32Array:
            adjacency = pymetis.CSRAdjacency(
                wgraph.xadj.astype(np.int32), wgraph.adjncy.astype(np.int32)
            )
            eps = self.imbalance
            vweights = None if node_weights is None else wgraph.vwgt
            if self.edge_imbalance is not None:  # ncon = 2: [w, degree] per vertex
                eps = min(eps, self.edge_imbalance)
                degree = np.diff(wgraph.xadj)
                vweights = np.stack([wgraph.vwgt, degree], axis=1).ravel()
            options = pymetis.Options(ufactor=round(1000 * eps), seed=self.seed)
            weighted = simple.edge_weight is not None
            _, parts = pymetis.part_graph(
                self.k,
                adjacency,
                vweights=None if vweights is None else vweights.astype(np.int32),
                eweights=wgraph.adjwgt.astype(np.int32) if weighted else None,
                recursive=self.recursive,
                options=options,
            )
            return np.asarray(parts, dtype=np.int32)

        return _external(
            self,
            graph,
            node_weights,
            method="metis",
            backend="pymetis-rb" if self.recursive else "pymetis",
            phase="metis",
            solve=solve,
        )


class KahipMode(enum.Enum):
    """KaHIP's kaffpa preconfigurations (``*_SOCIAL`` for power-law graphs)."""

    FAST = "fast"
    ECO = "eco"
    STRONG = "strong"
    FAST_SOCIAL = "fastsocial"
    ECO_SOCIAL = "ecosocial"
    STRONG_SOCIAL = "strongsocial"


#: kaffpa's mode numbers (the ``kahip.FAST`` ... constants of the binding).
_KAFFPA_MODE = {
    KahipMode.FAST: 0,
    KahipMode.ECO: 1,
    KahipMode.STRONG: 2,
    KahipMode.FAST_SOCIAL: 3,
    KahipMode.ECO_SOCIAL: 4,
    KahipMode.STRONG_SOCIAL: 5,
}


@dataclass(frozen=True, slots=True)
class KahipPartitioner:
    """KaHIP's kaffpa (``pip install 'strata-gnn[kahip]'``, PyPI ``kahip``).

    kaffpa keeps every part at most ``(1 + imbalance) * ceil(W / k)``.

    Attributes:
        k: number of parts.
        imbalance: eps of kaffpa's balance constraint.
        seed: kaffpa's seed.
        mode: preconfiguration: ``ECO`` (default) trades time for cut between
            ``FAST`` and ``STRONG``; the ``*_SOCIAL`` modes suit power-law graphs.
    """

    k: int
    imbalance: float = 0.03
    seed: int = 0
    mode: KahipMode = KahipMode.ECO

    def __post_init__(self) -> None:
        check_settings(
            "KahipPartitioner",
            ints={"k": self.k, "seed": self.seed},
            floats={"imbalance": self.imbalance},
        )
        if not isinstance(self.mode, KahipMode):
            raise PartitionError.build(
                "mode",
                "KahipPartitioner",
                f"a KahipMode ({', '.join(m.name for m in KahipMode)})",
                repr(self.mode),
            )

    def partition(
        self, graph: CSRGraph, *, node_weights: Float64Array | None = None
    ) -> Partition:
        """Run kaffpa on the undirected simple graph.

        Raises:
            PartitionError: when KaHIP is not installed, or on bad input.
        """
        kahip = import_backend("kahip", "KahipPartitioner")

        def solve(simple: CSRGraph, wgraph: WeightedCSR) -> Int32Array:
            _, parts = kahip.kaffpa(
                wgraph.vwgt.astype(np.int32),
                wgraph.xadj.astype(np.int32),
                wgraph.adjwgt.astype(np.int32),
                wgraph.adjncy.astype(np.int32),
                self.k,
                self.imbalance,
                True,  # suppress kaffpa's console output
                self.seed,
                _KAFFPA_MODE[self.mode],
            )
            return np.asarray(parts, dtype=np.int32)

        return _external(
            self,
            graph,
            node_weights,
            method="kahip",
            backend="kahip",
            phase="kaffpa",
            solve=solve,
        )


def _external(
    config: PymetisPartitioner | KahipPartitioner,
    graph: CSRGraph,
    node_weights: Float64Array | None,
    *,
    method: str,
    backend: str,
    phase: str,
    solve: Callable[[CSRGraph, WeightedCSR], Int32Array],
) -> Partition:
    """Run an external library's ``solve`` on the prepared graph; report as ours.

    The input checks, the undirected simple graph, the timing and the report are
    Strata's own, so every backend's report reads the same.
    """
    where = type(config).__name__
    simple, wgraph = prepare(graph, config.k, node_weights, where)
    timer = PhaseTimer()
    start = time.perf_counter()
    with timer.phase(phase):
        assignment = _trivial(wgraph) if config.k == 1 else solve(simple, wgraph)
    return edge_cut_partition(
        method=method,
        k=config.k,
        seed=config.seed,
        simple=simple,
        assignment=assignment,
        seconds=time.perf_counter() - start,
        phase_seconds=timer.seconds,
        config=config,
        node_weights=None if node_weights is None else wgraph.vwgt,
        backend=backend,
    )
