"""Validation reports every problem at once; describe() renders the plan."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pytest
from engine_steps import Evens, add, constant, identity, total

from strata.engine import Map, Operator, Pipeline, PlanError
from strata.engine.testing import ListSink, ListSource


def problems(p: Pipeline) -> tuple[str, ...]:
    with pytest.raises(PlanError) as info:
        p.validate()
    assert str(len(info.value.problems)) in str(info.value)
    return info.value.problems


def test_cycle_duplicate_and_unknown_input_reported_together() -> None:
    p = Pipeline("broken")
    p.step("load", constant)
    p.step("load", constant)  # duplicate id
    p.step("a", Map(identity), "b")  # a <-> b: a cycle
    p.step("b", Map(identity), "a")
    p.step("train", add, "load", "lod")  # unknown input
    assert problems(p) == (
        "id in step 'load': expected a unique step id, got 2 steps named 'load'. "
        "Hint: rename one; ids name state, metrics and errors.",
        "input 'lod' in step 'train': expected the id of a declared step, got no step "
        "'lod'. Hint: did you mean 'load'?",
        "inputs in step 'a': expected no cycle, got the cycle a -> b -> a. "
        "Hint: a step cannot consume its own output; loop inside an operator.",
    )


def test_ports_must_exist_and_be_named_when_several() -> None:
    p = Pipeline("ports")
    p.step("numbers", ListSource([1]))
    p.step("split", Evens(), "numbers")
    p.step("a", ListSink(), "split")
    p.step("b", ListSink(), "split.evens")
    p.step("c", ListSink(), "numbers.out")
    found = problems(p)
    assert len(found) == 2
    assert found[0].startswith(
        "input 'split' in step 'a': expected one of step 'split'"
    )
    assert "got no port" in found[0]
    assert "input 'split.evens' in step 'b'" in found[1]
    assert "got port 'evens'" in found[1]


def test_batch_arity_and_params() -> None:
    p = Pipeline("arity")
    p.step("one", ListSource([1]))
    p.step("too_many", total, "one", "one")
    p.step("too_few", add, "one")
    p.step("unknown_param", total, "one", scale=2)
    found = problems(p)
    assert len(found) == 4
    assert "inputs in step 'too_many': expected 1 input for" in found[0]
    assert "got 2 (one, one)" in found[0]
    assert "inputs in step 'too_few': expected 2 inputs" in found[1]
    # add(a: int, b: int) would also receive the stream as a list:
    assert found[2].startswith("input 'one' in step 'too_few': expected a list")
    assert found[2].endswith("Hint: annotate it as a list.")
    assert "params in step 'unknown_param'" in found[3]
    assert found[3].endswith("got scale.")


def test_operator_mistakes() -> None:
    p = Pipeline("operators")
    p.step("numbers", ListSource([1]))
    p.step("class", ListSink, "numbers")
    p.step("params", ListSink(), "numbers", size=3)
    p.step("no_key", Map(identity), "numbers", shards=2)
    p.step("batch_shards", total, "numbers", shards=2, key=int)
    p.step("bad.id", ListSink(), "numbers")
    found = problems(p)
    assert [f.split(":")[0] for f in found] == [
        "function in step 'class'",
        "params in step 'params'",
        "key in step 'no_key'",
        "shards in step 'batch_shards'",
        "id in step 'bad.id'",
    ]
    assert "instantiate it: ListSink(...)" in found[0]


class Count(Operator[pa.RecordBatch, int]):
    def process(self, item: pa.RecordBatch) -> Iterable[int]:
        yield item.num_rows


class Text(Operator[str, str]):
    def process(self, item: str) -> Iterable[str]:
        yield item


def first_row(batch: pa.RecordBatch) -> int:
    return 0


def test_declared_item_types_are_compared() -> None:
    p = Pipeline("types")
    p.step("batches", ListSource([]))
    p.step("count", Count(), "batches")
    p.step("text", Text(), "count")  # int into str
    p.step("first", first_row, "count")  # a stream is a list, not a batch
    found = problems(p)
    assert found == (
        "input 'count' in step 'text': expected items of type str, got int from step "
        "'count'.",
        "input 'count' in step 'first': expected a list parameter (step 'count' streams"
        " items), got RecordBatch. Hint: annotate it as list[int].",
    )


def test_compatible_types_and_any_pass() -> None:
    p = Pipeline("fine")
    p.step("numbers", ListSource([1]))
    p.step("count", Count(), "numbers")  # ListSource is generic: unchecked
    p.step("total", total, "count")  # list[int] from int items
    p.validate()


def test_record_needs_a_batch_step() -> None:
    p = Pipeline("record")
    p.step("numbers", ListSource([1]))
    p.record("numbers", "nothing")
    found = problems(p)
    assert found[0].startswith("record in step 'numbers': expected a batch function")
    assert found[1].startswith("record in step 'nothing'")


def test_describe_text_and_mermaid() -> None:
    p = Pipeline("described")
    p.step("numbers", ListSource([1]))
    p.step("split", Evens(), "numbers", shards=2, key=int)
    p.step("evens", total, "split.even")
    p.record("evens")
    assert p.describe().splitlines() == [
        "pipeline 'described': 3 steps",
        "  numbers  source     strata.engine.testing:ListSource",
        "  split    streaming  engine_steps:Evens                x2 by int  "
        "<- numbers  ports even, odd",
        "  evens    batch      engine_steps:total                           "
        "<- split.even  [outputs]",
    ]
    assert p.describe(mermaid=True).splitlines() == [
        "flowchart LR",
        '  s0[["numbers<br/>ListSource"]]',
        '  s1("split<br/>Evens x2")',
        '  s2["evens<br/>total<br/>(outputs)"]',
        "  s0 --> s1",
        "  s1 -- even --> s2",
    ]
