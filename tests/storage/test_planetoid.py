import pickle
import shutil
from collections import defaultdict

import numpy as np
import pytest
import scipy.sparse as sp

from strata.storage import FormatError
from strata.storage.loaders import load_planetoid
from strata.storage.loaders.planetoid import shipped_planetoid_dir

torch_geometric = pytest.importorskip("torch_geometric")


def _pyg(root, name):
    from torch_geometric.datasets import Planetoid

    return Planetoid(str(root), name)[0]


def _edge_set(src, dst):
    order = np.lexsort((dst, src))
    return np.stack([src[order], dst[order]])


def _assert_same_as_pyg(ds, data):
    np.testing.assert_array_equal(ds.x, data.x.numpy())
    np.testing.assert_array_equal(ds.y, data.y.numpy())
    for mask in ("train_mask", "val_mask", "test_mask"):
        np.testing.assert_array_equal(ds.node_data[mask], getattr(data, mask).numpy())
    src, dst = ds.graph.to_coo()
    ei = data.edge_index.numpy()
    np.testing.assert_array_equal(_edge_set(src, dst), _edge_set(ei[0], ei[1]))
    assert ds.graph.num_nodes == data.num_nodes


def test_cora_figures():
    ds = load_planetoid("cora")
    assert ds.graph.num_nodes == 2708
    assert ds.graph.num_edges == 10556
    assert ds.x.shape == (2708, 1433)
    assert ds.x.dtype == np.float32
    assert ds.y.dtype == np.int64
    assert ds.num_classes == 7
    assert [int(m.sum()) for m in (ds.train_mask, ds.val_mask, ds.test_mask)] == [
        140,
        500,
        1000,
    ]
    assert np.bincount(ds.y[ds.train_mask]).tolist() == [20] * 7
    assert ds.graph.is_symmetric()


def test_cora_equals_pyg_on_the_same_raw_files(tmp_path):
    raw = tmp_path / "Cora" / "raw"
    raw.mkdir(parents=True)
    for f in shipped_planetoid_dir().glob("ind.cora.*"):
        shutil.copy(f, raw / f.name)
    data = _pyg(tmp_path, "Cora")
    _assert_same_as_pyg(load_planetoid("cora", tmp_path), data)


def _write_fake_citeseer(raw, n_train=12, n_allx=530, num_feat=9, num_cls=3, seed=0):
    """Planetoid-format files with gaps in the test index, as CiteSeer has."""
    rng = np.random.default_rng(seed)
    test_ids = 500 + np.array([30, 31, 33, 34, 35, 38, 39, 40, 42, 44])  # gaps
    rng.shuffle(test_ids)
    n_test = test_ids.shape[0]
    num_nodes = int(test_ids.max()) + 1

    def onehot(k):
        out = np.zeros((k, num_cls))
        out[np.arange(k), rng.integers(0, num_cls, k)] = 1
        return out

    def feats(k):
        dense = (rng.random((k, num_feat)) < 0.3).astype(np.float32)
        return sp.csr_matrix(dense)

    allx, ally = feats(n_allx), onehot(n_allx)
    parts = {
        "x": allx[:n_train],
        "y": ally[:n_train],
        "allx": allx,
        "ally": ally,
        "tx": feats(n_test),
        "ty": onehot(n_test),
    }
    graph = defaultdict(list)
    for _ in range(2000):
        u, v = (int(a) for a in rng.integers(0, num_nodes, 2))
        graph[u].append(v)
        graph[v].append(u)
    graph[3].append(3)  # a self loop, dropped as PyG does
    parts["graph"] = graph
    raw.mkdir(parents=True)
    for name, obj in parts.items():
        with open(raw / f"ind.citeseer.{name}", "wb") as f:
            pickle.dump(obj, f, protocol=2)
    (raw / "ind.citeseer.test.index").write_text(
        "\n".join(str(i) for i in test_ids) + "\n"
    )
    return num_nodes


def test_gappy_test_index_is_padded_like_pyg(tmp_path):
    num_nodes = _write_fake_citeseer(tmp_path / "CiteSeer" / "raw")
    ds = load_planetoid("citeseer", tmp_path)
    assert ds.graph.num_nodes == num_nodes
    # The gap rows are zero and in no mask.
    gaps = [532, 536, 537, 541, 543]
    assert not ds.x[gaps].any()
    assert not ds.test_mask[gaps].any()
    _assert_same_as_pyg(ds, _pyg(tmp_path, "CiteSeer"))


def test_restricted_unpickler_rejects_other_globals(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for f in shipped_planetoid_dir().glob("ind.cora.*"):
        shutil.copy(f, raw / f.name)
    (raw / "ind.cora.x").chmod(0o644)

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    (raw / "ind.cora.x").write_bytes(pickle.dumps(Evil(), protocol=2))
    with pytest.raises(
        FormatError, match=r"ind\.cora\.x: .*got (__builtin__|builtins)\.print"
    ):
        load_planetoid("cora", raw)


def test_missing_files_and_unknown_name(tmp_path):
    with pytest.raises(FormatError, match=r"ind\.citeseer"):
        load_planetoid("citeseer", tmp_path)
    with pytest.raises(FormatError, match="one of"):
        load_planetoid("reddit")
