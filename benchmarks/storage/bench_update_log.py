"""UpdateLog append throughput: fsync per append versus group commit.

Run: .venv/bin/python -m pytest benchmarks/storage/bench_update_log.py --benchmark-only
Rates are in ``extra_info`` (appends_per_s, updates_per_s, MB_per_s); fsync cost
depends on the disk under the temporary directory, so compare modes within one run.
"""

import shutil
import tempfile

import numpy as np
import pytest

from strata.storage.update_log import LogConfig, UpdateLog
from strata.storage.updates import UpdateKind, make_updates

GROUP = 64  # batches per sync in group-commit mode
RECORDS = {100: 256, 1000: 256, 10_000: 64}  # appends per round, by batch size


def update_batch(rows, seed):
    rng = np.random.default_rng(seed)
    kind = np.where(rng.random(rows) < 0.8, UpdateKind.ADD_EDGE, UpdateKind.REMOVE_EDGE)
    ids = rng.integers(0, 1 << 18, (2, rows))
    return make_updates(kind.astype(np.int8), src=ids[0], dst=ids[1], event_time=seed)


@pytest.fixture(scope="module", params=[100, 1000, 10_000], ids=lambda b: f"rows{b}")
def batches(request):
    rows = request.param
    return [update_batch(rows, seed) for seed in range(RECORDS[rows])]


def _bench(benchmark, batches, append):
    logs = []

    def setup():  # a fresh log per round, outside the timer
        logs.append(
            UpdateLog(tempfile.mkdtemp(prefix="bench-log-"), LogConfig(limits=None))
        )
        return (logs[-1],), {}

    benchmark.pedantic(append, setup=setup, rounds=5, iterations=1)
    rows = sum(b.num_rows for b in batches)
    size = logs[-1].size_bytes
    for log in logs:
        assert log.committed_offset == rows
        log.close()
        shutil.rmtree(log.path)
    if benchmark.stats is None:  # --benchmark-disable: a smoke run, no timings
        return
    mean = benchmark.stats.stats.mean
    benchmark.extra_info.update(
        appends_per_s=round(len(batches) / mean),
        updates_per_s=round(rows / mean),
        MB_per_s=round(size / mean / 1e6, 1),
        rows_per_batch=batches[0].num_rows,
    )


def test_append_fsync_each(benchmark, batches):
    def append(log):
        for seq, batch in enumerate(batches):
            log.append(batch, producer_id="bench", seq=seq)

    _bench(benchmark, batches, append)


def test_append_group_commit(benchmark, batches):
    def append(log):
        for start in range(0, len(batches), GROUP):
            group = batches[start : start + GROUP]
            log.append_many((b, "bench", start + i) for i, b in enumerate(group))

    _bench(benchmark, batches, append)


def test_read_back(benchmark, batches, tmp_path):
    with UpdateLog(tmp_path / "log", LogConfig(limits=None)) as log:
        log.append_many((b, None, None) for b in batches)
        rows = sum(b.num_rows for b in batches)

        def read():
            return sum(b.num_rows for _, b in log.read(0))

        assert benchmark.pedantic(read, rounds=5, iterations=1) == rows
        if benchmark.stats is None:
            return
        benchmark.extra_info.update(
            updates_per_s=round(rows / benchmark.stats.stats.mean),
            rows_per_batch=batches[0].num_rows,
        )
