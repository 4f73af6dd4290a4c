"""Checkpoints: the same results with them, resume after a failure, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from checkpoint_steps import (
    Collect,
    CrashOnce,
    Join,
    Notices,
    Plain,
    Unencodable,
    counting_pipeline,
    expected_rows,
)

from engine import (
    CheckpointConfig,
    CheckpointError,
    Map,
    Pipeline,
    RunConfig,
    StepError,
    execute,
)
from engine.checkpoint import CheckpointStore
from engine.testing import ListSink, ListSource

ITEMS = 300


def _config(directory: Path, *, resume: bool = False, every: int = 20) -> RunConfig:
    return RunConfig(
        checkpoint=CheckpointConfig(directory, every_items=every), resume=resume
    )


def _sorted(rows: list[list[int]]) -> list[list[int]]:
    return sorted(list(row) for row in rows)


@pytest.mark.usefixtures("no_leftovers")
def test_same_result_with_and_without_checkpoints(
    executor: str, tmp_path: Path
) -> None:
    p = counting_pipeline(ITEMS)
    plain = execute(p, executor, collect=("out",))
    checked = execute(p, executor, config=_config(tmp_path), collect=("out",))
    assert _sorted(plain.collected["out"]) == expected_rows(ITEMS)
    assert _sorted(checked.collected["out"]) == expected_rows(ITEMS)
    assert checked.outputs == plain.outputs
    report = checked.report.checkpoint
    assert report is not None
    assert report.completed >= 1
    assert report.last is not None
    assert report.resumed_from is None
    assert report.bytes > 0
    assert CheckpointStore(tmp_path).complete_ids()[-1] == report.last
    assert plain.report.checkpoint is None


@pytest.mark.usefixtures("no_leftovers")
def test_resume_after_a_failure_applies_each_item_once(
    executor: str, tmp_path: Path
) -> None:
    marker = tmp_path / "crashed"
    p = counting_pipeline(ITEMS, before=CrashOnce(200, str(marker)))
    ckpt = tmp_path / "ckpt"
    failed = execute(p, executor, config=_config(ckpt), check=False, collect=("out",))
    assert not failed.ok
    assert "injected crash at item 200" in str(failed.error)
    assert marker.exists()
    complete = CheckpointStore(ckpt).complete_ids()
    assert complete, "a checkpoint completed before the crash"
    resumed = execute(p, executor, config=_config(ckpt, resume=True), collect=("out",))
    report = resumed.report.checkpoint
    assert report is not None
    assert report.resumed_from == complete[-1]
    # Nothing lost, nothing applied twice: every key counts 1..n exactly once.
    assert _sorted(resumed.collected["out"]) == expected_rows(ITEMS)
    assert resumed.outputs == {"rows": ITEMS, "total": sum(range(ITEMS))}
    # The source resumed from its offset: it did not replay everything.
    assert resumed.report.steps["numbers"].items_out < ITEMS


def test_resume_after_success_gives_the_same_result(tmp_path: Path) -> None:
    p = counting_pipeline(ITEMS)
    first = execute(p, config=_config(tmp_path), collect=("out",))
    again = execute(p, config=_config(tmp_path, resume=True), collect=("out",))
    assert _sorted(again.collected["out"]) == _sorted(first.collected["out"])
    assert again.outputs == first.outputs


def test_resume_without_a_checkpoint_starts_over(tmp_path: Path) -> None:
    result = execute(
        counting_pipeline(50),
        config=_config(tmp_path, resume=True, every=1000),
        collect=("out",),
    )
    assert _sorted(result.collected["out"]) == expected_rows(50)
    assert result.report.checkpoint is not None
    assert result.report.checkpoint.resumed_from is None


def test_torn_and_incomplete_checkpoints_are_ignored(tmp_path: Path) -> None:
    p = counting_pipeline(ITEMS)
    execute(p, config=_config(tmp_path), collect=("out",))
    store = CheckpointStore(tmp_path)
    last = store.complete_ids()[-1]
    # A crash mid-checkpoint: some state files, a half-written manifest.
    torn = store.path(last + 1)
    torn.mkdir()
    (torn / "count.0.dead.state").write_bytes(b"STRATA-STATE\x01 truncated")
    (torn / ".MANIFEST.json.tmp").write_text('{"format": 1, "checkpo')
    # A manifest that is not whole (renamed by hand, say) is no marker either.
    garbage = store.path(last + 2)
    garbage.mkdir()
    (garbage / "MANIFEST.json").write_text('{"format": 1, "checkpoint": ')
    assert store.complete_ids()[-1] == last
    resumed = execute(p, config=_config(tmp_path, resume=True), collect=("out",))
    assert resumed.report.checkpoint is not None
    assert resumed.report.checkpoint.resumed_from == last
    assert _sorted(resumed.collected["out"]) == expected_rows(ITEMS)
    assert not torn.exists()
    assert not garbage.exists()


def test_changed_shard_count_is_a_clear_error(tmp_path: Path) -> None:
    execute(counting_pipeline(ITEMS, shards=2), config=_config(tmp_path))
    with pytest.raises(CheckpointError) as info:
        execute(
            counting_pipeline(ITEMS, shards=3), config=_config(tmp_path, resume=True)
        )
    message = str(info.value)
    assert "shards in step 'count': expected 2 (as in checkpoint" in message
    assert "got 3" in message
    assert "shards in step 'collect'" in message  # every problem at once


def test_missing_or_added_steps_are_clear_errors(tmp_path: Path) -> None:
    execute(counting_pipeline(ITEMS), config=_config(tmp_path))
    p = Pipeline("counting")
    p.step("numbers", ListSource(range(ITEMS)))
    p.step("renamed", Collect(), "numbers")
    with pytest.raises(CheckpointError) as info:
        execute(p, config=_config(tmp_path, resume=True))
    message = str(info.value)
    assert "checkpoint in step 'renamed': expected the step's state" in message
    assert "step in step 'count': expected a step of the pipeline" in message


def test_resume_must_collect_what_the_checkpoint_collected(tmp_path: Path) -> None:
    execute(counting_pipeline(ITEMS), config=_config(tmp_path))
    with pytest.raises(CheckpointError, match="collect in step 'out'"):
        execute(
            counting_pipeline(ITEMS),
            config=_config(tmp_path, resume=True),
            collect=("out",),
        )


def test_fresh_run_refuses_a_directory_with_checkpoints(tmp_path: Path) -> None:
    execute(counting_pipeline(ITEMS), config=_config(tmp_path))
    with pytest.raises(CheckpointError, match="resume=True"):
        execute(counting_pipeline(ITEMS), config=_config(tmp_path))


def test_sources_must_be_stateful(tmp_path: Path) -> None:
    p = Pipeline("plain")
    p.step("numbers", Plain())
    p.step("out", ListSink(), "numbers")
    with pytest.raises(CheckpointError, match="source in step 'numbers'"):
        execute(p, config=_config(tmp_path))


def test_unencodable_snapshot_names_the_step(executor: str, tmp_path: Path) -> None:
    p = Pipeline("unencodable")
    p.step("numbers", ListSource(range(50)))
    p.step("bad", Unencodable(), "numbers")
    p.step("out", ListSink(), "bad")
    with pytest.raises(StepError) as info:
        execute(p, executor, config=_config(tmp_path, every=5))
    assert "snapshot in step 'bad'" in str(info.value)
    assert "non-string keys" in str(info.value)


def test_listeners_hear_of_completed_checkpoints(executor: str, tmp_path: Path) -> None:
    notices = tmp_path / "notices.txt"
    ckpt = tmp_path / "ckpt"
    p = Pipeline("listen")
    p.step("numbers", ListSource(range(200)))
    p.step("notices", Notices(str(notices), str(ckpt)), "numbers")
    p.step("out", ListSink(), "notices")
    result = execute(p, executor, config=_config(ckpt, every=10))
    report = result.report.checkpoint
    assert report is not None
    assert report.last is not None
    heard = [line.split() for line in notices.read_text().splitlines()]
    ids = [int(n) for n, _ in heard]
    assert ids, "at least one notice arrived while the step ran"
    assert ids == sorted(set(ids))
    assert max(ids) <= report.last
    # Told only once the completion marker was durable.
    assert all(exists == "1" for _, exists in heard)


@pytest.mark.usefixtures("no_leftovers")
def test_two_sources_align_into_a_join(executor: str, tmp_path: Path) -> None:
    marker = tmp_path / "crashed"
    p = Pipeline("join")
    p.step("left", ListSource(range(150)))
    p.step("right", ListSource(range(40)))
    p.step("join", Join(), "left", "right")
    p.step("crash", CrashOnce(10_030, str(marker)), "join")
    p.step("keyed", Map(int), "crash", shards=2, key=int)
    p.step("out", ListSink(), "keyed")
    expected = sorted([*range(150), *range(10_000, 10_040)])
    ckpt = tmp_path / "ckpt"
    failed = execute(
        p, executor, config=_config(ckpt, every=5), check=False, collect=("out",)
    )
    assert not failed.ok
    resumed = execute(
        p, executor, config=_config(ckpt, resume=True, every=5), collect=("out",)
    )
    assert sorted(resumed.collected["out"]) == expected
