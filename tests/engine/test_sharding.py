"""Keys route rows and items the same way, stably, on every executor."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata.engine.sharding import ShardKeyError, shard_of, split


# No deadline: on a loaded machine the first example (Arrow's kernels warming up)
# can take longer than hypothesis's 200 ms, and timing is not what this checks.
@settings(deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1), st.integers(2, 9))
def test_column_split_agrees_with_python_keys(keys: list[int], shards: int) -> None:
    batch = pa.record_batch({"k": pa.array(keys, pa.int64()), "row": range(len(keys))})
    seen = []
    for shard, piece in split(batch, "k", shards):
        assert all(shard_of(k, shards) == shard for k in piece.column("k").to_pylist())
        seen.extend(piece.column("row").to_pylist())
    assert sorted(seen) == list(range(len(keys)))


def test_string_columns_and_keys_agree() -> None:
    names = ["ada", "bob", "cy", "dee", "eve"]
    batch = pa.record_batch({"name": names})
    for shard, piece in split(batch, "name", 3):
        assert all(shard_of(n, 3) == shard for n in piece.column("name").to_pylist())


def test_hash_is_pinned() -> None:
    # Checkpoints (issue 7) key state by shard: the hash must never change silently.
    assert [shard_of(k, 7) for k in (0, 1, 12345, -1, "node", b"x")] == [
        0,
        0,
        1,
        5,
        5,
        5,
    ]
    assert np.bincount([shard_of(k, 4) for k in range(4000)]).min() > 900


def test_bad_keys_are_refused() -> None:
    batch = pa.record_batch({"x": [1.0, 2.0]})
    with pytest.raises(ShardKeyError, match="key column 'k'"):
        split(batch, "k", 2)
    with pytest.raises(ShardKeyError, match="integers, strings or bytes"):
        split(batch, "x", 2)
    with pytest.raises(ShardKeyError, match="an int, str, bytes or tuple"):
        shard_of(1.5, 2)
