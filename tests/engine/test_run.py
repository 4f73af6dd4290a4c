"""List in, list out: pipeline behaviour, the same on every executor."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import torch
from engine_steps import (
    Evens,
    ShardInfo,
    SumByKey,
    Which,
    add,
    batch_list,
    constant,
    identity,
    is_even,
    key_batches,
    square,
    total,
)

from strata.engine import Filter, Map, Pipeline, PlanError, execute
from strata.engine.testing import ListSink, ListSource, run


def test_map_filter_chain(executor: str) -> None:
    p = Pipeline("chain")
    p.step("numbers", ListSource(range(10)))
    p.step("square", Map(square), "numbers")
    p.step("even", Filter(is_even), "square")
    p.step("out", ListSink(), "even")
    assert run(p, executor) == {"out": [0, 4, 16, 36, 64]}


def test_recorded_outputs(executor: str) -> None:
    p = Pipeline("outputs")
    p.step("numbers", ListSource(range(100)))
    p.step("total", total, "numbers")
    p.record("total")
    assert execute(p, executor).outputs == {"total": 4950, "count": 100}


def test_batch_steps_take_values_and_params(executor: str) -> None:
    p = Pipeline("batch")
    p.step("a", constant, value=3)
    p.step("b", constant)
    p.step("sum", add, "a", "b")
    p.step("out", ListSink(), "sum")
    assert run(p, executor) == {"out": [10]}


def test_streaming_into_batch_is_a_list_in_shard_order(executor: str) -> None:
    p = Pipeline("to-batch")
    p.step("numbers", ListSource(range(20)))
    p.step("keyed", Map(identity), "numbers", shards=3, key=int)
    p.step("all", batch_list, "keyed")
    p.step("out", ListSink(), "all")
    (items,) = run(p, executor)["out"]
    assert sorted(items) == list(range(20))
    assert items == run(p, "local")["out"][0]  # grouped by shard: deterministic


def test_ports_route_emitted_items(executor: str) -> None:
    p = Pipeline("ports")
    p.step("numbers", ListSource(range(7)))
    p.step("split", Evens(), "numbers")
    p.step("evens", ListSink(), "split.even")
    p.step("odds", ListSink(), "split.odd")
    assert run(p, executor) == {"evens": [0, 2, 4, 6], "odds": [1, 3, 5]}


def test_batch_function_ports(executor: str) -> None:
    p = Pipeline("batch-ports")
    p.step("numbers", ListSource(range(6)))
    p.step("split", _halves, "numbers", ports=("low", "high"))
    p.step("low", ListSink(), "split.low")
    p.step("high", ListSink(), "split.high")
    assert run(p, executor) == {"low": [[0, 1, 2]], "high": [[3, 4, 5]]}


def _halves(items: list[int]) -> dict[str, list[int]]:
    return {"low": items[:3], "high": items[3:]}


def test_multi_input_items_are_tagged(executor: str) -> None:
    p = Pipeline("tagged")
    p.step("left", ListSource(["a", "b"]))
    p.step("right", ListSource([1]))
    p.step("which", Which(), "left", "right")
    p.step("out", ListSink(), "which")
    assert sorted(run(p, executor)["out"]) == [(0, "a"), (0, "b"), (1, 1)]


def test_keyed_shards_see_their_keys_and_stable_seeds(executor: str) -> None:
    p = Pipeline("shards")
    p.step("numbers", ListSource(range(40)))
    p.step("info", ShardInfo(), "numbers", shards=4, key=int)
    p.step("out", ListSink(), "info")
    result = execute(p, executor, collect=("out",))
    rows = sorted(result.collected["out"])
    assert [row[0] for row in rows] == list(range(40))
    assert {row[2] for row in rows} == {4}
    by_shard = {row[1]: row[3] for row in rows}
    assert len(set(by_shard.values())) == 4  # each shard its own seed
    local = sorted(execute(p, "local", collect=("out",)).collected["out"])
    assert rows == local  # same routing and same seeds on every executor
    assert result.report.steps["info"].counters == {"seen": 40.0}


def test_arrow_batches_split_by_key_column(executor: str) -> None:
    batches = key_batches()
    p = Pipeline("keyed-arrow")
    p.step("batches", ListSource(batches))
    p.step("sums", SumByKey(), "batches", shards=3, key="k")
    p.step("out", ListSink(), "sums")
    table = pa.Table.from_batches(run(p, executor)["out"]).sort_by("k")
    keys = np.concatenate([b.column("k").to_numpy() for b in batches])
    values = np.concatenate([b.column("v").to_numpy() for b in batches])
    expected = np.bincount(keys, weights=values)
    present = np.flatnonzero(np.bincount(keys))
    assert table.column("k").to_pylist() == present.tolist()
    np.testing.assert_allclose(table.column("v").to_numpy(), expected[present])


def test_tensors_arrays_and_dicts_cross_unchanged(executor: str) -> None:
    items = [
        {"x": torch.arange(6, dtype=torch.float32).reshape(2, 3), "n": 2},
        np.arange(5, dtype=np.int16),
        ("tuple", 1.5, None),
    ]
    p = Pipeline("types")
    p.step("items", ListSource(items))
    p.step("out", ListSink(), "items")
    (first, second, third) = run(p, executor)["out"]
    assert torch.equal(first["x"], items[0]["x"])
    assert first["n"] == 2
    assert second.dtype == np.int16
    assert second.tolist() == [0, 1, 2, 3, 4]
    assert third == ("tuple", 1.5, None)


@pytest.mark.parametrize("shards", [1, 2])
def test_empty_source(executor: str, shards: int) -> None:
    p = Pipeline("empty")
    p.step("nothing", ListSource([]))
    p.step("keyed", Map(identity), "nothing", shards=shards, key=int)
    p.step("total", total, "keyed")
    p.record("total")
    assert execute(p, executor).outputs == {"total": 0, "count": 0}


def test_one_port_feeds_several_consumers(executor: str) -> None:
    p = Pipeline("fan-out")
    p.step("numbers", ListSource(range(5)))
    p.step("squares", Map(square), "numbers")
    p.step("evens", Filter(is_even), "numbers")
    p.step("a", ListSink(), "squares")
    p.step("b", ListSink(), "evens")
    assert run(p, executor) == {"a": [0, 1, 4, 9, 16], "b": [0, 2, 4]}


def test_unknown_collect_reference_is_a_plan_error() -> None:
    p = Pipeline("collect")
    p.step("numbers", ListSource([1]))
    with pytest.raises(PlanError, match="collect in step 'nothing'"):
        execute(p, collect=("nothing",))
    with pytest.raises(PlanError, match="collect in step 'numbers'"):
        execute(p, collect=("numbers.side",))
