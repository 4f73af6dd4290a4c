"""External engines (pymetis, KaHIP) and the method resolver.

Where an engine is not installed its tests skip; the missing-engine paths are
simulated by putting ``None`` in ``sys.modules``, which makes the import fail.
"""

from __future__ import annotations

import logging
import math
import sys

import numpy as np
import pytest

from strata.partition import (
    METHODS,
    CutKind,
    FennelPartitioner,
    GremPartitioner,
    HashPartitioner,
    HDRFPartitioner,
    KahipMode,
    KahipPartitioner,
    LDGPartitioner,
    MetisReference,
    MultilevelPartitioner,
    Partition,
    PartitionError,
    PymetisPartitioner,
    RandomPartitioner,
    backend_available,
    resolve,
)
from strata.partition.refine import GreedyKWayRefiner
from strata.storage import CSRGraph

needs_pymetis = pytest.mark.skipif(
    not backend_available("pymetis"), reason="pymetis not installed"
)
needs_kahip = pytest.mark.skipif(
    not backend_available("kahip"), reason="kahip not installed"
)


def block(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """Make ``import module`` fail, as if the package were not installed."""
    monkeypatch.setitem(sys.modules, module, None)


def check_valid(part: Partition, graph: CSRGraph, k: int) -> None:
    assert part.kind is CutKind.EDGE_CUT
    assert part.assignment.dtype == np.int32
    assert part.assignment.shape == (graph.num_nodes,)
    assert part.assignment.min() >= 0
    assert part.assignment.max() < k
    assert sum(part.report.part_sizes) == graph.num_nodes


@needs_pymetis
def test_pymetis_partitions_and_names_itself(community: CSRGraph) -> None:
    part = PymetisPartitioner(k=8, seed=1).partition(community)
    check_valid(part, community, 8)
    report = part.report
    assert (report.method, report.backend) == ("metis", "pymetis")
    assert report.to_dict()["backend"] == "pymetis"
    assert report.vertex_balance <= 1.1  # METIS aims at 1.03; it does not promise it
    assert report.edge_cut < HashPartitioner(8).partition(community).report.edge_cut
    assert report.phase_seconds.keys() == {"metis"}


@needs_pymetis
def test_pymetis_recursive_and_reference_alias(community: CSRGraph) -> None:
    part = MetisReference(4, recursive=True).partition(community)
    check_valid(part, community, 4)
    assert part.report.backend == "pymetis-rb"


@needs_kahip
@pytest.mark.parametrize("mode", [KahipMode.FAST, KahipMode.ECO])
def test_kahip_partitions_within_the_cap(grid: CSRGraph, mode: KahipMode) -> None:
    k, eps = 8, 0.03
    part = KahipPartitioner(k, eps, seed=2, mode=mode).partition(grid)
    check_valid(part, grid, k)
    assert (part.report.method, part.report.backend) == ("kahip", "kahip")
    # kaffpa's constraint: every part <= (1 + eps) * ceil(n / k)
    assert max(part.report.part_sizes) <= (1 + eps) * math.ceil(grid.num_nodes / k)
    assert part.report.config["mode"] == mode.value
    hashed = HashPartitioner(k).partition(grid).report.edge_cut
    assert part.report.edge_cut < hashed / 4


@needs_kahip
def test_kahip_respects_node_weights(grid: CSRGraph) -> None:
    weights = np.ones(grid.num_nodes)
    weights[:100] = 5.0
    part = KahipPartitioner(4, 0.05).partition(grid, node_weights=weights)
    check_valid(part, grid, 4)
    loads = np.bincount(part.assignment, weights=weights, minlength=4)
    assert loads.max() <= 1.05 * math.ceil(weights.sum() / 4)


@needs_kahip
def test_kahip_single_part(ring8: CSRGraph) -> None:
    part = KahipPartitioner(1).partition(ring8)
    assert part.assignment.tolist() == [0] * 8
    assert part.report.edge_cut == 0


def test_kahip_mode_must_be_an_enum() -> None:
    with pytest.raises(PartitionError, match="mode in KahipPartitioner"):
        KahipPartitioner(2, mode="fast")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("config", "module", "extra"),
    [
        (KahipPartitioner(2), "kahip", "kahip"),
        (PymetisPartitioner(2), "pymetis", "metis"),
    ],
)
def test_missing_engine_names_its_extra(
    monkeypatch: pytest.MonkeyPatch,
    ring8: CSRGraph,
    config: KahipPartitioner | PymetisPartitioner,
    module: str,
    extra: str,
) -> None:
    block(monkeypatch, module)
    assert not backend_available(module)
    with pytest.raises(PartitionError, match=rf"pip install 'strata-gnn\[{extra}\]'"):
        config.partition(ring8)


