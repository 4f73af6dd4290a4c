"""Issue 14, item 1 ("Data in"): any ids, headers, named columns, weights, METIS and
MatrixMarket, graph folders, node tables joined by id, structural features, and a
clear error (file, row or column, expectation) for every malformed input."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from strata.operators.cli.main import main
from strata.storage import FormatError, load_graph, open_dataset
from strata.storage.dataset import read_manifest
from strata.storage.loaders import (
    load_edge_list,
    load_folder,
    read_edges,
    read_node_table,
    structural_features,
)

# 1 ──▶ 2 ──▶ 3      SNAP, 1-based: 4 nodes, 4 edges, no node 0
# ▲           │
# └──── 4 ◀───┘
SNAP = "# Directed graph\n# Nodes: 4 Edges: 4\n1\t2\n2\t3\n3\t4\n4\t1\n"


def test_snap_with_1_based_ids_has_exactly_its_nodes(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text(SNAP)
    ds = load_edge_list(path)
    assert ds.graph.num_nodes == 4
    assert ds.original_ids.tolist() == [1, 2, 3, 4]
    assert ds.meta["directed"] is True
    src, dst = ds.graph.to_coo()
    pairs = {
        (int(ds.original_ids[s]), int(ds.original_ids[d]))
        for s, d in zip(src, dst, strict=True)
    }
    assert pairs == {(1, 2), (2, 3), (3, 4), (4, 1)}


def test_csv_with_header_and_string_ids(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("src,dst\nalice,bob\nbob,carol\ncarol,dave\n")
    ds = load_edge_list(path)
    assert ds.graph.num_nodes == 4
    assert ds.original_ids.tolist() == ["alice", "bob", "carol", "dave"]


def test_string_ids_with_a_header_of_other_names(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("source,target,weight\na,b,0.5\nb,c,2\n")
    edges = read_edges(path)
    assert edges.num_nodes == 3
    assert edges.weight.tolist() == [0.5, 2.0]


def test_sparse_64_bit_ids(tmp_path):
    path = tmp_path / "g.tsv"
    big = 2**62 + 7
    path.write_text(f"{big}\t5\n5\t-3\n")
    edges = read_edges(path)
    assert edges.num_nodes == 3
    assert edges.node_ids.tolist() == [-3, 5, big]


def test_0_based_contiguous_ids_are_kept(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("0 1\n1 2\n")
    edges = read_edges(path)
    assert edges.node_ids is None
    assert edges.num_nodes == 3


def test_parquet_columns_by_name_keep_weights(tmp_path):
    path = tmp_path / "g.parquet"
    table = {"w": [1.5, 2.5], "to": [7, 9], "from": [9, 8], "extra": [0, 0]}
    pq.write_table(pa.table(table), path)
    edges = read_edges(path, src_col="from", dst_col="to", weight_col="w")
    assert edges.node_ids.tolist() == [7, 8, 9]
    assert edges.src.tolist() == [2, 1]
    assert edges.dst.tolist() == [0, 2]
    assert edges.weight.tolist() == [1.5, 2.5]
    ds = load_edge_list(path, src_col="from", dst_col="to", weight_col="w")
    assert sorted(ds.graph.edge_weight.tolist()) == [1.5, 2.5]


def test_parquet_detects_source_target_weight(tmp_path):
    path = tmp_path / "g.parquet"
    pq.write_table(pa.table({"weight": [3.0], "source": ["x"], "target": ["y"]}), path)
    edges = read_edges(path)
    assert edges.node_ids.tolist() == ["x", "y"]
    assert edges.weight.tolist() == [3.0]


def test_undirected_is_explicit(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("1 2\n2 3\n")
    assert load_edge_list(path).graph.num_edges == 2
    ds = load_edge_list(path, undirected=True)
    assert ds.graph.num_edges == 4
    assert ds.meta["directed"] is False


def test_metis_graph(tmp_path):
    # 1 ── 2 ── 3, edge weights 5 and 7, vertex weights 1, 2, 3
    path = tmp_path / "p.graph"
    path.write_text("% path\n3 2 11\n1 2 5\n2 1 5 3 7\n3 2 7\n")
    ds = load_edge_list(path)
    assert ds.graph.num_nodes == 3
    assert ds.graph.num_edges == 4
    assert ds.meta["directed"] is False
    assert ds.node_data["node_weight"].ravel().tolist() == [1, 2, 3]
    assert sorted(ds.graph.edge_weight.tolist()) == [5, 5, 7, 7]
    assert ds.original_ids.tolist() == [1, 2, 3]


def test_metis_isolated_vertex_is_a_blank_line(tmp_path):
    path = tmp_path / "p.graph"
    path.write_text("3 1\n2\n1\n\n")
    assert load_edge_list(path).graph.num_nodes == 3


def test_mtx_general_and_symmetric(tmp_path):
    general = tmp_path / "g.mtx"
    general.write_text(
        "%%MatrixMarket matrix coordinate real general\n% c\n3 3 2\n1 2 0.5\n3 1 2\n"
    )
    ds = load_edge_list(general)
    assert ds.graph.num_edges == 2
    assert ds.meta["directed"] is True
    symmetric = tmp_path / "s.mtx"
    symmetric.write_text(
        "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n2 1\n3 2\n3 3\n"
    )
    ds = load_edge_list(symmetric)
    assert ds.graph.num_edges == 5  # two off-diagonal pairs and one loop
    assert ds.meta["directed"] is False


def _folder(tmp_path, nodes):
    folder = tmp_path / "graph"
    folder.mkdir()
    pq.write_table(
        pa.table({"src": [10, 20, 30], "dst": [20, 30, 10], "weight": [1.0, 2, 3]}),
        folder / "edges.parquet",
    )
    pq.write_table(pa.table(nodes), folder / "nodes.parquet")
    return folder


def test_folder_with_nodes_and_edges_parquet(tmp_path):
    nodes = {
        "id": [30, 10, 20],
        "label": ["b", "a", "b"],
        "split": ["test", "train", "val"],
        "f1": [3.0, 1.0, 2.0],
        "f2": [30, 10, 20],
        "title": ["z", "x", "y"],
    }
    folder = _folder(tmp_path, nodes)
    (folder / "graph.json").write_text('{"directed": false, "name": "mine"}')
    ds = load_graph(str(folder))
    assert ds.name == "mine"
    assert ds.graph.num_nodes == 3
    assert ds.graph.num_edges == 6
    assert ds.original_ids.tolist() == [10, 20, 30]
    assert ds.x.tolist() == [[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]]
    assert ds.y.tolist() == [0, 1, 1]
    assert ds.meta["label_names"] == ["a", "b"]
    assert ds.train_mask.tolist() == [True, False, False]
    assert ds.test_mask.tolist() == [False, False, True]
    assert ds.node_data["title"].tolist() == ["x", "y", "z"]


def test_features_as_a_list_column(tmp_path):
    path = tmp_path / "nodes.parquet"
    pq.write_table(pa.table({"node_id": [1, 0], "x": [[1.0, 2.0], [3.0, 4.0]]}), path)
    table = read_node_table(path, None, 2)
    assert table.columns["x"].tolist() == [[3.0, 4.0], [1.0, 2.0]]


@pytest.mark.parametrize("kind", ["degree", "onehot-degree", "random-walk"])
def test_structural_features_are_deterministic(tmp_path, kind):
    path = tmp_path / "g.txt"
    path.write_text(SNAP)
    a = load_edge_list(path, structural=kind)
    b = load_edge_list(path, structural=kind)
    assert a.x.dtype == np.float32
    assert a.x.shape[0] == 4
    assert np.array_equal(a.x, b.x)
    assert a.meta["x"] == f"structural:{kind}"


def test_random_walk_features_on_a_cycle():
    # a 4-cycle: a walk returns after 2 steps with probability 1/2, never after 1 or 3
    path_edges = np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0])
    from strata.storage.csr import CSRGraph

    g = CSRGraph.from_edges(*path_edges)
    x = structural_features(g, "random-walk", steps=3)
    assert np.allclose(x, [[0.0, 0.5, 0.0]] * 4)


# -- malformed inputs: the error names the file, the row or column, the expectation


def _raises(match, call, *args, **kwargs):
    with pytest.raises(FormatError, match=match):
        call(*args, **kwargs)


def test_wrong_column_name(tmp_path):
    path = tmp_path / "g.parquet"
    pq.write_table(pa.table({"a": [1], "b": [2]}), path)
    _raises(
        r"--src column 'from' in read_edges\(.*g.parquet\): expected one of the "
        r"columns \['a', 'b'\]",
        read_edges,
        path,
        src_col="from",
    )


def test_non_numeric_weight_in_csv_names_the_line(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("src,dst,weight\n1,2,0.5\n2,3,heavy\n")
    _raises(r"g.csv:3 in read_edges: expected a number in field 3", read_edges, path)


def test_non_numeric_weight_in_parquet_names_the_column(tmp_path):
    path = tmp_path / "g.parquet"
    pq.write_table(pa.table({"src": [1], "dst": [2], "weight": ["x"]}), path)
    _raises(
        r"weight column 'weight' in read_edges\(.*g.parquet\): expected numbers",
        read_edges,
        path,
    )


def test_truncated_parquet(tmp_path):
    path = tmp_path / "g.parquet"
    pq.write_table(pa.table({"src": list(range(100)), "dst": list(range(100))}), path)
    path.write_bytes(path.read_bytes()[:-40])
    _raises(
        r"g.parquet in read_edges: expected a complete Parquet file", read_edges, path
    )


def test_feature_id_missing_from_the_graph(tmp_path):
    folder = _folder(tmp_path, {"id": [10, 20, 30, 99], "f": [1.0, 2, 3, 4]})
    _raises(
        r"row 3, column 'id' in read_node_table\(.*nodes.parquet\): expected ids "
        r"of nodes in the graph.*got id 99",
        load_folder,
        folder,
    )


def test_graph_node_without_a_feature_row(tmp_path):
    folder = _folder(tmp_path, {"id": [10, 20], "f": [1.0, 2]})
    _raises(
        r"nodes.parquet.*expected a row for each of the graph's 3 nodes, got 2 "
        r"rows; node 30 has none",
        load_folder,
        folder,
    )


def test_duplicate_feature_row(tmp_path):
    folder = _folder(tmp_path, {"id": [10, 20, 20], "f": [1.0, 2, 3]})
    _raises(r"row 2, column 'id'.*expected one row per node", load_folder, folder)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("3 2\n2\n1 3\n", r"p.graph in read_edges: expected 3 vertex lines"),
        ("3 2\n2\n1 3\n2 x\n", r"p.graph:4 in read_edges: expected integers"),
        (
            "3 2\n2\n1 9\n2\n",
            r"p.graph:3 in read_edges: expected neighbour ids in 1..3",
        ),
        ("3 5\n2\n1 3\n2\n", r"p.graph:1 in read_edges: expected 10 adjacency entries"),
    ],
)
def test_malformed_metis(tmp_path, text, match):
    path = tmp_path / "p.graph"
    path.write_text(text)
    _raises(match, read_edges, path)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("%%MatrixMarket matrix array real general\n", r"m.mtx:1 in read_edges"),
        (
            "%%MatrixMarket matrix coordinate real general\n2 3 1\n1 2 1\n",
            r"m.mtx:2 in read_edges: expected 'rows cols nnz' of a square matrix",
        ),
        (
            "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 2 1\n",
            r"m.mtx in read_edges: expected 2 entries",
        ),
        (
            "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 heavy\n",
            r"m.mtx:3 in read_edges: expected 'i j value' with ids in 1..2",
        ),
    ],
)
def test_malformed_mtx(tmp_path, text, match):
    path = tmp_path / "m.mtx"
    path.write_text(text)
    _raises(match, read_edges, path)


def test_a_bad_import_leaves_the_stored_dataset_unchanged(tmp_path, capsys):
    good = tmp_path / "g.txt"
    good.write_text(SNAP)
    out = tmp_path / "ds"
    assert main(["dataset", "import", str(good), "--out", str(out)]) == 0
    before = (out / "manifest.json").read_bytes()
    files = sorted(p.name for p in out.iterdir())
    bad = tmp_path / "bad.csv"
    bad.write_text("src,dst,weight\n1,2,x\n")
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("id,f\n1,0.5\n7,1.5\n")
    assert main(["dataset", "import", str(bad), "--out", str(out)]) == 1
    assert (
        main(["dataset", "import", str(good), "--out", str(out), "--nodes", str(nodes)])
        == 1
    )
    err = capsys.readouterr().err
    assert "bad.csv:2" in err
    assert "nodes.csv" in err
    assert "id 7" in err
    assert (out / "manifest.json").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == files
    assert open_dataset(out).original_ids.tolist() == [1, 2, 3, 4]
    assert read_manifest(out).version == 1


def test_cli_import_flags(tmp_path, capsys):
    path = tmp_path / "g.csv"
    path.write_text("weight,to,from\n0.5,b,a\n1.5,c,b\n")
    out = tmp_path / "ds"
    argv = [
        "dataset",
        "import",
        str(path),
        "--out",
        str(out),
        "--src",
        "from",
        "--dst",
        "to",
        "--weight",
        "weight",
        "--undirected",
        "--structural",
        "degree",
    ]
    assert main(argv) == 0
    assert "3 nodes, 4 edges" in capsys.readouterr().out
    ds = open_dataset(out)
    assert ds.original_ids.tolist() == ["a", "b", "c"]
    assert sorted(ds.graph.edge_weight.tolist()) == [0.5, 0.5, 1.5, 1.5]
    assert ds.x.shape == (3, 2)
    assert ds.meta["directed"] is False


def test_cli_import_a_folder(tmp_path):
    folder = _folder(tmp_path, {"id": [10, 20, 30], "label": [0, 1, 0]})
    out = tmp_path / "ds"
    assert main(["dataset", "import", str(folder), "--out", str(out)]) == 0
    ds = open_dataset(out)
    assert ds.y.tolist() == [0, 1, 0]
    assert ds.original_ids.tolist() == [10, 20, 30]


def test_old_datasets_without_node_ids_still_open(tmp_path):
    out = tmp_path / "ds"
    assert (
        main(["dataset", "generate", "rmat:scale=4,edge_factor=2", "--out", str(out)])
        == 0
    )
    ds = open_dataset(out)
    assert "node_ids" not in ds.node_data
    assert ds.original_ids.tolist() == list(range(16))


def test_networkx_keeps_attributes_and_says_direction():
    import networkx as nx

    from strata.storage.interop import dataset_from_networkx

    g = nx.DiGraph()
    g.add_node("b", x=2.0, name="bee")
    g.add_node("a", x=1.0, name="ay")
    g.add_edge("b", "a", weight=0.5, t=7)
    g.add_edge("a", "b", weight=1.5, t=9)
    ds = dataset_from_networkx(g)
    assert ds.meta["directed"] is True
    assert ds.original_ids.tolist() == ["b", "a"]
    assert ds.node_data["x"].tolist() == [2.0, 1.0]
    assert "name" not in ds.node_data  # text attributes are not features
    src, dst = ds.graph.to_coo()
    got = {
        (int(s), int(d)): (float(w), float(t))
        for s, d, w, t in zip(
            src, dst, ds.graph.edge_weight, ds.edge_data["t"], strict=True
        )
    }
    assert got == {(0, 1): (0.5, 7.0), (1, 0): (1.5, 9.0)}
    undirected = dataset_from_networkx(g.to_undirected())
    assert undirected.meta["directed"] is False
    assert undirected.graph.num_edges == 2 * g.to_undirected().number_of_edges()
