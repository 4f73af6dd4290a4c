import sys

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import torch

from strata.storage import CSRGraph, GraphDataset, load_planetoid
from strata.storage.generators import rmat
from strata.storage.interop import (
    from_dgl,
    from_networkx,
    from_pyg,
    from_scipy,
    to_dgl,
    to_networkx,
    to_pyg,
    to_scipy,
)

# Imported at collection, where third-party import-time deprecation noise is not an
# error (the interop functions themselves silence it).
pyg_utils = pytest.importorskip("torch_geometric.utils")
pyg_data = pytest.importorskip("torch_geometric.data")


@pytest.fixture(scope="module")
def cora():
    return load_planetoid("cora")


def test_scipy_round_trip_and_degrees():
    g = rmat(8, 4, seed=1)
    mat = to_scipy(g)
    np.testing.assert_array_equal(np.diff(mat.indptr), g.out_degree())
    # scipy sums parallel edges: compare against a multiplicity count.
    src, dst = g.to_coo()
    dense = np.zeros((g.num_nodes, g.num_nodes))
    np.add.at(dense, (src, dst), 1)
    np.testing.assert_array_equal(mat.toarray(), dense)
    back = from_scipy(mat)
    np.testing.assert_array_equal(back.indptr, g.indptr)
    np.testing.assert_array_equal(back.indices, g.indices)
    assert back.edge_weight is None


def test_from_scipy_keeps_weights_and_checks_shape():
    m = sp.coo_matrix(
        (np.array([2.0, 3.0]), (np.array([0, 1]), np.array([1, 0]))), shape=(2, 2)
    )
    g = from_scipy(m)
    assert g.edge_weight.tolist() == [2.0, 3.0]
    with pytest.raises(ValueError, match="square"):
        from_scipy(sp.csr_matrix((2, 3)))


def test_networkx_round_trip(cora):
    G = to_networkx(cora.graph)
    assert G.number_of_nodes() == 2708
    assert G.number_of_edges() == 10556
    assert dict(G.in_degree()) == dict(enumerate(cora.graph.in_degree().tolist()))
    back, nodes = from_networkx(G)
    assert nodes == list(range(2708))
    np.testing.assert_array_equal(back.indices, cora.graph.indices)
    undirected = nx.path_graph(["a", "b", "c"])
    g, labels = from_networkx(undirected)
    assert labels == ["a", "b", "c"]
    assert g.is_symmetric()
    assert g.num_edges == 4
    weighted = nx.DiGraph()
    weighted.add_edge(0, 1, weight=0.5)
    assert from_networkx(weighted)[0].edge_weight.tolist() == [0.5]
    assert to_networkx(from_networkx(weighted)[0])[0][1]["weight"] == 0.5


def test_pyg_round_trip_and_oracle(cora):
    data = to_pyg(cora)
    assert data.edge_index.dtype == torch.int64
    assert data.num_nodes == 2708
    assert torch.equal(data.train_mask, torch.from_numpy(cora.train_mask))
    ref = pyg_utils.to_scipy_sparse_matrix(data.edge_index, num_nodes=2708).tocsr()
    ours = to_scipy(cora.graph)
    assert (ref != ours).nnz == 0
    back = from_pyg(data, name="cora")
    np.testing.assert_array_equal(back.graph.indices, cora.graph.indices)
    for key in ("x", "y", "train_mask", "val_mask", "test_mask"):
        np.testing.assert_array_equal(back.node_data[key], cora.node_data[key])


def test_from_pyg_reorders_edge_attributes():
    # Edges given out of CSR order, with an attribute per edge.
    edge_index = torch.tensor([[2, 0, 1], [0, 1, 2]])
    data = pyg_data.Data(
        edge_index=edge_index,
        edge_attr=torch.tensor([[20.0], [0.0], [10.0]]),
        edge_weight=torch.tensor([2.0, 0.5, 1.0]),
        x=torch.eye(3),
        num_nodes=3,
    )
    ds = from_pyg(data)
    src, dst = ds.graph.to_coo()
    assert list(zip(src.tolist(), dst.tolist(), strict=True)) == [
        (0, 1),
        (1, 2),
        (2, 0),
    ]
    assert ds.edge_data["edge_attr"][:, 0].tolist() == [0.0, 10.0, 20.0]
    assert ds.graph.edge_weight.tolist() == [0.5, 1.0, 2.0]
    assert ds.graph.edge_ids is None
    assert ds.x.shape == (3, 3)


