import shutil

import numpy as np
import pytest

from strata.storage import FormatError, GraphDataset, save_dataset
from strata.storage.generators import rmat
from strata.storage.loaders.planetoid import shipped_planetoid_dir
from strata.storage.spec import GraphSpec, load_graph, parse_spec


def test_parse_generators():
    assert parse_spec("rmat:scale=16,edge_factor=16,seed=0") == GraphSpec(
        "rmat", {"scale": 16, "edge_factor": 16, "seed": 0}
    )
    assert parse_spec("sbm: n=10, blocks=2, intra=0.9, permute=false").params == {
        "n": 10,
        "blocks": 2,
        "intra": 0.9,
        "permute": False,
    }
    assert parse_spec("planetoid:Cora") == GraphSpec("planetoid", {"name": "cora"})


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("rmat:edge_factor=4", r"missing \['scale'\]"),
        ("rmat:scale=4,colour=red", "key=value pairs"),
        ("rmat:scale=4,colour=1", r"unknown \['colour'\]"),
        ("rmat:scale", "key=value"),
        ("planetoid:reddit", "one of"),
        ("rmat:scale=4.5", "an integer"),
    ],
)
def test_bad_specs(spec, match):
    with pytest.raises(FormatError, match=match):
        load_graph(spec)


def test_rmat_spec_matches_the_generator():
    ds = load_graph("rmat:scale=9,edge_factor=4,seed=3")
    ref = rmat(9, 4, seed=3)
    np.testing.assert_array_equal(ds.graph.indices, ref.indices)
    assert ds.meta["source"] == "rmat:scale=9,edge_factor=4,seed=3"
    assert load_graph("rmat:scale=5,features=3").x.shape == (32, 3)


def test_sbm_and_rgg_specs():
    ds = load_graph("sbm:n=400,blocks=4,degree=6,features=0")
    assert ds.x is None
    assert ds.num_classes == 4
    assert int(ds.train_mask.sum()) == 80
    rgg = load_graph("rgg:n=300,radius=0.1,seed=2")
    assert rgg.node_data["pos"].shape == (300, 2)
    assert rgg.graph.is_symmetric()


def test_paths_and_planetoid(tmp_path):
    save_dataset(GraphDataset(rmat(5, 2), name="small"), tmp_path / "ds")
    assert load_graph(str(tmp_path / "ds")).name == "small"
    assert load_graph(str(tmp_path / "ds" / "manifest.json")).name == "small"
    (tmp_path / "e.csv").write_text("src,dst\n0,1\n")
    assert load_graph(str(tmp_path / "e.csv")).graph.num_edges == 1
    with pytest.raises(FormatError, match="no such file"):
        load_graph(str(tmp_path / "missing.csv"))
    cora = load_graph(
        "planetoid:cora", data_dir=tmp_path
    )  # falls back to the shipped copy
    assert cora.graph.num_nodes == 2708
    raw = tmp_path / "Cora" / "raw"
    raw.mkdir(parents=True)
    for f in shipped_planetoid_dir().glob("ind.cora.*"):
        shutil.copy(f, raw / f.name)
    assert load_graph("planetoid:cora", data_dir=tmp_path).graph.num_edges == 10556
    with pytest.raises(FormatError, match="citeseer"):
        load_graph("planetoid:citeseer", data_dir=tmp_path)
