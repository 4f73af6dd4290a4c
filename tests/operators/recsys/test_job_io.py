"""The job's wire payloads round-trip through the process executor's frames, and
the top-K Parquet keeps the table's original ids."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from strata.engine.wire import pack, unpack
from strata.operators.errors import OperatorError
from strata.operators.recsys.features import build_features
from strata.operators.recsys.job_payloads import (
    features_from_payload,
    features_payload,
    graph_from_payload,
    graph_payload,
    split_from_payload,
    split_payload,
)
from strata.operators.recsys.split import temporal_split
from strata.operators.recsys.synth import SynthConfig, synth_interactions
from strata.operators.recsys.topk_io import TOPK_COLUMNS, write_topk
from strata.storage.hetero import Relation, TypedGraph

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def wired(payload: object) -> object:
    return unpack(pack({}, payload))[1]


def test_split_and_features_survive_the_wire() -> None:
    config = SynthConfig(num_users=60, num_items=40, communities=4, max_per_user=20)
    split = temporal_split(synth_interactions(config, seed=1))
    back = split_from_payload(wired(split_payload(split)))  # type: ignore[arg-type]
    assert back.report == split.report
    for name in ("train", "val", "test", "eval_users", "val_users"):
        assert np.array_equal(getattr(back, name), getattr(split, name))
    for name in ("user", "item", "timestamp", "item_domain", "user_features"):
        assert np.array_equal(getattr(back.inter, name), getattr(split.inter, name))
    assert back.inter.user_ids.equals(split.inter.user_ids)
    assert back.inter.domains == split.inter.domains
    features = build_features(split)
    again = features_from_payload(wired(features_payload(features)))  # type: ignore[arg-type]
    assert np.array_equal(again.user, features.user)
    assert np.array_equal(again.item_popularity, features.item_popularity)


def test_a_typed_graph_survives_the_wire() -> None:
    clicked = Relation("user", "clicked", "item")
    co = Relation("item", "co", "item")
    graph = TypedGraph.from_edges(
        {
            clicked: (np.array([0, 1, 1]), np.array([2, 0, 2])),
            co: (np.array([0, 2]), np.array([2, 0]), np.array([0.5, 0.25])),
        },
        num_nodes={"user": 2, "item": 3},
    ).with_reverse(clicked, "clicked_by")
    back = graph_from_payload(wired(graph_payload(graph)))  # type: ignore[arg-type]
    assert dict(back.num_nodes) == dict(graph.num_nodes)
    assert list(back.relations) == list(graph.relations)
    for rel, csr in graph.relations.items():
        other = back.csr(rel)
        assert np.array_equal(other.indptr, csr.indptr)
        assert np.array_equal(other.indices, csr.indices)
        assert (other.weights is None) == (csr.weights is None)
    assert np.array_equal(back.csr(co).weights, graph.csr(co).weights)  # type: ignore[arg-type]


def test_topk_rows_use_the_original_string_ids(tmp_path: Path) -> None:
    path = tmp_path / "out" / "topk.parquet"
    rows = write_topk(
        path,
        users=np.array([2, 0]),
        top_items=np.array([[1, 0], [0, -1]]),  # user 0 has one rankable item
        top_scores=np.array([[0.9, 0.1], [0.7, -np.inf]], dtype=np.float32),
        user_ids=pa.array(["u-a", "u-b", "u-c"]),
        item_ids=pa.array(["i-x", "i-y"]),
    )
    table = pq.read_table(path)
    assert rows == 3
    assert tuple(table.column_names) == TOPK_COLUMNS
    assert table.to_pydict() == {
        "user_id": ["u-c", "u-c", "u-a"],
        "rank": [1, 2, 1],
        "item_id": ["i-y", "i-x", "i-x"],
        "score": pytest.approx([0.9, 0.1, 0.7]),
    }
    assert [p.name for p in path.parent.iterdir()] == ["topk.parquet"]  # no temp


def test_topk_shapes_must_agree(tmp_path: Path) -> None:
    with pytest.raises(OperatorError, match="top_scores"):
        write_topk(
            tmp_path / "t.parquet",
            users=np.array([0]),
            top_items=np.array([[0, 1]]),
            top_scores=np.array([[0.5]]),
            user_ids=pa.array([7]),
            item_ids=pa.array([1, 2]),
        )


def test_arrays_from_the_wire_are_writable() -> None:
    features = build_features(
        temporal_split(
            synth_interactions(
                SynthConfig(num_users=30, num_items=20, communities=2, max_per_user=5),
                seed=0,
            )
        )
    )
    payload = features_payload(features)
    for value in payload.values():
        value.flags.writeable = False  # as frames received over a socket are
    assert features_from_payload(payload).user.flags.writeable
