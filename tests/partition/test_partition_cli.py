import argparse
import json

import numpy as np
import pytest

from strata.engine.command import Command
from strata.operators.cli.partition import METHODS, PartitionCommand
from strata.operators.io.partition_book import (
    list_partition_books,
    load_partition_book,
    partition_book_meta,
)
from strata.partition.backends import backend_available
from strata.storage import load_graph

SPEC = "sbm:n=600,blocks=6,degree=8,intra=0.9,features=0,seed=1"


def run(argv):
    cmd = PartitionCommand()
    parser = argparse.ArgumentParser(prog="strata partition")
    cmd.configure(parser)
    return cmd.run(parser.parse_args(argv))


def test_is_a_command():
    assert isinstance(PartitionCommand(), Command)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_reports_and_saves(tmp_path, capsys, method):
    if method == "kahip" and not backend_available("kahip"):
        pytest.skip("KaHIP is not installed (pip install 'strata-gnn[kahip]')")
    report = tmp_path / "r.json"
    assert (
        run(
            [
                SPEC,
                "--k",
                "3",
                "--method",
                method,
                "--out",
                str(tmp_path),
                "--report",
                str(report),
            ]
        )
        == 0
    )
    data = json.loads(report.read_text())
    for key in (
        "method",
        "k",
        "edge_cut_fraction",
        "imbalance",
        "seconds",
        "peak_rss_bytes",
    ):
        assert key in data
    assert data["k"] == 3
    assert data["peak_rss_bytes"] >= 0
    assert data["book"] == f"partition/{method}-k3"
    assert list_partition_books(tmp_path) == [f"{method}-k3"]
    book = load_partition_book(tmp_path, f"{method}-k3")
    assert book.k == 3
    assert book.owner.shape == (600,)
    assert partition_book_meta(tmp_path, f"{method}-k3")["report"]["k"] == 3
    assert f"{data['method']} k=3" in capsys.readouterr().out


def test_chunks_and_halo_hops_are_saved(tmp_path):
    assert (
        run(
            [
                SPEC,
                "--k",
                "2",
                "--chunks",
                "3",
                "--halo-hops",
                "2",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    book = load_partition_book(tmp_path, "metis-k2")
    assert book.halo_hops == 2
    assert book.chunks is not None
    assert book.chunks.chunks_per_part == 3
    graph = load_graph(SPEC).graph
    assert np.array_equal(np.sort(book.chunks.dst), np.arange(graph.num_nodes))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([SPEC, "--k", "0"], "--k in strata partition: expected --k >= 1, got 0"),
        ([SPEC, "--k", "601"], "got 601"),
        (["rmat:nonsense=1", "--k", "2"], "error: "),
    ],
)
def test_bad_input_prints_one_error(capsys, argv, message):
    assert run(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert message in err


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_assignments_have_one_row_per_original_id(tmp_path, capsys, suffix):
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    # a SNAP file with sparse 1-based ids: 10 ── 20 ── 30 ── 40, 50 ── 60
    edges = tmp_path / "g.txt"
    edges.write_text("# comment\n10 20\n20 30\n30 40\n50 60\n")
    out = tmp_path / f"parts{suffix}"
    assert run([str(edges), "--k", "2", "--assignments", str(out)]) == 0
    table = pa_csv.read_csv(out) if suffix == ".csv" else pq.read_table(out)
    assert table.column_names == ["node_id", "part"]
    ids = table.column("node_id").to_pylist()
    assert len(ids) == len(set(ids)) == 6
    assert set(ids) == {10, 20, 30, 40, 50, 60}
    assert set(table.column("part").to_pylist()) <= {0, 1}


def test_assignments_keep_string_ids(tmp_path, capsys):
    import pyarrow.parquet as pq

    edges = tmp_path / "g.csv"
    edges.write_text("src,dst\nalice,bob\nbob,carol\n")
    out = tmp_path / "parts.parquet"
    argv = [str(edges), "--k", "2", "--method", "hash", "--assignments", str(out)]
    assert run(argv) == 0
    assert set(pq.read_table(out).column("node_id").to_pylist()) == {
        "alice",
        "bob",
        "carol",
    }


def test_assignments_suffix_is_checked_before_loading(tmp_path, capsys):
    out = tmp_path / "parts.json"
    assert run([SPEC, "--k", "2", "--assignments", str(out)]) == 1
    assert "--assignments" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("method", ["multilevel", "grem"])
def test_edge_imbalance_option(tmp_path, capsys, method):
    report = tmp_path / "r.json"
    spec = "rmat:scale=10,edge_factor=8,seed=0,undirected=true"
    argv = [spec, "--k", "4", "--method", method, "--edge-imbalance", "0.1"]
    assert run([*argv, "--report", str(report)]) == 0
    data = json.loads(report.read_text())
    assert data["edge_balance"] <= 1.10 + 1e-9
    assert data["config"]["edge_imbalance"] == 0.1
    assert "edge_balance=" in capsys.readouterr().out


def test_edge_imbalance_refused_by_streaming_methods(capsys):
    assert run([SPEC, "--k", "3", "--method", "ldg", "--edge-imbalance", "0.1"]) == 1
    assert "edge_imbalance" in capsys.readouterr().err


def test_negative_edge_imbalance_is_a_usage_error(capsys):
    assert run([SPEC, "--k", "3", "--edge-imbalance", "-1"]) == 1
    assert "--edge-imbalance" in capsys.readouterr().err
