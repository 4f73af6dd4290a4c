import doctest
import errno
import os
import threading

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import strata.storage.update_log.log
import strata.storage.updates
from strata.storage.update_log import (
    LogConfig,
    LogError,
    LogFullError,
    LogSeqGapError,
    UpdateLog,
)
from strata.storage.updates import UpdateError, UpdateLimits, edge_updates


def batch_of(start, rows):
    """Edges start..start+rows-1 -> (same)+1: the row's offset is readable from src."""
    src = np.arange(start, start + rows)
    return edge_updates(src, src + 1, event_time=start)


def fill(log, sizes):
    start = log.next_offset
    for rows in sizes:
        first, last, dup = log.append(batch_of(start, rows))
        assert (first, last, dup) == (start, start + rows - 1, False)
        start += rows
    return start


def rows(log, from_offset=None, to_offset=None):
    out = []
    for first, batch in log.read(from_offset, to_offset):
        src = batch.column("src").to_numpy()
        assert src.tolist() == list(range(first, first + batch.num_rows))
        out.extend(src.tolist())
    return out


def test_append_read_round_trip_is_exact(tmp_path):
    with UpdateLog(tmp_path / "log") as log:
        batch = batch_of(0, 7)
        log.append(batch)
        ((first, back),) = list(log.read())
        assert first == 0
        assert back.equals(batch)
        assert log.recovery.clean


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=12), st.data())
def test_read_from_any_offset_returns_exactly_the_rows_from_there(
    tmp_path_factory, sizes, data
):
    path = tmp_path_factory.mktemp("log")
    with UpdateLog(path, LogConfig(segment_bytes=2500)) as log:
        end = fill(log, sizes)
        start = data.draw(st.integers(0, end))
        stop = data.draw(st.integers(start, end))
        assert rows(log, start) == list(range(start, end))
        assert rows(log, start, stop) == list(range(start, stop))


def test_segments_roll_over_and_names_encode_base_offsets(tmp_path):
    with UpdateLog(tmp_path, LogConfig(segment_bytes=3000)) as log:
        end = fill(log, [50] * 12)
        segments = sorted(p.name for p in tmp_path.glob("*.seg"))
        assert len(segments) == log.num_segments > 3
        bases = [int(name.split(".")[0]) for name in segments]
        assert bases[0] == 0
        assert all(b % 50 == 0 for b in bases)
    with UpdateLog(tmp_path, LogConfig(segment_bytes=3000)) as log:  # index rebuilt
        assert log.recovery.clean
        assert log.next_offset == end
        assert rows(log, 333) == list(range(333, end))
        end = fill(log, [5])
        assert rows(log, end - 7) == list(range(end - 7, end))


def test_producer_dedup_survives_reopen(tmp_path):
    cfg = LogConfig(segment_bytes=2000, dedup_window=2)
    with UpdateLog(tmp_path, cfg) as log:
        offsets = [log.append(batch_of(10 * s, 10), producer_id="a", seq=s)
                   for s in range(8)]  # fmt: skip
        log.append(batch_of(80, 3), producer_id="b", seq=100)
        assert log.append(batch_of(0, 1), producer_id="a", seq=7).duplicate
    with UpdateLog(tmp_path, cfg) as log:
        assert log.high_water("a") == 7
        assert log.high_water("b") == 100
        assert (log.first_seq("a"), log.first_seq("b")) == (0, 100)
        before = log.next_offset
        for s in (7, 3, 0):  # in memory, then looked up in older segments
            again = log.append(batch_of(0, 1), producer_id="a", seq=s)
            assert again == (offsets[s].first_offset, offsets[s].last_offset, True)
        assert log.next_offset == before
        assert log.duplicates == 3
        with pytest.raises(LogSeqGapError, match="expected 8") as gap:
            log.append(batch_of(0, 1), producer_id="a", seq=9)  # 8 comes first
        assert gap.value.expected == 8
        assert log.next_offset == before  # nothing written
        assert log.append(batch_of(83, 2), producer_id="a", seq=8) == (83, 84, False)
        assert log.append(batch_of(85, 1), producer_id="a", seq=9) == (85, 85, False)
        with pytest.raises(LogError, match="never logged"):
            log.append(batch_of(0, 1), producer_id="b", seq=99)  # below b's first
        with pytest.raises(LogError, match="both or neither"):
            log.append(batch_of(0, 1), seq=1)


