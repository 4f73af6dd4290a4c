"""Checkpoints: the same results with them, resume after a failure, clear errors."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from checkpoint_steps import (
    Collect,
    CrashOnce,
    IdleSource,
    Join,
    Notices,
    Pace,
    Plain,
    Unencodable,
    counting_pipeline,
    expected_rows,
)
from engine_steps import square, total

from strata.engine import (
    Barrier,
    ChannelBounds,
    CheckpointConfig,
    CheckpointError,
    EndOfStream,
    Map,
    Pipeline,
    RunConfig,
    StepError,
    execute,
)
from strata.engine.channels import Channel, Delivery
from strata.engine.checkpoint import CheckpointStore
from strata.engine.cli import main
from strata.engine.runtime import Inbox
from strata.engine.testing import Abort, ListSink, ListSource

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
    # The source resumed from its offset, and its counters from the checkpoint:
    # each item counts once (a replay from the start would count more).
    assert resumed.report.steps["numbers"].items_out == ITEMS
    assert report.resumes == 1


WORK = ("items_in", "items_out", "bytes_in", "bytes_out")


@pytest.mark.usefixtures("no_leftovers")
def test_a_resumed_run_reports_the_whole_runs_counters(
    executor: str, tmp_path: Path
) -> None:
    marker = tmp_path / "crashed"
    p = counting_pipeline(ITEMS, before=CrashOnce(200, str(marker)))
    ckpt = tmp_path / "ckpt"
    failed = execute(p, executor, config=_config(ckpt), check=False, collect=("out",))
    assert not failed.ok
    resumed = execute(p, executor, config=_config(ckpt, resume=True), collect=("out",))
    # Resuming the finished run replays from its last checkpoint: a second resume.
    again = execute(p, executor, config=_config(ckpt, resume=True), collect=("out",))
    straight = execute(p, executor, collect=("out",))  # the crash happened: none
    for run, resumes in ((resumed, 1), (again, 2)):
        report = run.report.checkpoint
        assert report is not None
        assert report.resumes == resumes
        assert report.resumed_from is not None
        for step, expected in straight.report.steps.items():
            got = run.report.steps[step]
            assert [getattr(got, name) for name in WORK] == [
                getattr(expected, name) for name in WORK
            ], (step, resumes)
            assert got.counters == expected.counters, (step, resumes)
        assert run.report.steps["before"].counters == {"passed": ITEMS}
    assert failed.report.checkpoint is not None
    assert failed.report.checkpoint.resumes == 0


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
    ids = [int(n) for n, _, _ in heard]
    assert ids, "at least one notice arrived while the step ran"
    assert ids == sorted(set(ids))  # once each, in order
    assert max(ids) <= report.last
    # Told only once the completion marker was durable...
    assert all(exists == "1" for _, exists, _ in heard)
    # ...and before the next snapshot: the latest snapshot is checkpoint n's.
    assert all(int(n) == int(snapshots) for n, _, snapshots in heard)


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


def test_inbox_holds_a_link_until_every_link_delivered_the_barrier() -> None:
    a, b = (0, 0), (0, 1)
    arrivals = [
        Delivery(*a, "a1", 1),
        Barrier(*a, 1),
        Delivery(*a, "a2", 1),  # after the barrier: held
        Barrier(*a, 2),  # the next barrier, held too
        Delivery(*a, "a3", 1),
        Delivery(*b, "b1", 1),
        Barrier(*b, 1),
        Delivery(*b, "b2", 1),
        Barrier(*b, 2),
        EndOfStream(*b),
        EndOfStream(*a),
    ]
    held: list[object] = []
    taken: list[tuple[object, bool]] = []
    queue = iter(arrivals)
    inbox = Inbox(
        lambda: next(queue),
        2,
        hold=held.append,
        take=lambda message, was_held: taken.append((message, was_held)),
    )
    seen = []
    while (message := inbox.next()) is not None:
        seen.append(message.item if isinstance(message, Delivery) else message)
    assert seen == [
        "a1",
        "b1",
        Barrier(-1, -1, 1),
        "a2",  # held items come back in order, before newer arrivals
        "b2",
        Barrier(-1, -1, 2),
        "a3",
    ]
    assert [m.item for m in held if isinstance(m, Delivery)] == ["a2", "a3"]
    assert len(taken) == len(arrivals)  # each link message taken exactly once


def test_inbox_counts_an_ended_link_as_aligned() -> None:
    arrivals = iter(
        [
            Barrier(0, 0, 1),
            Delivery(0, 0, "late", 1),  # held until link (1, 0) ends
            EndOfStream(1, 0),
            EndOfStream(0, 0),
        ]
    )
    inbox = Inbox(lambda: next(arrivals), 2)
    assert inbox.next() == Barrier(-1, -1, 1)
    message = inbox.next()
    assert isinstance(message, Delivery)
    assert message.item == "late"
    assert inbox.next() is None


def test_held_link_producer_waits_for_its_share_only() -> None:
    channel = Channel(ChannelBounds(max_items=4, max_bytes=1 << 20), links=2)
    held = Delivery(0, 0, "x", 1)
    for _ in range(2):  # the consumer moved two items of link (0, 0) aside
        channel.put(held, 1)
        channel.hold(channel.get())  # type: ignore[arg-type]
    blocked = threading.Thread(target=channel.put, args=(Delivery(0, 0, "y", 1), 1))
    blocked.start()
    blocked.join(0.2)
    assert blocked.is_alive()  # its share (2 of 4 items) is used up
    assert channel.put(Delivery(0, 1, "z", 1), 1) == 0.0  # the other link flows
    channel.release(held)
    blocked.join(2)
    assert not blocked.is_alive()


@pytest.mark.usefixtures("no_leftovers")
def test_skewed_join_under_tight_bounds_does_not_deadlock(
    executor: str, tmp_path: Path
) -> None:
    p = Pipeline("skewed")
    p.step("left", ListSource(range(300)))
    p.step("right", ListSource(range(20)))
    p.step("join", Join(), "left", "right")
    p.step("keyed", Map(int), "join", shards=2, key=int)
    p.step("slow", Pace(0.0005), "keyed", shards=2, key=int)
    p.step("out", ListSink(), "slow")
    config = RunConfig(
        channel=ChannelBounds(max_items=2, max_bytes=1 << 20),
        checkpoint=CheckpointConfig(tmp_path, every_items=3),
    )
    result = execute(p, executor, config=config, collect=("out",))
    assert sorted(result.collected["out"]) == sorted(
        [*range(300), *range(10_000, 10_020)]
    )
    assert result.report.checkpoint is not None
    assert result.report.checkpoint.completed >= 2


def test_idle_source_still_checkpoints_on_an_interval(
    executor: str, tmp_path: Path
) -> None:
    p = Pipeline("idle")
    p.step("events", IdleSource(idle_s=0.4))
    p.step("out", ListSink(), "events")
    config = RunConfig(checkpoint=CheckpointConfig(tmp_path, interval_s=0.05))
    result = execute(p, executor, config=config, collect=("out",))
    assert result.collected["out"] == [0, 1, 2]
    assert result.report.checkpoint is not None
    assert result.report.checkpoint.completed >= 5  # 3 items, ~1.2 s of waiting


def test_cli_checkpoints_and_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckpt, report = tmp_path / "ckpt", tmp_path / "report.json"
    args = ["run", "checkpoint_steps", "--quiet", "--checkpoint-dir", str(ckpt)]
    assert main([*args, "--checkpoint-every", "10", "--report", str(report)]) == 0
    first = json.loads(report.read_text())
    assert first["checkpoint"]["completed"] >= 1
    assert first["checkpoint"]["resumed_from"] is None
    assert main(args) == 2  # a fresh run refuses the directory
    assert "--resume" in capsys.readouterr().err
    assert main([*args, "--resume", "--report", str(report)]) == 0
    second = json.loads(report.read_text())
    assert second["checkpoint"]["resumed_from"] == first["checkpoint"]["last"]
    assert second["outputs"] == first["outputs"]
    assert main(["run", "checkpoint_steps", "--resume"]) == 2


@pytest.mark.usefixtures("no_leftovers")
def test_abort_then_resume_keeps_a_batch_steps_gathered_input(
    executor: str, tmp_path: Path
) -> None:
    source = ListSource([*range(120), Abort(tmp_path / "aborted"), *range(120, 200)])
    p = Pipeline("gather")
    p.step("numbers", source)
    p.step("square", Map(square), "numbers", shards=2, key=int)
    p.step("total", total, "square")  # a batch step: gathers the whole stream
    p.record("total")
    ckpt = tmp_path / "ckpt"
    failed = execute(p, executor, config=_config(ckpt, every=10), check=False)
    assert "aborted at Abort" in str(failed.error)
    store = CheckpointStore(ckpt)
    manifest = store.manifest(store.complete_ids()[-1])
    assert manifest is not None
    (entry,) = [e for e in manifest.tasks if e.step == "total"]
    assert entry.status == "state"  # what it had gathered mid-stream was stored
    resumed = execute(p, executor, config=_config(ckpt, every=10, resume=True))
    assert resumed.outputs == {"total": sum(i * i for i in range(200)), "count": 200}
    assert resumed.report.checkpoint is not None
    assert resumed.report.checkpoint.resumed_from == manifest.checkpoint
