import json
import os
import signal
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from strata.storage import (
    CSRGraph,
    DatasetError,
    FeatureError,
    GraphDataset,
    load_planetoid,
)
from strata.storage.dataset import (
    delete_arrays,
    load_arrays,
    open_dataset,
    read_manifest,
    save_arrays,
    save_columns,
    save_dataset,
    verify_dataset,
)

# 0 ──▶ 1 ──▶ 2      TINY: 5 nodes, 5 edges, every in-degree 1
# ▲     │
# │     ▼
# 3 ◀── 4
TINY = CSRGraph.from_edges(np.array([0, 1, 1, 4, 3]), np.array([1, 2, 4, 3, 0]))


def tiny(**node_data):
    return GraphDataset(TINY, node_data=node_data, name="tiny")


def data_files(directory):
    return sorted(p.name for p in Path(directory).iterdir() if p.suffix == ".arrow")


def test_cora_round_trip_is_exact(tmp_path):
    cora = load_planetoid("cora")
    manifest = save_dataset(cora, tmp_path)
    assert manifest.num_nodes == 2708
    assert manifest.tables["node"]["x"].shape == (2708, 1433)
    back = open_dataset(tmp_path, verify=True)
    assert back.name == "cora"
    assert back.num_classes == 7
    np.testing.assert_array_equal(back.graph.indptr, cora.graph.indptr)
    np.testing.assert_array_equal(back.graph.indices, cora.graph.indices)
    assert back.graph.indices.dtype == np.int32
    for name, array in cora.node_data.items():
        assert back.node_data[name].dtype == array.dtype
        np.testing.assert_array_equal(back.node_data[name], array)
    # Memory-mapped, read-only, no copy.
    assert not back.x.flags.writeable
    assert not back.x.flags.owndata


DTYPES = [
    np.float16,
    np.float32,
    np.float64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.bool_,
]


@st.composite
def datasets(draw):
    n = draw(st.integers(1, 12))
    m = draw(st.integers(0, 30))
    src = draw(hnp.arrays(np.int64, m, elements=st.integers(0, n - 1)))
    dst = draw(hnp.arrays(np.int64, m, elements=st.integers(0, n - 1)))
    weighted = draw(st.booleans())
    weight = np.arange(m, dtype=np.float32) / 7 if weighted else None
    graph = CSRGraph.from_edges(
        src, dst, n, edge_weight=weight, keep_edge_ids=draw(st.booleans())
    )

    def table(rows):
        out = {}
        for i in range(draw(st.integers(0, 3))):
            dtype = draw(st.sampled_from(DTYPES))
            shape = (rows,) if draw(st.booleans()) else (rows, draw(st.integers(1, 4)))
            out[f"c{i}"] = draw(hnp.arrays(dtype, shape))
        return out

    return GraphDataset(graph, table(n), table(graph.num_edges), name="prop")


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(datasets())
def test_round_trip_property(ds):
    with tempfile.TemporaryDirectory() as d:
        save_dataset(ds, d, allow_nonfinite=True)
        back = open_dataset(d, verify=True)
        for name in ("indptr", "indices", "edge_weight", "edge_ids"):
            ours, theirs = getattr(back.graph, name), getattr(ds.graph, name)
            if theirs is None:
                assert ours is None
            else:
                assert ours.dtype == theirs.dtype
                np.testing.assert_array_equal(ours, theirs)
        for mine, stored in (
            (ds.node_data, back.node_data),
            (ds.edge_data, back.edge_data),
        ):
            assert mine.keys() == stored.keys()
            for key, array in mine.items():
                assert stored[key].dtype == array.dtype
                assert stored[key].shape == array.shape
                # Bitwise equality (NaN payloads and -0.0 included).
                assert stored[key].tobytes() == array.tobytes()


def test_saving_again_replaces_files_and_keeps_groups(tmp_path):
    save_dataset(tiny(y=np.arange(5)), tmp_path)
    save_arrays(
        tmp_path,
        "partition/hash-k2",
        {"owner": np.array([0, 1, 0, 1, 0])},
        meta={"k": 2},
    )
    first = set(data_files(tmp_path))
    manifest = save_dataset(tiny(y=np.arange(5) * 2), tmp_path)
    assert manifest.version == 3
    now = set(data_files(tmp_path))
    assert len(now) == len(first)
    assert not (now & first) - {
        read_manifest(tmp_path).groups["partition/hash-k2"].arrays["owner"].file
    }
    assert open_dataset(tmp_path).y.tolist() == [0, 2, 4, 6, 8]
    group = load_arrays(tmp_path, "partition/hash-k2", verify=True)
    assert group["owner"].tolist() == [0, 1, 0, 1, 0]
    assert read_manifest(tmp_path).groups["partition/hash-k2"].meta == {"k": 2}
    delete_arrays(tmp_path, "partition/hash-k2")
    with pytest.raises(DatasetError, match="group"):
        load_arrays(tmp_path, "partition/hash-k2")


