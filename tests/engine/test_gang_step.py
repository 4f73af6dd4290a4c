"""A gang as a pipeline step, on the local and process executors."""

from __future__ import annotations

import gang_workers as gw
import pytest

from strata.engine import Pipeline, StepError, execute
from strata.engine.gang import GangError, GangSpec, gang_step

pytestmark = pytest.mark.multiprocess


def test_gang_step_runs_on_every_executor(executor: str, no_leftovers: None) -> None:
    p = Pipeline("gang-step")
    p.step("data", gw.make_data, n=10)
    p.step("train", gang_step(gw.train_share, GangSpec(workers=2)), "data", epochs=3)
    p.step("summary", gw.summarize, "train")
    p.record("summary")
    assert execute(p, executor).outputs == {
        "totals": [45.0, 45.0],
        "rows": [15.0, 15.0],  # 5 rows a rank, 3 epochs
        "world_size": 2,
    }


def test_failed_gang_fails_the_step_with_the_gang_error_chained(
    no_leftovers: None,
) -> None:
    p = Pipeline("gang-fails")
    p.step("train", gang_step(gw.raise_on, GangSpec(workers=2), name="trainer"), rank=1)
    result = execute(p, "local", check=False)
    error = result.error
    assert isinstance(error, StepError)
    assert error.step == "train"
    assert isinstance(error.__cause__, GangError)
    assert error.__cause__.rank == 1
    assert "worker rank 1" in str(error.__cause__)
    assert "in step 'trainer'" in str(error.__cause__)


def test_two_gang_steps_run_side_by_side(no_leftovers: None) -> None:
    p = Pipeline("two-gangs")
    p.step("data", gw.make_data, n=6)
    for name in ("left", "right"):
        p.step(name, gang_step(gw.train_share, GangSpec(workers=2)), "data", epochs=1)
        p.step(f"{name}_summary", gw.summarize, name)
    p.record("left_summary")
    result = execute(p, "local")  # independent steps: two gangs at once
    assert result.outputs["totals"] == [15.0, 15.0]
