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
