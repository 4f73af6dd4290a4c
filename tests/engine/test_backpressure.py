"""A fast producer into a slow consumer: channel memory stays under the bound."""

from __future__ import annotations

import pytest
from engine_steps import Arrays, Slow, identity

from strata.engine import ChannelBounds, Map, Pipeline, RunConfig, execute
from strata.engine.testing import ListSink

ITEM_BYTES = 100_000
BOUNDS = ChannelBounds(max_items=6, max_bytes=350_000)  # room for 3 items of 100 kB


def _fast_into_slow(count: int, size: int) -> Pipeline:
    p = Pipeline("backpressure")
    p.step("arrays", Arrays(count, size))
    p.step("slow", Slow(0.004), "arrays")
    p.step("out", ListSink(), "slow")
    return p


@pytest.mark.usefixtures("no_leftovers")
def test_slow_consumer_bounds_channel_bytes(executor: str) -> None:
    result = execute(
        _fast_into_slow(60, ITEM_BYTES),
        executor,
        config=RunConfig(channel=BOUNDS),
        collect=("out",),
    )
    channel = result.report.channels["slow"]
    assert result.collected["out"] == list(range(60))
    assert 2 * ITEM_BYTES <= channel.peak_bytes <= BOUNDS.max_bytes
    assert channel.peak_items <= BOUNDS.max_items
    # The producer was held back: it spent time blocked on the full channel.
    assert result.report.steps["arrays"].blocked_s > 0


def test_oversized_items_flow_one_at_a_time(executor: str) -> None:
    result = execute(
        _fast_into_slow(10, 4 * BOUNDS.max_bytes),
        executor,
        config=RunConfig(channel=BOUNDS),
        collect=("out",),
    )
    assert result.collected["out"] == list(range(10))
    assert result.report.channels["slow"].peak_items == 1


def test_bound_is_shared_by_several_producers(executor: str) -> None:
    p = Pipeline("fan-in")
    p.step("arrays", Arrays(40, ITEM_BYTES))
    p.step("spread", Map(identity), "arrays", shards=2, key=_first)
    p.step("slow", Slow(0.004), "spread")
    p.step("out", ListSink(), "slow")
    result = execute(p, executor, config=RunConfig(channel=BOUNDS), collect=("out",))
    assert sorted(result.collected["out"]) == list(range(40))
    assert result.report.channels["slow"].peak_bytes <= BOUNDS.max_bytes


def _first(item: object) -> int:
    return int(item[0])  # type: ignore[index]
