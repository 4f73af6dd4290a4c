"""Bad input to the trainers fails early, with the house error template."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from strata.engine import Pipeline, StepError, execute
from strata.operators.errors import OperatorError
from strata.operators.io.datasets import (
    community_dataset,
    dataset_from_payload,
    dataset_payload,
)
from strata.operators.trainers import (
    FullGraphTrainer,
    ModelConfig,
    SampledTrainer,
    SamplingConfig,
    TrainConfig,
    TrainingData,
)
from strata.storage import DatasetError, InMemoryFeatureStore, Key

CONFIG = TrainConfig(ModelConfig("gcn", hidden=4), epochs=1, device="cpu")


@pytest.fixture
def payload() -> dict:
    return community_dataset(60, 3, avg_degree=4, num_features=4, seed=0)


def with_node(payload: dict, **arrays) -> dict:
    return {**payload, "node": {**payload["node"], **arrays}}


def test_features_of_another_graph(payload) -> None:
    data = TrainingData.from_dataset(
        dataset_from_payload(payload),
        InMemoryFeatureStore({Key("node", "x"): np.zeros((59, 4), np.float32)}),
    )
    with pytest.raises(
        OperatorError,
        match=r"x in FullGraphTrainer: expected 60 feature rows \(one per node of the "
        r"graph\), got 59 rows\. Hint:",
    ):
        FullGraphTrainer(CONFIG).fit(data)


def test_payload_arrays_of_the_wrong_size(payload) -> None:
    bad = with_node(payload, x=np.zeros((59, 4), np.float32))
    with pytest.raises(DatasetError, match=r"expected 60 rows \(one per node\)"):
        FullGraphTrainer(CONFIG).fit(bad)


@pytest.mark.parametrize("label", [3, 7, -1])
def test_labels_out_of_range(payload, label) -> None:
    y = payload["node"]["y"].copy()
    node = int(np.flatnonzero(payload["node"]["train_mask"])[0])
    y[node] = label
    with pytest.raises(
        OperatorError,
        match=rf"y in FullGraphTrainer: expected labels in \[0, 3\) on every node of "
        rf"a split mask, got label {label} at node {node}\.",
    ):
        FullGraphTrainer(CONFIG).fit(with_node(payload, y=y))


def test_labels_outside_the_masks_are_not_read(payload) -> None:
    y = payload["node"]["y"].copy()
    node = payload["node"]
    unlabelled = ~(node["train_mask"] | node["val_mask"] | node["test_mask"])
    y[unlabelled] = -1
    FullGraphTrainer(CONFIG).fit(with_node(payload, y=y))


def test_an_empty_training_mask(payload) -> None:
    empty = with_node(payload, train_mask=np.zeros(60, dtype=bool))
    with pytest.raises(
        OperatorError,
        match=r"train_mask in FullGraphTrainer: expected at least one training node, "
        r"got an empty mask\.",
    ):
        FullGraphTrainer(CONFIG).fit(empty)


def test_a_missing_mask(payload) -> None:
    node = dict(payload["node"])
    del node["val_mask"]
    data = TrainingData.from_dataset(dataset_from_payload({**payload, "node": node}))
    data.masks.pop("val")
    with pytest.raises(OperatorError, match="val_mask in FullGraphTrainer"):
        FullGraphTrainer(CONFIG).fit(data)


@pytest.mark.parametrize(
    ("fanouts", "got"), [((10,), r"1: \[10\]"), ((10, 5, 5), r"3: \[10, 5, 5\]")]
)
def test_fanouts_must_match_the_model_layers(payload, fanouts, got) -> None:
    trainer = SampledTrainer(CONFIG, SamplingConfig(fanouts=fanouts))
    with pytest.raises(
        OperatorError,
        match=rf"fanouts in SampledTrainer: expected 2 fan-outs \(one per model "
        rf"layer\), got {got}\. Hint:",
    ):
        trainer.fit(payload)


def test_bad_sampling_settings() -> None:
    with pytest.raises(OperatorError, match="fanouts in SamplerConfig"):
        SamplingConfig(fanouts=(0, 5))
    with pytest.raises(OperatorError, match="batch_size in SamplingConfig"):
        SamplingConfig(batch_size=0)
    with pytest.raises(OperatorError, match="eval_mode in SamplingConfig"):
        SamplingConfig(eval_mode="exact")


def test_the_wrong_kind_of_input() -> None:
    with pytest.raises(OperatorError, match="input in FullGraphTrainer: expected"):
        FullGraphTrainer(CONFIG).fit(torch.zeros(3))


def test_in_a_pipeline_the_step_error_names_the_step(payload) -> None:
    p = Pipeline("bad")
    empty = with_node(payload, train_mask=np.zeros(60, dtype=bool))
    p.step("load", dataset_payload_of, payload=empty)
    p.step("train", FullGraphTrainer(CONFIG), "load")
    result = execute(p, check=False)
    assert isinstance(result.error, StepError)
    assert "train" in str(result.error)
    cause = result.error.__cause__
    assert isinstance(cause, OperatorError)
    assert "train_mask in FullGraphTrainer (step 'train')" in str(cause)


def dataset_payload_of(payload: dict) -> dict:
    return payload


def test_dataset_payload_round_trip(payload) -> None:
    again = dataset_payload(dataset_from_payload(payload))
    assert again["meta"]["num_classes"] == 3
    np.testing.assert_array_equal(again["node"]["x"], payload["node"]["x"])