def test_new_producer_must_start_at_its_first_seq(tmp_path):
    with UpdateLog(tmp_path) as log:
        with pytest.raises(LogSeqGapError, match="expected 1") as gap:
            log.append(batch_of(0, 2), producer_id="p", seq=3, first_seq=1)
        assert gap.value.expected == 1
        assert log.high_water("p") is None
        assert log.next_offset == 0
        for seq in (1, 2, 3):
            assert not log.append(
                batch_of(0, 2), producer_id="p", seq=seq, first_seq=1
            ).duplicate
        assert log.append(batch_of(0, 2), producer_id="p", seq=2, first_seq=1) == (
            2,
            3,
            True,
        )
        with pytest.raises(LogError, match="2\\*\\*63"):
            log.append(batch_of(0, 1), producer_id="p", seq=2**63)


def test_resend_of_a_truncated_batch_is_held_without_offsets(tmp_path):
    cfg = LogConfig(segment_bytes=1000, dedup_window=2)  # old seqs: on disk only
    with UpdateLog(tmp_path, cfg) as log:
        for s in range(1, 30):
            log.append(batch_of(s, 4), producer_id="p", seq=s)
        start = log.truncate_before(log.committed_offset)
        assert start > 0
        assert log.append(batch_of(0, 4), producer_id="p", seq=1) == (-1, -1, True)
        assert log.append(batch_of(0, 4), producer_id="p", seq=30).first_offset == (
            log.next_offset - 4
        )


def test_group_commit_makes_appends_visible_together(tmp_path):
    with UpdateLog(tmp_path) as log:
        log.append(batch_of(0, 4), sync=False)
        assert log.committed_offset == 0
        assert rows(log) == []
        assert log.commit() == 4
        results = log.append_many(
            [
                (batch_of(4, 2), "p", 1),
                (batch_of(6, 3), "p", 2),
                (batch_of(0, 1), "p", 1),
            ]
        )
        assert [tuple(r) for r in results] == [
            (4, 5, False),
            (6, 8, False),
            (4, 5, True),
        ]
        assert log.committed_offset == 9
        assert rows(log) == list(range(9))


def test_append_many_commits_the_prefix_before_a_bad_item(tmp_path):
    with UpdateLog(tmp_path) as log:
        bad = pa.record_batch({"x": [1]})
        with pytest.raises(UpdateError):
            log.append_many([(batch_of(0, 2), "p", 1), (bad, "p", 2)])
        assert log.committed_offset == 2
        assert log.append(batch_of(0, 2), producer_id="p", seq=1).duplicate


def test_retention_and_quota(tmp_path):
    cfg = LogConfig(segment_bytes=3000, max_log_bytes=12000)
    with UpdateLog(tmp_path, cfg) as log:
        with pytest.raises(LogFullError, match="quota") as info:
            fill(log, [50] * 100)
        assert info.value.retryable
        end = log.next_offset
        stored = log.size_bytes
        assert stored <= 12000
        assert rows(log) == list(range(end))  # nothing already stored was damaged
        start = log.truncate_before(end - 60)
        assert 0 < start <= end - 60
        assert log.size_bytes < stored
        with pytest.raises(LogError, match="truncated"):
            list(log.read(0))
        assert rows(log, start) == list(range(start, end))
        fill(log, [50])  # the retry now fits
        with pytest.raises(LogError, match="committed_offset"):
            log.truncate_before(log.next_offset + 1)
    with UpdateLog(tmp_path, cfg) as log:
        assert log.start_offset == start
        assert rows(log, start) == list(range(start, end + 50))


def test_bad_directories_and_arguments(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(LogError, match="a file"):
        UpdateLog(tmp_path / "file")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "data.csv").write_text("x")
    with pytest.raises(LogError, match="other files"):
        UpdateLog(tmp_path / "other")
    with pytest.raises(LogError, match="existing update log"):
        UpdateLog(tmp_path / "missing", readonly=True)
    with UpdateLog(
        tmp_path / "log", LogConfig(limits=UpdateLimits(max_nodes=5))
    ) as log:
        with pytest.raises(LogError, match="no other writer"):
            UpdateLog(tmp_path / "log")
        with pytest.raises(UpdateError, match="ids in"):
            log.append(batch_of(3, 4))
        with pytest.raises(LogError, match="at least one row"):
            log.append(batch_of(0, 0))
        with pytest.raises(LogError, match=r"\[0, 0\]"):
            list(log.read(1))
    with pytest.raises(LogError, match="closed"):
        log.append(batch_of(0, 1))
    UpdateLog(tmp_path / "log").close()  # the lock was released


def test_readonly_reader_follows_a_writer(tmp_path):
    with UpdateLog(tmp_path, LogConfig(segment_bytes=2000)) as log:
        fill(log, [10, 10])
        reader = UpdateLog(tmp_path, readonly=True)
        assert rows(reader) == list(range(20))
        fill(log, [10] * 5)  # crosses segments
        assert rows(reader, 15) == list(range(15, 70))
        with pytest.raises(LogError, match="readonly"):
            reader.append(batch_of(0, 1))
        got = [f for f, _ in reader.follow(60, idle_timeout_s=0.05, poll_s=0.01)]
        assert got == [60]
        reader.close()


