"""``strata algo`` and the algorithm pipeline steps, against networkx and scipy.

The SNAP case: Cora's edges written as a SNAP edge list with non-contiguous
original ids (``7*i + 1000``); ``strata algo pagerank`` must write one row per
original id, and agree with ``networkx.pagerank`` (same damping and tolerance) to
1e-6 in L1.
"""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import numpy as np
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph

from strata.engine import Pipeline, execute
from strata.operators.algorithms.steps import (
    bfs_step,
    cc_step,
    load_weighted_graph,
    pagerank_step,
    sssp_step,
)
from strata.operators.cli.main import main
from strata.storage.loaders.planetoid import load_planetoid


def original(i: np.ndarray) -> np.ndarray:
    return 7 * i + 1000


@pytest.fixture(scope="module")
def cora_snap(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    """Cora's edges as a SNAP file with ids 7*i+1000; returns (path, src/dst ids)."""
    graph = load_planetoid("cora").graph
    src, dst = graph.to_coo()
    edges = np.column_stack([original(src), original(dst.astype(np.int64))])
    path = tmp_path_factory.mktemp("snap") / "cora.txt"
    lines = "\n".join(f"{u}\t{v}" for u, v in edges.tolist())
    path.write_text(f"# Cora as a SNAP edge list\n# FromNodeId\tToNodeId\n{lines}\n")
    return path, edges


def test_snap_pagerank_matches_networkx(
    cora_snap: tuple[Path, np.ndarray], tmp_path: Path
) -> None:
    path, edges = cora_snap
    out, report = tmp_path / "pr.parquet", tmp_path / "pr.json"
    argv = ["algo", "pagerank", str(path), "--tol", "1e-6", "--damping", "0.85"]
    assert main([*argv, "--out", str(out), "--report", str(report)]) == 0
    table = pq.read_table(out)
    ids = table.column("node_id").to_numpy()
    nodes = np.unique(edges)
    assert ids.size == nodes.size == 2708  # one row per original id
    assert set(ids.tolist()) == set(nodes.tolist())
    want = nx.pagerank(nx.DiGraph(edges.tolist()), alpha=0.85, tol=1e-6)
    values = table.column("value").to_numpy()
    expected = np.array([want[i] for i in ids.tolist()])
    assert np.abs(values - expected).sum() <= 1e-6
    data = json.loads(report.read_text())
    assert data["algorithm"] == "pagerank"
    assert data["converged"] is True
    assert data["iterations"] > 5
    assert data["bytes"] == 0
    assert data["num_nodes"] == 2708


def test_imported_dataset_bfs_and_cc_use_original_ids(
    cora_snap: tuple[Path, np.ndarray], tmp_path: Path
) -> None:
    path, edges = cora_snap
    dataset = tmp_path / "cora_ds"
    argv = ["dataset", "import", str(path), "--format", "snap", "--out", str(dataset)]
    assert main(argv) == 0
    source = int(edges[0, 0])
    out = tmp_path / "bfs.csv"
    argv = ["algo", "bfs", str(dataset), "--source", str(source), "--out", str(out)]
    assert main(argv) == 0
    table = pa_csv.read_csv(out)
    ids = table.column("node_id").to_numpy()
    internal = (ids - 1000) // 7
    graph = load_planetoid("cora").graph
    a = sp.csr_matrix(
        (np.ones(graph.num_edges), graph.indices, graph.indptr), shape=(2708, 2708)
    )
    want = csgraph.shortest_path(a, unweighted=True, indices=(source - 1000) // 7)
    want = np.where(np.isinf(want), -1, want)[internal]
    np.testing.assert_array_equal(table.column("value").to_numpy(), want)

    out = tmp_path / "cc.parquet"
    assert main(["algo", "cc", str(dataset), "--out", str(out)]) == 0
    table = pq.read_table(out)
    _, labels = csgraph.connected_components(a, directed=True, connection="weak")
    smallest = np.full(labels.max() + 1, 2708)
    np.minimum.at(smallest, labels, np.arange(2708))
    ids = (table.column("node_id").to_numpy() - 1000) // 7
    expected = original(smallest[labels[ids]])
    np.testing.assert_array_equal(table.column("value").to_numpy(), expected)


def test_source_not_in_graph_is_a_usage_error(
    cora_snap: tuple[Path, np.ndarray],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, _ = cora_snap
    out = tmp_path / "x.parquet"
    argv = ["algo", "bfs", str(path), "--source", "1001", "--out", str(out)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "--source in strata algo" in err
    assert "'1001'" in err
    assert not out.exists()


def test_bad_arguments_fail_before_loading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "x.parquet")
    cases = [
        (["bfs", "rmat:scale=4", "--out", out], "--source"),
        (["cc", "rmat:scale=4", "--source", "1", "--out", out], "--source"),
        (["pagerank", "rmat:scale=4", "--out", str(tmp_path / "x.txt")], "--out"),
        (["pagerank", "rmat:scale=4", "--tol", "0", "--out", out], "--tol"),
        (["pagerank", "rmat:scale=4", "--workers", "0", "--out", out], "--workers"),
        (
            ["bfs", "rmat:scale=4", "--source", "0", "--iterations", "3", "--out", out],
            "--iterations",
        ),
    ]
    for argv, flag in cases:
        assert main(["algo", *argv]) == 1, argv
        assert flag in capsys.readouterr().err, argv


def test_negative_weight_names_the_edge_by_original_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edges = tmp_path / "w.csv"
    edges.write_text("src,dst,weight\n10,20,1\n20,30,-4\n30,10,2\n")
    out = tmp_path / "d.csv"
    argv = ["algo", "sssp", str(edges), "--source", "10", "--out", str(out)]
    assert main(argv) == 1
    assert "-4.0 on edge 20 -> 30" in capsys.readouterr().err
    edges.write_text("src,dst,weight\n10,20,1\n20,30,4\n10,30,9\n10,30,3\n")
    assert main(argv) == 0
    table = pa_csv.read_csv(out)
    values = dict(
        zip(
            table.column("node_id").to_pylist(),
            table.column("value").to_pylist(),
            strict=True,
        )
    )
    assert values == {10: 0.0, 20: 1.0, 30: 3.0}  # the multi-edge's minimum counts


def test_workers_run_the_distributed_version(tmp_path: Path) -> None:
    single, multi = tmp_path / "one.parquet", tmp_path / "two.parquet"
    report = tmp_path / "two.json"
    base = ["algo", "bfs", "rmat:scale=8,edge_factor=4,seed=2", "--source", "3"]
    assert main([*base, "--out", str(single)]) == 0
    argv = [*base, "--workers", "2", "--placement", "hubsplit", "--mesh", "sim"]
    assert main([*argv, "--out", str(multi), "--report", str(report)]) == 0
    np.testing.assert_array_equal(
        pq.read_table(single).column("value").to_numpy(),
        pq.read_table(multi).column("value").to_numpy(),
    )
    data = json.loads(report.read_text())
    assert data["workers"] == 2
    assert len(data["ranks"]) == 2
    assert data["bytes"] > 0


# ---------------------------------------------------------------- pipeline steps


def summarise(table: object) -> dict[str, list[float]]:
    import pyarrow as pa

    assert isinstance(table, pa.Table)
    return {
        "ids": table.column("node_id").to_pylist(),
        "values": [float(x) for x in table.column("value").to_pylist()],
    }


def ranks_summary(table: object) -> dict[str, list[float]]:
    out = summarise(table)
    return {"rank_ids": out["ids"], "ranks": out["values"]}


def labels_summary(table: object) -> dict[str, list[float]]:
    out = summarise(table)
    return {"labels": out["values"]}


def dist_summary(table: object) -> dict[str, list[float]]:
    return {"dist": summarise(table)["values"]}


def hops_summary(table: object) -> dict[str, list[float]]:
    return {"hops": summarise(table)["values"]}


def test_steps_on_every_executor(executor: str, tmp_path: Path) -> None:
    edges = tmp_path / "g.csv"
    rows = "\n".join(
        f"{u},{v},{w}"
        for u, v, w in [(5, 9, 2), (9, 12, 3), (12, 5, 1), (5, 12, 7), (40, 41, 1)]
    )
    edges.write_text(f"src,dst,weight\n{rows}\n")
    p = Pipeline("algorithms")
    p.step("graph", load_weighted_graph, spec=str(edges))
    p.step("pr", pagerank_step, "graph", iterations=20)
    p.step("cc", cc_step, "graph")
    p.step("sssp", sssp_step, "graph", source=5)
    p.step("bfs", bfs_step, "graph", source=5)
    p.step("ranks", ranks_summary, "pr")
    p.step("labels", labels_summary, "cc")
    p.step("dist", dist_summary, "sssp")
    p.step("hops", hops_summary, "bfs")
    p.record("ranks", "labels", "dist", "hops")
    outputs = execute(p, executor).outputs
    assert outputs["rank_ids"] == [5, 9, 12, 40, 41]
    assert outputs["labels"] == [5, 5, 5, 40, 40]
    assert outputs["dist"][:3] == [0.0, 2.0, 5.0]
    assert outputs["hops"] == [0, 1, 1, -1, -1]
    assert sum(outputs["ranks"]) == pytest.approx(1.0)