def test_dgl_round_trip(cora):
    pytest.importorskip("dgl")
    g = to_dgl(cora)
    assert g.num_nodes() == 2708
    assert g.num_edges() == 10556
    back = from_dgl(g)
    np.testing.assert_array_equal(back.graph.indices, cora.graph.indices)
    np.testing.assert_array_equal(back.x, cora.x)
    assert (g.in_degrees().numpy() == cora.graph.in_degree()).all()
    import dgl

    h = dgl.graph((torch.tensor([2, 0, 1]), torch.tensor([0, 1, 2])), num_nodes=3)
    h.edata["weight"] = torch.tensor([2.0, 0.5, 1.0])
    h.edata["feat"] = torch.tensor([[20.0], [0.0], [10.0]])
    ds = from_dgl(h)
    assert ds.graph.edge_weight.tolist() == [0.5, 1.0, 2.0]
    assert ds.edge_data["feat"][:, 0].tolist() == [0.0, 10.0, 20.0]


@pytest.mark.parametrize(
    ("function", "module"),
    [
        (to_dgl, "dgl"),
        (from_dgl, "dgl"),
        (to_networkx, "networkx"),
        (to_pyg, "torch_geometric.data"),
    ],
)
def test_missing_library_is_a_clear_import_error(monkeypatch, function, module):
    monkeypatch.setitem(sys.modules, module, None)  # import now raises ImportError
    g = CSRGraph.from_edges(np.array([0]), np.array([1]))
    with pytest.raises(ImportError, match=rf"{function.__name__} needs {module}"):
        function(GraphDataset(g) if function is not to_networkx else g)


def test_pyg_feature_and_graph_store_adapters(cora, tmp_path):
    from strata.storage import ArrowFeatureStore, Key, save_dataset
    from strata.storage.interop import to_pyg_stores

    save_dataset(cora, tmp_path)
    fs, gs = to_pyg_stores(ArrowFeatureStore(tmp_path), cora.graph)
    ids = torch.tensor([5, 0, 2707])
    got = fs.get_tensor(group_name=None, attr_name="x", index=ids)
    np.testing.assert_array_equal(got.numpy(), cora.x[[5, 0, 2707]])
    assert fs.get_tensor_size(group_name=None, attr_name="x") == (2708, 1433)
    assert (
        fs.get_tensor(group_name=None, attr_name="y", index=slice(0, 3)).tolist()
        == cora.y[:3].tolist()
    )
    names = {(a.group_name, a.attr_name) for a in fs.get_all_tensor_attrs()}
    assert ("node", "train_mask") in names
    fs.put_tensor(torch.zeros(2708, 2), group_name="node", attr_name="z", index=None)
    assert ArrowFeatureStore(tmp_path).schema()[Key("node", "z")].shape == (2708, 2)

    ref = pyg_utils.to_scipy_sparse_matrix(
        to_pyg(cora).edge_index, num_nodes=2708
    ).tocsr()
    rowptr, col = gs.get_edge_index(edge_type=None, layout="csr")
    np.testing.assert_array_equal(rowptr.numpy(), ref.indptr)
    np.testing.assert_array_equal(col.numpy(), ref.indices)
    colptr, row = gs.get_edge_index(edge_type=None, layout="csc")
    csc = ref.tocsc()
    np.testing.assert_array_equal(colptr.numpy(), csc.indptr)
    csc.sort_indices()
    np.testing.assert_array_equal(row.numpy(), csc.indices)
    _, dst = gs.get_edge_index(edge_type=None, layout="coo", is_sorted=True)
    assert bool((dst[1:] >= dst[:-1]).all())
    assert len(gs.get_all_edge_attrs()) == 3
