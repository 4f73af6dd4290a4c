"""Results out: predictions, embeddings and a saved model that `strata predict` runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from strata.engine import execute
from strata.engine.job import job_config
from strata.jobs import cora_gcn
from strata.operators.cli.main import main
from strata.operators.errors import OperatorError
from strata.operators.io.results import load_model, save_model
from strata.operators.layers import LayerStack
from strata.operators.trainers import ModelConfig
from tests.operators.test_user_layer import GatedSum


def run_cora(tmp_path: Path, **params: object) -> tuple[dict, Path]:
    out = tmp_path / "out"
    config = job_config(cora_gcn, output_dir=out, epochs=30, patience=0, **params)
    return dict(execute(cora_gcn.build(config)).outputs), out


def test_predictions_reproduce_the_reported_accuracy_and_predict_reruns_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs, out = run_cora(tmp_path)
    predictions = pq.read_table(out / "predictions.parquet")
    assert predictions.column_names == [
        "node_id",
        "split",
        "label",
        "pred",
        "probabilities",
    ]
    rows = predictions.to_pydict()
    assert rows["node_id"] == list(range(2708))
    test = [
        p == y
        for p, y, s in zip(rows["pred"], rows["label"], rows["split"], strict=True)
        if s == "test"
    ]
    assert len(test) == 1000
    assert sum(test) / len(test) == outputs["test_accuracy"]
    probabilities = np.stack(
        predictions.column("probabilities").to_numpy(zero_copy_only=False)
    )
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    assert (probabilities.argmax(axis=1) == np.asarray(rows["pred"])).all()
    embeddings = pq.read_table(out / "embeddings.parquet")
    assert embeddings.column("embedding").type.list_size == 16  # hidden width
    again = tmp_path / "again.parquet"
    argv = ["predict", str(out / "model"), "planetoid:cora", "--out", str(again)]
    assert main(argv) == 0
    assert pq.read_table(again).equals(predictions)


@pytest.mark.multiprocess
def test_a_gang_exports_the_same_files(tmp_path: Path) -> None:
    outputs, out = run_cora(tmp_path, workers=2)
    rows = pq.read_table(out / "predictions.parquet").to_pydict()
    test = [
        p == y
        for p, y, s in zip(rows["pred"], rows["label"], rows["split"], strict=True)
        if s == "test"
    ]
    assert sum(test) / len(test) == outputs["test_accuracy"]


def test_a_users_layer_saves_and_loads_by_its_import_path(tmp_path: Path) -> None:
    config = ModelConfig("gated", hidden=8, layer=GatedSum)
    model = config.build(5, 3)
    save_model(tmp_path, model, config, 5, 3)
    loaded, saved = load_model(tmp_path)
    assert isinstance(loaded, LayerStack)
    assert saved.model.layer is GatedSum
    for name, value in model.state_dict().items():
        assert (loaded.state_dict()[name] == value).all()


def test_bad_model_directories_and_outputs_are_clear_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(OperatorError, match="expected a saved model"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    (tmp_path / "weights.pt").write_bytes(b"")
    with pytest.raises(OperatorError, match=r"config\.json in load_model"):
        load_model(tmp_path)
    argv = [
        "predict",
        str(tmp_path),
        "planetoid:cora",
        "--out",
        str(tmp_path / "p.csv"),
    ]
    assert main(argv) == 2
    assert (
        "--out in strata predict: expected a .parquet file" in capsys.readouterr().err
    )


def test_outputs_name_nodes_by_their_original_ids(tmp_path: Path) -> None:
    from strata.operators.io.datasets import dataset_payload
    from strata.operators.io.results import node_ids
    from strata.storage import load_graph

    edges = tmp_path / "people.csv"
    edges.write_text("src,dst\nalice,bob\nbob,carol\ncarol,alice\n")
    payload = dataset_payload(load_graph(str(edges)))
    ids = node_ids(payload)
    assert sorted(ids.tolist()) == ["alice", "bob", "carol"]
