"""Item sizes: the per-type fast path agrees with the libraries' own byte counts."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import torch

from strata.engine.sizing import ARROW_EXACT_ABOVE, SMALL, nbytes


def _batch(rows: int) -> pa.RecordBatch:
    rng = np.random.default_rng(0)
    return pa.record_batch(
        {
            "src": rng.integers(0, 100, rows),
            "dst": rng.integers(0, 100, rows),
            "weight": rng.random(rows, dtype=np.float32),
            "name": [f"n{i}" for i in range(rows)],
        }
    )


@pytest.mark.parametrize("rows", [0, 1, 64])
def test_small_arrow_items_are_charged_their_buffers(rows: int) -> None:
    batch = _batch(rows)
    table = pa.Table.from_batches([batch, batch])  # the same buffers twice
    for item in (batch, table, batch.column(3), table.column(0)):
        assert nbytes(item) == item.get_total_buffer_size()  # the generic path
        assert nbytes(item) == item.get_total_buffer_size()  # the cached sizer
    numeric = batch.select(["src", "dst", "weight"])
    assert nbytes(numeric) == numeric.nbytes == rows * 20


def test_big_arrow_items_match_arrow_nbytes() -> None:
    batch = _batch(10_000)
    table = pa.Table.from_batches([batch, batch])
    for item in (batch, table, batch.column(3), table.column(0)):
        assert item.get_total_buffer_size() > ARROW_EXACT_ABOVE
        assert nbytes(item) == item.nbytes


def test_small_slices_are_charged_what_they_keep_alive() -> None:
    batch = _batch(64)
    piece = batch.slice(10, 5)
    assert piece.get_total_buffer_size() <= ARROW_EXACT_ABOVE
    assert nbytes(piece) == piece.get_total_buffer_size() >= piece.nbytes


def test_slices_of_big_items_are_sized_exactly() -> None:
    table = pa.table({"x": np.arange(1_000_000)})
    for item in (table.slice(0, 10), table.to_batches()[0].slice(5, 100)):
        assert nbytes(item) == item.nbytes < 1000


def test_arrays_tensors_and_containers() -> None:
    array = np.zeros((64, 3), dtype=np.float32)
    assert nbytes(array) == array.nbytes
    assert nbytes(array[:, 0]) == 64 * 4  # a strided view: its own elements
    assert nbytes(np.float64(1.5)) == 8
    tensor = torch.zeros(64, 3, dtype=torch.float64)
    assert nbytes(tensor) == 64 * 3 * 8
    assert nbytes(torch.nn.Parameter(tensor)) == 64 * 3 * 8
    assert nbytes(b"abc") == 3
    assert nbytes(bytearray(b"abcd")) == 4
    assert nbytes("abc") == SMALL + 3
    assert nbytes({"x": array, "n": 3}) == SMALL + array.nbytes + SMALL
    assert nbytes([array, array]) == SMALL + 2 * array.nbytes
    assert nbytes((1, 2.0, None)) == SMALL + 3 * SMALL


def test_subclasses_take_their_own_path() -> None:
    class Marked(np.ndarray):
        pass

    class Words(dict[str, object]):
        pass

    marked = np.zeros(10, dtype=np.int64).view(Marked)
    assert nbytes(marked) == 80
    assert nbytes(Words(a=np.zeros(4, dtype=np.int8))) == SMALL + 4
    assert nbytes(object()) == SMALL
