import numpy as np
import pyarrow as pa
import pytest

from strata.storage.updates import (
    UpdateError,
    UpdateKind,
    UpdateLimits,
    decode_updates,
    edge_updates,
    feature_updates,
    make_updates,
    update_schema,
    validate_updates,
)

K = UpdateKind


def mixed(dim=3):
    kind = np.array([K.ADD_EDGE, K.REMOVE_EDGE, K.ADD_NODE, K.SET_FEATURE], np.int8)
    return make_updates(
        kind,
        src=np.array([0, 1, 9, 9]),
        dst=np.array([1, 2, 9, 9]),
        node=np.array([9, 9, 5, 2]),
        feature=np.arange(4 * dim, dtype=np.float32).reshape(4, dim),
        event_time=np.array([10, 11, 12, 13]),
    )


def test_make_and_decode_round_trip():
    batch = validate_updates(mixed(), UpdateLimits(feature_dim=3, max_nodes=10))
    assert batch.schema.equals(update_schema(3))
    assert batch.column("src").to_pylist() == [0, 1, None, None]
    assert batch.column("node").to_pylist() == [None, None, 5, 2]
    assert batch.column("feature").to_pylist()[:3] == [None, None, None]
    arrays = decode_updates(batch)
    assert arrays.kind.tolist() == [0, 1, 2, 3]
    assert arrays.src.tolist() == [0, 1, -1, -1]
    assert arrays.node.tolist() == [-1, -1, 5, 2]
    assert arrays.feature[3].tolist() == [9.0, 10.0, 11.0]
    assert arrays.event_time.tolist() == [10, 11, 12, 13]
    sliced = decode_updates(batch.slice(2))
    assert sliced.feature[1].tolist() == [9.0, 10.0, 11.0]


def test_topology_only_batches_have_no_feature_column():
    batch = validate_updates(edge_updates([0, 1], [1, 0], event_time=0))
    assert "feature" not in batch.schema.names
    assert decode_updates(batch).feature.shape == (2, 0)
    with pytest.raises(UpdateError, match="width 3"):
        validate_updates(batch, UpdateLimits(feature_dim=3))
    assert feature_updates([1], np.ones((1, 2))).schema.equals(update_schema(2))


def test_table_input_and_schema_order_are_normalised():
    batch = mixed()
    shuffled = pa.Table.from_batches([batch]).select(
        ["event_time", "feature", "node", "dst", "src", "kind"]
    )
    assert validate_updates(shuffled).schema.names == update_schema(3).names


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda b: b.drop_columns(["dst"]), "columns"),
        (lambda b: b.set_column(1, "src", b.column("src").cast(pa.int32())), "int64"),
        (
            lambda b: b.set_column(0, "kind", pa.array([0, 1, 7, 3], pa.int8())),
            "7 at row 2",
        ),
        (
            lambda b: b.set_column(0, "kind", pa.array([0, None, 2, 3], pa.int8())),
            "null at row 1",
        ),
        (
            lambda b: b.set_column(1, "src", pa.array([0, None, None, None])),
            r"null at row 1 \(remove_edge\)",
        ),
        (
            lambda b: b.set_column(3, "node", pa.array([4, None, 5, 2])),
            r"a value at row 0 \(add_edge\)",
        ),
        (
            lambda b: b.set_column(2, "dst", pa.array([1, -2, None, None])),
            r"-2 at row 1 \(remove_edge\)",
        ),
        (
            lambda b: b.set_column(3, "node", pa.array([None, None, 50, 60])),
            r"50 at row 2 \(add_node; 2 bad rows in all\)",
        ),
    ],
)
def test_validator_names_the_bad_row(mutate, match):
    with pytest.raises(UpdateError, match=match):
        validate_updates(mutate(mixed()), UpdateLimits(max_nodes=10))


def test_set_feature_needs_finite_feature_of_the_right_width():
    feats = np.ones((1, 2), np.float32)
    feats[0, 1] = np.nan
    with pytest.raises(UpdateError, match=r"NaN or inf at row 0 \(set_feature\)"):
        validate_updates(feature_updates([0], feats))
    with pytest.raises(UpdateError, match="width 4"):
        validate_updates(feature_updates([0], np.ones((1, 2))), UpdateLimits(4))
    bad = pa.record_batch(
        [pa.array([3], pa.int8()), pa.nulls(1, pa.int64()), pa.nulls(1, pa.int64()),
         pa.array([0]), pa.nulls(1, pa.list_(pa.float32(), 2)), pa.array([0])],
        schema=update_schema(2),
    )  # fmt: skip
    with pytest.raises(UpdateError, match=r"feature.*null at row 0 \(set_feature\)"):
        validate_updates(bad)


def test_size_limits():
    batch = edge_updates(np.arange(100), np.arange(100), event_time=0)
    with pytest.raises(UpdateError, match="at most 10 rows"):
        validate_updates(batch, UpdateLimits(max_rows=10))
    with pytest.raises(UpdateError, match="at most 100 bytes"):
        validate_updates(batch, UpdateLimits(max_bytes=100))


def test_builder_errors():
    with pytest.raises(UpdateError, match="src"):
        make_updates(np.array([K.ADD_EDGE]), dst=np.array([1]))
    with pytest.raises(UpdateError, match="set_feature"):
        make_updates(np.array([K.SET_FEATURE]), node=np.array([1]))
    with pytest.raises(UpdateError, match="integer"):
        edge_updates(np.array([0.5]), np.array([1]))
    assert UpdateKind.parse(" Remove_Edge ") is K.REMOVE_EDGE
    with pytest.raises(UpdateError, match="add_edge"):
        UpdateKind.parse("delete")
