"""Frames round-trip every supported type; anything else is refused, not pickled."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from strata.engine.errors import WireError
from strata.engine.wire import pack, unpack


def roundtrip(value: Any) -> Any:
    # bytes() copies each frame, as a receiver with copy=True would see it.
    frames = [bytes(memoryview(f).cast("B")) for f in pack({"k": "d"}, value)]
    header, decoded = unpack(frames)
    assert header == {"k": "d"}
    return decoded


json_scalars = (
    st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=False)
)
arrays = hnp.arrays(
    hnp.scalar_dtypes(), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0)
)


@given(arrays)
def test_ndarrays(array: np.ndarray) -> None:
    decoded = roundtrip(array)
    assert decoded.dtype == array.dtype
    assert decoded.shape == array.shape
    np.testing.assert_array_equal(decoded, array)


values = st.recursive(
    json_scalars | arrays,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.tobytes() == b.tobytes()  # exact, NaN and NaT included
        )
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and a.keys() == b.keys()
            and all(same(a[k], b[k]) for k in a)
        )
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return type(a) is type(b) and a == b


@given(values)
def test_nested_values(value: Any) -> None:
    assert same(roundtrip(value), value)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.uint8]
)
def test_tensors(dtype: torch.dtype) -> None:
    tensor = torch.arange(12).reshape(3, 4).to(dtype)
    decoded = roundtrip(tensor)
    assert decoded.dtype == dtype
    assert torch.equal(decoded, tensor)
    assert roundtrip(tensor[:, 1]).tolist() == tensor[:, 1].tolist()  # non-contiguous
    assert roundtrip(torch.zeros(0, 3, dtype=dtype)).shape == (0, 3)


def test_arrow_batches_tables_and_slices() -> None:
    batch = pa.record_batch({"src": np.arange(10), "name": [str(i) for i in range(10)]})
    assert roundtrip(batch).equals(batch)
    assert roundtrip(batch.slice(3, 4)).equals(batch.slice(3, 4))
    table = pa.Table.from_batches([batch, batch])
    assert roundtrip(table).equals(table)


def test_numpy_scalars_keep_their_type() -> None:
    decoded = roundtrip({"n": np.int32(3), "x": np.float64(0.5)})
    assert type(decoded["n"]) is np.int32
    assert type(decoded["x"]) is np.float64


@pytest.mark.parametrize(
    "value",
    [object(), {1: "int key"}, np.array([object()]), {1, 2}, [lambda: 0]],
    ids=["object", "int-key", "object-array", "set", "nested-lambda"],
)
def test_unsupported_values_are_refused(value: Any) -> None:
    with pytest.raises(WireError):
        pack({"k": "d"}, value)