def test_follow_wakes_on_commit(tmp_path):
    with UpdateLog(tmp_path) as log:
        seen = []

        def consume():
            for first, batch in log.follow(0, idle_timeout_s=5):
                seen.append((first, batch.num_rows))
                if first + batch.num_rows >= 30:
                    return

        thread = threading.Thread(target=consume)
        thread.start()
        fill(log, [10, 10, 10])
        thread.join(10)
        assert seen == [(0, 10), (10, 10), (20, 10)]


def test_records_carry_producer_and_event_times(tmp_path):
    with UpdateLog(tmp_path) as log:
        log.append(
            edge_updates([1, 2], [2, 3], event_time=[5, 9]), producer_id="z", seq=4
        )
        (rec,) = list(log.records(1))
        assert (rec.first_offset, rec.last_offset) == (1, 1)
        assert (rec.producer_id, rec.seq) == ("z", 4)
        assert (rec.min_event_time, rec.max_event_time) == (5, 9)
        assert log.verify() == 1


@pytest.mark.parametrize(
    "module", [strata.storage.updates, strata.storage.update_log.log]
)
def test_docstring_examples(module):
    assert doctest.testmod(module).failed == 0


def test_a_full_disk_mid_write_leaves_no_partial_record(tmp_path, monkeypatch):
    with UpdateLog(tmp_path) as log:
        fill(log, [5])
        segment = sorted(tmp_path.glob("*.seg"))[-1]
        size = segment.stat().st_size
        real = os.pwritev

        def half_then_enospc(fd, views, position):
            real(fd, [bytes(views[0])[:7]], position)
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "pwritev", half_then_enospc)
        with pytest.raises(LogFullError, match="full disk"):
            log.append(batch_of(5, 5))
        monkeypatch.setattr(os, "pwritev", real)
        assert segment.stat().st_size == size
        assert log.append(batch_of(5, 5)).first_offset == 5  # the retry succeeds
    with UpdateLog(tmp_path) as log:
        assert log.recovery.clean
        assert rows(log) == list(range(10))


def test_a_failed_fsync_stops_the_log_until_reopened(tmp_path, monkeypatch):
    log = UpdateLog(tmp_path)
    fill(log, [3])

    def eio(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", eio)
    with pytest.raises(LogError, match="fdatasync"):
        log.append(batch_of(3, 2))
    monkeypatch.undo()
    with pytest.raises(LogError, match="failed sync"):
        log.append(batch_of(3, 2))
    log.close()
    with UpdateLog(
        tmp_path
    ) as log:  # the unacknowledged record may or may not be there
        assert log.next_offset in (3, 5)


def test_unvalidated_appends_need_no_event_time(tmp_path):
    with UpdateLog(tmp_path, LogConfig(limits=None)) as log:
        log.append(pa.record_batch({"x": [1, 2]}))
        (rec,) = list(log.records())
        assert rec.batch.column("x").to_pylist() == [1, 2]
        assert (rec.min_event_time, rec.max_event_time) == (0, 0)


def test_a_refused_seq_holds_its_place_and_is_refused_again(tmp_path):
    cfg = LogConfig(segment_bytes=600, dedup_window=1)
    with UpdateLog(tmp_path, cfg) as log:
        log.append(batch_of(0, 2), producer_id="p", seq=1, first_seq=1)
        refusal = log.refuse("p", 2, "bad feature width", first_seq=1)
        assert refusal.refused
        assert refusal == (2, 1, False)
        assert log.append(batch_of(2, 3), producer_id="p", seq=3) == (2, 4, False)
        for s in range(4, 12):  # push seq 2 out of memory and its segment
            log.append(batch_of(log.next_offset, 1), producer_id="p", seq=s)
        assert len({p.name for p in tmp_path.glob("*.seg")}) == log.num_segments
        with pytest.raises(LogSeqGapError):
            log.refuse("p", 13, "too early")
    with UpdateLog(tmp_path, cfg) as log:  # recovered from disk
        again = log.append(batch_of(0, 2), producer_id="p", seq=2)
        assert again.duplicate
        assert again.refused
        assert again == (2, 1, True)
        assert not log.append(batch_of(2, 3), producer_id="p", seq=3).refused
        assert rows(log) == list(range(13))  # readers never see the refusal
        assert [(r.seq, r.first_offset) for r in log.records()][:3] == [
            (1, 0),
            (3, 2),
            (4, 5),
        ]