def test_groups_without_a_graph_and_bad_group_names(tmp_path):
    save_arrays(tmp_path, "book", {"a": np.arange(3), "b": np.arange(7.0)})
    assert load_arrays(tmp_path, "book")["b"].shape == (7,)
    with pytest.raises(DatasetError, match="only array groups"):
        open_dataset(tmp_path)
    for bad in ("../x", "a//b", "a b", ""):
        with pytest.raises(DatasetError, match="group"):
            save_arrays(tmp_path, bad, {"a": np.arange(3)})


def test_save_columns_adds_a_feature(tmp_path):
    save_dataset(tiny(), tmp_path)
    save_columns(tmp_path, "node", {"x": np.ones((5, 3), np.float32)})
    save_columns(tmp_path, "edge", {"w": np.arange(5.0)})
    back = open_dataset(tmp_path, verify=True)
    assert back.x.shape == (5, 3)
    assert back.edge_data["w"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    with pytest.raises(FeatureError, match="5 rows"):
        save_columns(tmp_path, "node", {"x": np.ones((4, 3))})


# ---------------------------------------------------------------- damaged files
def _saved(tmp_path):
    save_dataset(tiny(x=np.arange(15, dtype=np.float32).reshape(5, 3)), tmp_path)
    return read_manifest(tmp_path).tables["node"]["x"].file


def test_truncated_arrow_file_is_named(tmp_path):
    name = _saved(tmp_path)
    path = tmp_path / name
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(DatasetError, match=rf"{name}.*truncated"):
        open_dataset(tmp_path)


def test_tampered_file_fails_checksum_verification(tmp_path):
    name = _saved(tmp_path)
    path = tmp_path / name
    data = bytearray(path.read_bytes())
    marker = np.float32(14).tobytes()
    data[data.rindex(marker)] ^= 1  # same size, one bit flipped in the last value
    path.write_bytes(bytes(data))
    open_dataset(tmp_path)  # sizes and schema still match: only checksums tell
    with pytest.raises(DatasetError, match=rf"{name}.*sha256"):
        open_dataset(tmp_path, verify=True)
    with pytest.raises(DatasetError, match=name):
        verify_dataset(tmp_path)


def test_missing_file_and_bad_manifest(tmp_path):
    name = _saved(tmp_path)
    (tmp_path / name).unlink()
    with pytest.raises(DatasetError, match=rf"{name}.*no such file"):
        open_dataset(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(DatasetError, match=r"manifest\.json.*valid JSON"):
        open_dataset(tmp_path)
    with pytest.raises(DatasetError, match=r"manifest\.json"):
        open_dataset(tmp_path / "nowhere")
    raw = {"format": "strata-dataset", "format_version": 99}
    (tmp_path / "manifest.json").write_text(json.dumps(raw))
    with pytest.raises(DatasetError, match="format_version"):
        open_dataset(tmp_path)


def test_manifest_schema_mismatch_is_named(tmp_path):
    _saved(tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["tables"]["node"]["x"]["shape"] = [5, 4]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DatasetError, match=r"shape \(5, 4\)"):
        open_dataset(tmp_path)


def _assert_intact(directory, files):
    assert data_files(directory) == files
    back = open_dataset(directory, verify=True)
    assert back.x[4].tolist() == [12.0, 13.0, 14.0]


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (
            lambda d: save_dataset(tiny(x=np.full((5, 3), np.nan)), d),
            FeatureError,
            r"finite values, got nan at row 0, column 0",
        ),
        (
            lambda d: save_columns(d, "node", {"x": np.array([1.0, 2, np.inf, 4, 5])}),
            FeatureError,
            "inf at row 2",
        ),
        (
            lambda d: save_dataset(GraphDataset(TINY, meta={"k": object()}), d),
            DatasetError,
            "JSON-serialisable",
        ),
        (
            lambda d: save_columns(d, "node", {"x": np.ones(5, dtype=complex)}),
            DatasetError,
            "complex128",
        ),
        (
            lambda d: save_columns(d, "node", {"x": np.ones(5, dtype=object)}),
            DatasetError,
            "object",
        ),
        (
            lambda d: save_columns(d, "node", {"bad/name": np.ones(5)}),
            DatasetError,
            "column",
        ),
    ],
)
def test_bad_writes_leave_saved_data_intact(tmp_path, change, error, match):
    _saved(tmp_path)
    files = data_files(tmp_path)
    with pytest.raises(error, match=match):
        change(tmp_path)
    _assert_intact(tmp_path, files)


