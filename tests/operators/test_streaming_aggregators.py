"""Aggregator algebra (River-style): merge = one pass, add-then-remove = identity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata.operators.errors import OperatorError
from strata.operators.streaming.aggregators import (
    Contribution,
    MaxAggregator,
    MeanAggregator,
    SumAggregator,
)

NODES, DIM = 6, 3


@st.composite
def contributions(draw: st.DrawFn, max_rows: int = 20) -> Contribution:
    rows = draw(st.integers(0, max_rows))
    dst = draw(st.lists(st.integers(0, NODES - 1), min_size=rows, max_size=rows))
    ints = st.integers(-8, 8)  # small integers: float sums are exact in any order
    flat = draw(st.lists(ints, min_size=rows * DIM, max_size=rows * DIM))
    values = np.asarray(flat, dtype=np.float64).reshape(rows, DIM)
    return Contribution(np.asarray(dst, dtype=np.int64), values)


def fold(agg, *items: Contribution):
    acc = agg.zero(NODES)
    for item in items:
        agg.add(acc, item)
    return acc


def numpy_reduce(kind: str, *items: Contribution) -> np.ndarray:
    out = np.zeros((NODES, DIM))
    for v in range(NODES):
        rows = [i.values[i.dst == v] for i in items]
        values = np.concatenate(rows) if rows else np.zeros((0, DIM))
        if len(values):
            out[v] = {"sum": values.sum, "mean": values.mean, "max": values.max}[kind](
                0
            )
    return out


AGGS = {"sum": SumAggregator, "mean": MeanAggregator, "max": MaxAggregator}


@pytest.mark.parametrize("kind", sorted(AGGS))
@given(a=contributions(), b=contributions())
@settings(max_examples=40, deadline=None)
def test_merge_of_partials_equals_one_pass_and_numpy(kind, a, b) -> None:
    agg = AGGS[kind](DIM)
    merged = agg.merge(fold(agg, a), fold(agg, b))
    whole = fold(agg, a, b)
    np.testing.assert_array_equal(agg.result(merged), agg.result(whole))
    np.testing.assert_array_equal(merged.counts, whole.counts)
    np.testing.assert_allclose(agg.result(whole), numpy_reduce(kind, a, b))


@pytest.mark.parametrize("kind", ["sum", "mean"])
@given(a=contributions(), b=contributions())
@settings(max_examples=40, deadline=None)
def test_add_then_remove_is_the_identity(kind, a, b) -> None:
    agg = AGGS[kind](DIM)
    acc = fold(agg, a, b)
    agg.remove(acc, b)
    np.testing.assert_array_equal(agg.result(acc), agg.result(fold(agg, a)))
    np.testing.assert_array_equal(acc.counts, fold(agg, a).counts)


@given(a=contributions(), b=contributions())
@settings(max_examples=40, deadline=None)
def test_max_remove_marks_and_refresh_recovers(a, b) -> None:
    agg = MaxAggregator(DIM)
    acc = fold(agg, a, b)
    agg.remove(acc, b)
    stale = np.flatnonzero(acc.stale)
    keep = np.isin(a.dst, stale)
    agg.refresh(acc, stale, Contribution(a.dst[keep], a.values[keep]))
    np.testing.assert_array_equal(agg.result(acc), agg.result(fold(agg, a)))


def test_windowed_partial_sum_counts_k_messages() -> None:
    """Pitfall 1: a partial sum of k messages weighs k, not one (the D3 mean bug)."""
    agg = MeanAggregator(1)
    acc = agg.zero(1)
    agg.add(acc, Contribution(np.array([0]), np.array([[6.0]]), np.array([3])))
    agg.add(acc, Contribution(np.array([0]), np.array([[2.0]])))
    assert agg.result(acc).tolist() == [[2.0]]  # (6 + 2) / 4


def test_max_refuses_to_read_a_stale_maximum() -> None:
    agg = MaxAggregator(1)
    acc = fold(agg, Contribution(np.array([0, 0]), np.array([[1.0], [5.0]])))
    agg.remove(acc, Contribution(np.array([0]), np.array([[5.0]])))
    with pytest.raises(OperatorError, match="stale"):
        agg.result(acc)


def test_gathered_rows_reach_many_destinations() -> None:
    agg = SumAggregator(2)
    acc = agg.zero(3)
    item = Contribution(np.array([0, 2, 2]), np.eye(2), rows=np.array([1, 0, 1]))
    agg.add(acc, item)
    assert agg.result(acc).tolist() == [[0, 1], [0, 0], [1, 1]]
