import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from strata.storage.update_log import LogConfig, LogCorruptError, UpdateLog
from strata.storage.update_log import _format as fmt
from strata.storage.updates import edge_updates


def batch_for(seq):
    """The batch a producer sends as ``seq``: its contents encode the seq."""
    rows = 1 + (seq * 7919) % 3000
    src = np.full(rows, seq, dtype=np.int64)
    return edge_updates(src, np.arange(rows), event_time=seq)


def check_record(first, batch):
    seq = int(batch.column("src")[0].as_py())
    expected = batch_for(seq)
    lo = first - batch.column("dst")[0].as_py()  # dst counts rows within the seq
    assert batch.equals(expected.slice(first - lo, batch.num_rows))
    return seq


CONFIG = LogConfig(segment_bytes=200_000)


def fill(path, seqs):
    with UpdateLog(path, CONFIG) as log:
        for seq in seqs:
            log.append(batch_for(seq), producer_id="p", seq=seq)
        return log.next_offset


# ------------------------------------------------------------------------- torn tails
@pytest.mark.parametrize(
    "tail",
    ["garbage", "zeros", "half_record", "bad_crc_last_record", "prefix_only"],
)
def test_torn_tail_is_truncated_to_the_last_whole_record(tmp_path, tail):
    end = fill(tmp_path, range(5))
    segment = sorted(tmp_path.glob("*.seg"))[-1]
    whole = segment.stat().st_size
    data = bytearray(segment.read_bytes())
    if tail == "garbage":
        data += random.Random(1).randbytes(777)
    elif tail == "zeros":
        data += bytes(4096)
    elif tail == "prefix_only":
        data += b"SREC\x10"
    elif tail in ("half_record", "bad_crc_last_record"):
        with UpdateLog(tmp_path, CONFIG) as log:  # append one more whole record
            log.append(batch_for(5), producer_id="p", seq=5)
        if sorted(tmp_path.glob("*.seg"))[-1] != segment:  # it opened a new segment
            segment = sorted(tmp_path.glob("*.seg"))[-1]
            whole = fmt.decode_file_header(segment.read_bytes()).size
        data = bytearray(segment.read_bytes())
        if tail == "half_record":
            data = data[: whole + (len(data) - whole) // 2]
        else:
            data[-5] ^= 0xFF
    segment.write_bytes(bytes(data))

    with UpdateLog(tmp_path, CONFIG) as log:
        report = log.recovery
        assert report.truncated_segment == segment.name
        assert report.truncated_at == whole
        assert report.truncated_bytes == len(data) - whole
        assert log.next_offset == end
        assert segment.stat().st_size == whole
        seqs = {check_record(f, b) for f, b in log.read()}
        assert seqs == set(range(5))
        assert log.high_water("p") == 4  # seq 5 was torn off: a resend is logged
        assert not log.append(batch_for(5), producer_id="p", seq=5).duplicate
        assert log.verify() == 6


def test_flipped_byte_in_a_sealed_segment_names_the_file(tmp_path):
    fill(tmp_path, range(40))
    sealed = sorted(tmp_path.glob("*.seg"))[1]
    data = bytearray(sealed.read_bytes())
    data[len(data) // 2] ^= 0x01
    sealed.write_bytes(bytes(data))
    with UpdateLog(tmp_path, CONFIG) as log:
        assert log.recovery.clean
        with pytest.raises(LogCorruptError, match=sealed.name) as info:
            log.verify()
        assert str(sealed) in str(info.value)
        assert "byte" in str(info.value)
        with pytest.raises(LogCorruptError, match=sealed.name):
            list(log.read(0))
        # rows before the damaged segment are still readable
        assert sum(b.num_rows for _, b in log.read(0, int(sealed.stem))) == int(
            sealed.stem
        )


def test_damage_in_the_middle_of_the_last_segment_is_not_a_torn_tail(tmp_path):
    fill(tmp_path, range(3))
    last = sorted(tmp_path.glob("*.seg"))[-1]
    data = bytearray(last.read_bytes())
    data[200] ^= 0x01  # inside the first record; intact records follow it
    last.write_bytes(bytes(data))
    with pytest.raises(LogCorruptError, match=f"{last.name}.*intact record"):
        UpdateLog(tmp_path, CONFIG)
    assert last.read_bytes() == bytes(data)  # nothing was truncated
    data[200] ^= 0x01  # once restored, the log opens (the failed open let go)
    last.write_bytes(bytes(data))
    with UpdateLog(tmp_path, CONFIG) as log:
        assert log.verify() == 3


def test_damaged_segment_header_is_an_error(tmp_path):
    fill(tmp_path, range(2))
    last = sorted(tmp_path.glob("*.seg"))[-1]
    data = bytearray(last.read_bytes())
    data[0] ^= 0x01
    last.write_bytes(bytes(data))
    with pytest.raises(LogCorruptError, match="not a Strata log segment"):
        UpdateLog(tmp_path, CONFIG)


# ------------------------------------------------------------------------- SIGKILL
CHILD = """
import sys
sys.path.insert(0, {tests!r})
from test_update_log_crash import CONFIG, batch_for
from strata.storage.update_log import UpdateLog

log = UpdateLog({path!r}, CONFIG)
seq = log.high_water("p")
seq = 0 if seq is None else seq + 1
out = sys.stdout
while True:
    if seq % 3 == 0:  # group commit: ack after the one sync
        items = [(batch_for(s), "p", s) for s in range(seq, seq + 3)]
        acks = log.append_many(items)
        seq += 3
    else:
        acks = [log.append(batch_for(seq), producer_id="p", seq=seq)]
        seq += 1
    for s, (first, last, _) in zip(range(seq - len(acks), seq), acks):
        out.write(f"{{s}} {{first}} {{last}}\\n")
    out.flush()
"""


@pytest.mark.multiprocess
def test_sigkill_mid_append_loses_no_acknowledged_update(tmp_path):
    path = tmp_path / "log"
    tests = os.path.dirname(__file__)
    acked = {}
    rng = random.Random(7)
    for _ in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD.format(tests=tests, path=str(path))],
            stdout=subprocess.PIPE,
            text=True,
        )
        target = len(acked) + rng.randint(5, 60)
        while len(acked) < target:
            line = child.stdout.readline()
            assert line, "child died"
            s, first, last = map(int, line.split())
            acked[s] = (first, last)
        time.sleep(rng.random() * 0.05)  # kill at a random moment mid-append
        child.send_signal(signal.SIGKILL)
        child.wait()
        for line in child.stdout:  # acks sent before the kill landed
            s, first, last = map(int, line.split())
            acked[s] = (first, last)
        child.stdout.close()

        with UpdateLog(path, CONFIG) as log:
            logged = {}
            expected_first = 0
            for record in log.records():
                assert check_record(record.first_offset, record.batch) == record.seq
                assert record.seq not in logged  # none logged twice
                assert record.first_offset == expected_first  # no gap, no overlap
                expected_first = record.last_offset + 1
                logged[record.seq] = (record.first_offset, record.last_offset)
            for s, offsets in acked.items():
                assert logged[s] == offsets  # every acknowledged batch, intact
            assert sorted(logged) == list(range(len(logged)))
            last_seq = max(logged)
            assert log.next_offset == logged[last_seq][1] + 1
            assert log.high_water("p") == last_seq
            # the producer resends everything unacknowledged: logged ones dedup
            for s in range(max(acked) + 1, last_seq + 1):
                again = log.append(batch_for(s), producer_id="p", seq=s)
                assert again.duplicate
                assert (again.first_offset, again.last_offset) == logged[s]
        with UpdateLog(path, CONFIG) as log:  # appends continue at the right offset
            nxt = log.append(batch_for(last_seq + 1), producer_id="p", seq=last_seq + 1)
            assert nxt.first_offset == expected_first
            acked[last_seq + 1] = (nxt.first_offset, nxt.last_offset)


def test_a_log_whose_creation_was_cut_short_opens_as_new(tmp_path):
    """Killed between writing the metadata's temporary file and its rename."""
    (tmp_path / "strata-log.json.tmp").write_text('{"format": "strata-upd')
    with UpdateLog(tmp_path, CONFIG) as log:
        assert log.next_offset == 0
        log.append(batch_for(0), producer_id="p", seq=0)
    assert not (tmp_path / "strata-log.json.tmp").exists()
    (tmp_path / "other.txt").write_text("x")
    with UpdateLog(tmp_path, CONFIG) as log:  # an existing log: others' files stay
        assert log.high_water("p") == 0