def test_nonfinite_allowed_on_request(tmp_path):
    x = np.array([[1.0, np.nan], [np.inf, 2.0]], dtype=np.float32)
    ds = GraphDataset(CSRGraph.from_edges(np.array([0]), np.array([1])), {"x": x})
    save_dataset(ds, tmp_path, allow_nonfinite=True)
    np.testing.assert_array_equal(open_dataset(tmp_path).x, x)


def test_refuses_to_write_among_foreign_files(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(DatasetError, match=r"notes\.txt"):
        save_dataset(tiny(), tmp_path)
    assert [p.name for p in tmp_path.iterdir() if p.name != ".lock"] == ["notes.txt"]


def test_empty_graph_round_trip(tmp_path):
    empty = CSRGraph.from_edges(np.array([], np.int64), np.array([], np.int64), 0)
    save_dataset(GraphDataset(empty, {"x": np.zeros((0, 4), np.float32)}), tmp_path)
    back = open_dataset(tmp_path, verify=True)
    assert back.graph.num_nodes == 0
    assert back.x.shape == (0, 4)


# ---------------------------------------------------------------- crash safety
def _saver(directory, rows):
    """Child: save versions i = 1, 2, ... forever; every array of version i holds i."""
    i = 1
    while True:
        x = np.full((rows, 16), i, dtype=np.float32)
        ds = GraphDataset(
            ring(rows),
            node_data={"x": x, "y": np.full(rows, i, np.int64)},
            edge_data={"w": np.full(rows, i, np.float64)},
            name="crash",
            meta={"i": i},
        )
        save_dataset(ds, directory)
        save_arrays(
            directory, "part", {"owner": np.full(rows, i, np.int32)}, meta={"i": i}
        )
        i += 1


_RINGS = {}


def ring(rows):
    """A directed ring of `rows` nodes, built once per process."""
    if rows not in _RINGS:
        ids = np.arange(rows)
        _RINGS[rows] = CSRGraph.from_edges(ids, (ids + 1) % rows, rows)
    return _RINGS[rows]


def _kill_saver_after(directory, rows, delay):
    with warnings.catch_warnings():
        # Python >= 3.12 warns that fork() in a threaded process may deadlock; the
        # child only writes files, and a stuck child is killed all the same.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        try:
            _saver(directory, rows)
        finally:
            os._exit(1)
    try:
        time.sleep(delay)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_sigkill_during_save_keeps_previous_version(tmp_path):
    rows = 400_000  # ~26 MB of features per version: a save takes a while
    base = GraphDataset(ring(rows), {"x": np.zeros((rows, 16), np.float32)})
    save_dataset(base, tmp_path)
    torn = 0
    for delay in (0.02, 0.06, 0.1, 0.15, 0.22, 0.3, 0.4):
        _kill_saver_after(tmp_path, rows, delay)
        leftovers = set(data_files(tmp_path)) - read_manifest(tmp_path).files()
        torn += bool(leftovers or list(tmp_path.glob("manifest.json.tmp-*")))
        manifest = verify_dataset(tmp_path)  # every referenced file is whole
        back = open_dataset(tmp_path, verify=True)
        i = manifest.meta.get("i", 0)  # the last version whose manifest landed
        assert back.x[0, 0] == back.x[-1, -1] == i
        if i:
            assert back.y[-1] == i
            assert back.edge_data["w"][-1] == i
    assert torn, "no kill landed in the middle of a save; lengthen the saves"
    # A later save succeeds and sweeps whatever the killed writers left behind.
    save_dataset(tiny(), tmp_path)
    expected = {e.file for e in read_manifest(tmp_path).entries().values()}
    assert set(data_files(tmp_path)) == expected
    assert not list(tmp_path.glob("manifest.json.tmp-*"))


def test_string_node_ids_round_trip(tmp_path):
    ids = np.array(["alice", "bob", "", "dave", "eve"])
    save_dataset(tiny(node_ids=ids), tmp_path)
    back = open_dataset(tmp_path, verify=True)
    assert back.node_data["node_ids"].tolist() == ids.tolist()