@needs_pymetis
def test_metis_resolves_to_pymetis_when_installed() -> None:
    partitioner, backend = resolve("metis", k=4, imbalance=0.05, seed=3)
    assert partitioner == PymetisPartitioner(4, 0.05, seed=3)
    assert backend == "pymetis"


def test_metis_falls_back_to_strata_multilevel(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, ring8: CSRGraph
) -> None:
    block(monkeypatch, "pymetis")
    with caplog.at_level(logging.INFO, logger="strata.partition"):
        partitioner, backend = resolve("metis", k=2, seed=1)
    assert partitioner == MultilevelPartitioner(2, 0.03, seed=1)
    assert backend == "strata-multilevel"
    assert "pymetis is not installed" in caplog.text
    assert "strata-gnn[metis]" in caplog.text
    assert partitioner.partition(ring8).report.backend == backend


@needs_kahip
def test_kahip_resolves_to_kahip_when_installed() -> None:
    assert resolve("kahip", k=4, seed=2) == (KahipPartitioner(4, seed=2), "kahip")


def test_kahip_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    block(monkeypatch, "kahip")
    with pytest.raises(PartitionError) as err:
        resolve("kahip", k=4)
    assert "pip install 'strata-gnn[kahip]'" in str(err.value)
    assert isinstance(err.value.__cause__, ImportError)


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("multilevel", MultilevelPartitioner(4, 0.05, seed=1)),
        ("grem", GremPartitioner(4, 0.05, passes=5, seed=1)),
        ("ldg", LDGPartitioner(4, 0.05, passes=1, seed=1)),
        ("fennel", FennelPartitioner(4, 0.05, passes=1, seed=1)),
        ("hdrf", HDRFPartitioner(4, seed=1)),
        ("random", RandomPartitioner(4, seed=1)),
        ("hash", HashPartitioner(4, seed=1)),
    ],
)
def test_strata_methods_resolve_unchanged(method: str, expected: object) -> None:
    partitioner, backend = resolve(method, k=4, imbalance=0.05, seed=1)
    assert partitioner == expected
    assert backend == (
        "strata-multilevel" if method == "multilevel" else f"strata-{method}"
    )


def test_passes_reach_the_streaming_methods() -> None:
    assert resolve("grem", k=2, passes=2)[0] == GremPartitioner(2, 0.03, passes=2)
    assert resolve("ldg", k=2, passes=3)[0] == LDGPartitioner(2, 0.03, passes=3)


def test_unknown_method_lists_the_names() -> None:
    with pytest.raises(
        PartitionError, match="expected one of metis, kahip, multilevel"
    ):
        resolve("scotch", k=2)


@pytest.mark.parametrize("method", METHODS)
def test_report_names_the_backend_that_ran(method: str, grid: CSRGraph) -> None:
    module = {"metis": "pymetis", "kahip": "kahip"}.get(method)
    if method == "kahip" and not backend_available("kahip"):
        pytest.skip("kahip not installed")
    partitioner, backend = resolve(method, k=4, imbalance=0.05, seed=0)
    part = partitioner.partition(grid)
    assert part.report.backend == backend
    assert part.report.to_dict()["backend"] == backend
    if module is None:
        assert backend.startswith("strata-")


def test_refined_report_keeps_the_first_backend(grid: CSRGraph) -> None:
    part = LDGPartitioner(4, 0.05).partition(grid)
    refined = GreedyKWayRefiner(4, 0.05).refine(grid, part)
    assert refined.report.backend == "strata-ldg+strata-refine"
