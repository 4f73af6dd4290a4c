import argparse

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from strata.engine.command import Command
from strata.operators.cli.dataset import DatasetCommand
from strata.storage import open_dataset, read_manifest, save_arrays


def run(*argv):
    cmd = DatasetCommand()
    parser = argparse.ArgumentParser(prog="strata dataset")
    cmd.configure(parser)
    return cmd.run(parser.parse_args([str(a) for a in argv]))


def test_is_a_command():
    assert isinstance(DatasetCommand(), Command)
    assert DatasetCommand.name == "dataset"


def test_import_snap_and_info(tmp_path, capsys):
    edges = tmp_path / "web.txt"
    edges.write_text("# c\n10\t20\n20\t30\n30\t10\n10\t10\n")
    assert run("import", edges, "--out", tmp_path / "ds", "--drop-self-loops") == 0
    assert "saved web: 3 nodes, 3 edges" in capsys.readouterr().out
    ds = open_dataset(tmp_path / "ds", verify=True)
    assert ds.node_data["node_ids"].tolist() == [10, 20, 30]
    save_arrays(
        tmp_path / "ds", "partition/k2", {"owner": np.array([0, 1, 1])}, meta={"k": 2}
    )
    assert run("info", tmp_path / "ds", "--verify") == 0
    out = capsys.readouterr().out
    assert "nodes 3  edges 3" in out
    assert "node_ids int64[3]" in out
    assert "group   partition/k2: owner int64[3]  meta {'k': 2}" in out
    assert "checksums verified" in out


def test_import_parquet_with_named_columns(tmp_path, capsys):
    path = tmp_path / "e.parquet"
    pq.write_table(pa.table({"a": [0, 1], "b": [1, 2], "w": [0.5, 1.5]}), path)
    code = run(
        "import",
        path,
        "--out",
        tmp_path / "ds",
        "--src-col",
        "a",
        "--dst-col",
        "b",
        "--weight-col",
        "w",
        "--symmetrize",
    )
    assert code == 0
    g = open_dataset(tmp_path / "ds").graph
    assert g.num_edges == 4
    assert sorted(g.edge_weight.tolist()) == [0.5, 0.5, 1.5, 1.5]
    assert run("import", path, "--out", tmp_path / "d2", "--src-col", "x") == 1
    assert "column 'x'" in capsys.readouterr().err


def test_import_csv_by_position_without_header(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("9,0,1\n9,1,2\n")
    assert (
        run(
            "import",
            path,
            "--out",
            tmp_path / "ds",
            "--src-col",
            "1",
            "--dst-col",
            "2",
            "--no-header",
        )
        == 0
    )
    assert open_dataset(tmp_path / "ds").graph.indices.tolist() == [1, 2]


def test_malformed_import_reports_line_and_writes_nothing(tmp_path, capsys):
    path = tmp_path / "e.tsv"
    path.write_text("0\t1\n1\t2\textra\n")
    assert run("import", path, "--out", tmp_path / "ds") == 1
    assert "e.tsv:2" in capsys.readouterr().err
    assert not (tmp_path / "ds").exists()


def test_generate_and_info_of_a_damaged_dataset(tmp_path, capsys):
    assert (
        run("generate", "sbm:n=200,blocks=4,features=8", "--out", tmp_path / "ds") == 0
    )
    ds = open_dataset(tmp_path / "ds")
    assert ds.x.shape == (200, 8)
    entry = read_manifest(tmp_path / "ds").tables["node"]["x"]
    target = tmp_path / "ds" / entry.file
    target.write_bytes(target.read_bytes()[:-8])
    assert run("info", tmp_path / "ds", "--verify") == 1
    assert entry.file in capsys.readouterr().err
    assert run("generate", "rmat:scale=4,bogus=1", "--out", tmp_path / "x") == 1
    assert run("info", tmp_path / "nowhere") == 1


def test_generate_planetoid(tmp_path):
    assert run("generate", "planetoid:cora", "--out", tmp_path / "cora") == 0
    ds = open_dataset(tmp_path / "cora", verify=True)
    assert (ds.graph.num_nodes, ds.graph.num_edges, ds.num_classes) == (2708, 10556, 7)
    with pytest.raises(SystemExit):
        run("generate")
