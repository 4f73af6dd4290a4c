"""The ray executor's own behaviour (the shared pipeline tests run on it too).

A killed actor mid-stream is recovered from the last checkpoint with every item
applied exactly once; without restarts the run fails naming the step; batch steps
run as Ray tasks whose outputs stay in the object store; actors are pooled
between good runs and none outlives a failed one.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from checkpoint_steps import CrashOnce, counting_pipeline, expected_rows

from strata.engine import CheckpointConfig, Pipeline, RunConfig, StepError, execute
from strata.engine.ops import Map
from strata.engine.testing import ListSink, ListSource

pytestmark = [
    pytest.mark.ray,
    pytest.mark.multiprocess,
    pytest.mark.usefixtures("ray_session", "no_leftovers"),
]

ITEMS = 300


def _executor(**options: Any) -> Any:
    from strata.engine.executors.ray_driver import RayExecutor

    return RayExecutor(**options)


def _config(directory: Path, *, every: int = 10) -> RunConfig:
    return RunConfig(checkpoint=CheckpointConfig(directory, every_items=every))


def test_actor_killed_mid_stream_resumes_with_nothing_lost_or_doubled(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "killed"
    p = counting_pipeline(ITEMS, before=CrashOnce(150, str(marker), how="kill"))
    executor = _executor(max_restarts=1)
    result = execute(p, executor, config=_config(tmp_path / "ckpt"), collect=("out",))
    assert marker.exists(), "the actor was killed"
    assert executor.restarts == 1
    report = result.report.checkpoint
    assert report is not None
    assert report.resumed_from is not None
    # Every key counts 1..n exactly once: nothing lost, nothing applied twice.
    assert sorted(map(list, result.collected["out"])) == expected_rows(ITEMS)
    assert result.outputs == {"rows": ITEMS, "total": sum(range(ITEMS))}
    assert result.report.steps["numbers"].items_out == ITEMS


def test_killed_actor_without_restarts_fails_naming_the_step(tmp_path: Path) -> None:
    marker = tmp_path / "killed"
    p = counting_pipeline(ITEMS, before=CrashOnce(150, str(marker), how="kill"))
    executor = _executor(max_restarts=0)
    failed = execute(p, executor, config=_config(tmp_path / "ckpt"), check=False)
    assert isinstance(failed.error, StepError)
    assert failed.error.step == "before"
    assert "in step 'before'" in str(failed.error)
    assert "died" in str(failed.error)
    assert executor.restarts == 0


def _big() -> np.ndarray:
    return np.arange(1 << 20, dtype=np.float64)  # 8 MiB: stored in the object store


def _describe(values: np.ndarray) -> dict[str, Any]:
    # An array read from Ray's object store is a read-only view of shared memory.
    return {"sum": float(values.sum()), "writeable": bool(values.flags.writeable)}


def test_batch_outputs_pass_between_ray_tasks_without_a_copy() -> None:
    p = Pipeline("by-reference")
    p.step("big", _big)
    p.step("describe", _describe, "big")
    p.record("describe")
    outputs = execute(p, "ray").outputs
    assert outputs == {"sum": float(np.arange(1 << 20).sum()), "writeable": False}
    local = execute(p, "local").outputs
    assert local["sum"] == outputs["sum"]


def _half(values: list[int]) -> list[int]:
    return [v // 2 for v in values]


def test_streaming_into_batch_into_batch_on_actors_and_tasks() -> None:
    # numbers -> squared (two shard actors) -> half (an actor: it gathers a stream).
    p = Pipeline("mixed")
    p.step("numbers", ListSource(range(1000)))
    p.step("squared", Map(_square), "numbers", shards=2, key=_identity)
    p.step("half", _half, "squared")
    p.step("out", ListSink(), "numbers")
    result = execute(p, "ray", collect=("half", "out"))
    expected = execute(p, "local", collect=("half", "out"))
    assert sorted(result.collected["half"][0]) == sorted(expected.collected["half"][0])
    assert result.collected["out"] == list(range(1000))


def _square(value: int) -> int:
    return value * value


def _identity(value: int) -> int:
    return value


def test_good_runs_pool_their_actors(ray_session: ModuleType) -> None:
    from strata.engine.executors.ray_driver import pooled_actor_ids

    p = Pipeline("pooled")
    p.step("numbers", ListSource(range(10)))
    p.step("out", ListSink(), "numbers")
    execute(p, "ray", collect=("out",))
    first = pooled_actor_ids()
    assert len(first) >= 2
    execute(p, "ray", collect=("out",))
    assert pooled_actor_ids() == first  # the same actors served the second run
