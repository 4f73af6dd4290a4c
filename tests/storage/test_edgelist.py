import gzip

import networkx as nx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata.storage import DuplicatePolicy, FormatError
from strata.storage.loaders import load_edge_list, read_edges


def _pairs(edges):
    return list(zip(edges.src.tolist(), edges.dst.tolist(), strict=True))


def test_csv_with_header_and_named_columns(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("weight,to,from\n0.5,1,0\n1.5,2,1\n2.5,0,2\n")
    edges = read_edges(path, src_col="from", dst_col="to", weight_col="weight")
    assert _pairs(edges) == [(0, 1), (1, 2), (2, 0)]
    assert edges.weight.tolist() == [0.5, 1.5, 2.5]
    assert edges.node_ids is None
    assert edges.num_nodes == 3


def test_src_dst_names_are_the_default(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("dst,src\n1,0\n2,0\n")
    assert _pairs(read_edges(path)) == [(0, 1), (0, 2)]


def test_tsv_without_header_by_position(tmp_path):
    path = tmp_path / "e.tsv"
    path.write_text("7\t1\t0\n8\t2\t1\n")
    edges = read_edges(path, src_col=2, dst_col=1, header=False)
    assert _pairs(edges) == [(0, 1), (1, 2)]


def test_snap_with_comments_whitespace_and_crlf(tmp_path):
    path = tmp_path / "web.txt"
    path.write_bytes(
        b"# Directed graph\r\n# FromNodeId\tToNodeId\r\n"
        b"10\t20\r\n  20   30 \r\n# a comment in the middle\r\n\r\n30\t10\r\n"
    )
    edges = read_edges(path)
    assert edges.node_ids.tolist() == [10, 20, 30]
    assert _pairs(edges) == [(0, 1), (1, 2), (2, 0)]
    oracle = nx.read_edgelist(path, comments="#", nodetype=int, create_using=nx.DiGraph)
    ours = {(int(edges.node_ids[s]), int(edges.node_ids[d])) for s, d in _pairs(edges)}
    assert ours == set(oracle.edges())


def test_gzipped_text(tmp_path):
    path = tmp_path / "e.txt.gz"
    with gzip.open(path, "wb") as f:
        f.write(b"0 1\n1 2\n")
    assert _pairs(read_edges(path)) == [(0, 1), (1, 2)]


def test_remapping_rules(tmp_path):
    path = tmp_path / "e.txt"
    path.write_text("5 9\n9 -3\n")
    auto = read_edges(path)
    assert auto.node_ids.tolist() == [-3, 5, 9]
    assert _pairs(auto) == [(1, 2), (2, 0)]
    path.write_text("0 1\n1 3\n")  # a gap at 2
    assert read_edges(path).node_ids.tolist() == [0, 1, 3]
    kept = read_edges(path, remap=False, num_nodes=6)
    assert kept.node_ids is None
    assert kept.num_nodes == 6
    assert _pairs(kept) == [(0, 1), (1, 3)]
    path.write_text("1000000000000 5\n5 -7\n")  # too sparse for a lookup table
    sparse = read_edges(path)
    assert sparse.node_ids.tolist() == [-7, 5, 10**12]
    assert _pairs(sparse) == [(2, 1), (1, 0)]
    path.write_text("0 1\n1 2\n")
    assert read_edges(path).node_ids is None  # already 0..n-1
    assert read_edges(path, remap=True).node_ids.tolist() == [0, 1, 2]


def test_string_ids(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("alice,bob\nbob,carol\n")
    edges = read_edges(path, id_type="str")
    assert edges.node_ids.tolist() == ["alice", "bob", "carol"]
    assert _pairs(edges) == [(0, 1), (1, 2)]
    with pytest.raises(FormatError, match="string ids"):
        read_edges(path, id_type="str", remap=False)


def test_parquet(tmp_path):
    path = tmp_path / "e.parquet"
    pq.write_table(
        pa.table({"a": [0, 1, 2], "b": [1, 2, 0], "w": [1.0, 2.0, 3.0]}), path
    )
    edges = read_edges(path, src_col="a", dst_col="b", weight_col="w")
    assert _pairs(edges) == [(0, 1), (1, 2), (2, 0)]
    assert edges.weight.tolist() == [1.0, 2.0, 3.0]
    assert _pairs(read_edges(path)) == [(0, 1), (1, 2), (2, 0)]  # first two columns


def test_parquet_missing_columns_names_what_exists(tmp_path):
    path = tmp_path / "e.parquet"
    pq.write_table(pa.table({"a": [0, 1], "b": [1, 0]}), path)
    with pytest.raises(
        FormatError, match=r"column 'from' .*one of the columns \['a', 'b'\]"
    ):
        read_edges(path, src_col="from", dst_col="b")


def test_parquet_nulls_and_float_ids(tmp_path):
    path = tmp_path / "e.parquet"
    pq.write_table(pa.table({"src": [0, None, 2], "dst": [1, 2, 0]}), path)
    with pytest.raises(FormatError, match="a null at row 1"):
        read_edges(path)
    pq.write_table(pa.table({"src": [0.0, 1.0], "dst": [1.0, 0.0]}), path)
    with pytest.raises(FormatError, match="integer or string ids"):
        read_edges(path)


@pytest.mark.parametrize(
    ("name", "text", "line", "expected"),
    [
        ("e.txt", "# c\n0 1\n1 2\n1 2 3\n", 4, "2 fields"),
        ("e.txt", "0 1\n\n# c\n1 x\n", 4, "an integer id in field 2"),
        ("e.csv", "src,dst\n0,1\n2\n", 3, "2 fields"),
        ("e.csv", "src,dst,w\n0,1,2.0\n1,2,heavy\n", 3, "a number in field 3"),
        ("e.tsv", "0\t1\n1\t2\n3.5\t4\n", 3, "an integer id in field 1"),
    ],
)
def test_malformed_line_reports_file_and_line(tmp_path, name, text, line, expected):
    path = tmp_path / name
    path.write_text(text)
    weight = "w" if "w\n" in text.split("\n", 1)[0] + "\n" else None
    with pytest.raises(
        FormatError, match=rf"{name}:{line} in read_edges: expected {expected}"
    ):
        read_edges(path, weight_col=weight)


def test_bad_files(tmp_path):
    with pytest.raises(FormatError, match="no such file"):
        read_edges(tmp_path / "none.csv")
    (tmp_path / "e.xyz").write_text("0 1\n")
    with pytest.raises(FormatError, match="suffix"):
        read_edges(tmp_path / "e.xyz")
    assert _pairs(read_edges(tmp_path / "e.xyz", format="snap")) == [(0, 1)]
    (tmp_path / "empty.txt").write_text("# only a comment\n\n")
    with pytest.raises(FormatError, match="no data lines"):
        read_edges(tmp_path / "empty.txt")
    (tmp_path / "e.csv").write_text("src,dst\n0,1\n")
    with pytest.raises(FormatError, match="column 'x'"):
        read_edges(tmp_path / "e.csv", src_col="x")


def test_load_edge_list_as_dataset(tmp_path):
    path = tmp_path / "cites.txt"
    path.write_text("10 20\n20 10\n10 20\n")
    ds = load_edge_list(path, duplicates=DuplicatePolicy.REMOVE)
    assert ds.name == "cites"
    assert ds.graph.num_edges == 2
    assert ds.node_data["node_ids"].tolist() == [10, 20]


@settings(max_examples=30, deadline=None)
@given(
    edges=st.lists(
        st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=1, max_size=40
    ),
    fmt=st.sampled_from(["csv", "tsv", "snap"]),
    header=st.booleans(),
    comments=st.booleans(),
    spaces=st.sampled_from([" ", "\t", "  ", " \t "]),
)
def test_text_formats_round_trip(
    tmp_path_factory, edges, fmt, header, comments, spaces
):
    sep = {"csv": ",", "tsv": "\t", "snap": spaces}[fmt]
    lines = ["# generated"] if comments else []
    if header:
        lines.append(sep.join(["src", "dst"]))
    for i, (u, v) in enumerate(edges):
        lines.append(f"{u}{sep}{v}")
        if comments and i % 3 == 1:
            lines.append("# between")
    path = tmp_path_factory.mktemp("e") / f"e.{ {'snap': 'txt'}.get(fmt, fmt) }"
    path.write_text("\n".join(lines) + "\n")
    got = read_edges(path, remap=False, header=header)
    assert _pairs(got) == edges
