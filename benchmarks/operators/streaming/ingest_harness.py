"""Sustained ingestion over loopback: acknowledged updates per second, peak RSS.

The endpoint (:class:`strata.operators.streaming.ingest.IngestServer` over an
:class:`strata.storage.UpdateLog` with the default configuration, so the default disk
quota; fsync before every ack, group commit) runs in its own process, so its
resident memory is measured alone (sampled every 0.1 s with psutil). With
``retention_s`` a consumer that checkpoints is simulated by truncating the log below
its committed offset that often (what a checkpointing ``ZmqIngest`` does); without
it nothing is ever truncated, the log fills its quota, and producers are answered
"retry" (backpressure) from then on. The producer, in this process, is a real
:class:`~strata.operators.streaming.client.IngestClient` keeping ``window`` batches of
``batch_rows`` edge updates in flight; its report counts acknowledged rows and the
"log full" answers it got.
"""

from __future__ import annotations

import json
import multiprocessing
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import psutil
import pyarrow as pa

from strata.operators.streaming.client import IngestClient, IngestTimeoutError
from strata.storage import edge_updates


def _serve(
    log_dir: str, queue: Any, stop: Any, retention_s: float | None
) -> None:  # pragma: no cover - child
    from strata.operators.streaming.ingest import IngestServer
    from strata.storage import LogConfig, UpdateLimits, UpdateLog

    log = UpdateLog(f"{log_dir}/log", LogConfig(limits=None))  # the default quota
    server = IngestServer(
        log, "tcp://127.0.0.1:*", limits=UpdateLimits(max_nodes=1 << 20)
    )
    queue.put(server.endpoint)
    start = last_truncate = last_sample = time.monotonic()
    max_log_bytes = 0
    log_series: list[tuple[float, int]] = [(0.0, log.size_bytes)]
    while not stop.is_set():
        server.serve_once(50)
        max_log_bytes = max(max_log_bytes, log.size_bytes)
        if (now := time.monotonic()) - last_sample >= 0.25:
            log_series.append((round(now - start, 3), log.size_bytes))
            last_sample = now
        if retention_s is not None and time.monotonic() - last_truncate > retention_s:
            log.truncate_before(log.committed_offset)
            last_truncate = time.monotonic()
    queue.put(
        json.dumps(
            {
                **server.counters(),
                "quota_bytes": log.config.max_log_bytes,
                "max_log_bytes": max_log_bytes,
                "log_bytes": log.size_bytes,
                "segments": log.num_segments,
                "log_series": log_series,
            }
        )
    )
    server.close()
    log.close()


def sustained_ingest(
    seconds: float = 60.0,
    *,
    batch_rows: int = 10_000,
    window: int = 8,
    retention_s: float | None = None,
) -> dict[str, Any]:
    """Run the producer for ``seconds``; return rates and the server's memory."""
    ctx = multiprocessing.get_context("spawn")
    queue, stop = ctx.Queue(), ctx.Event()
    with tempfile.TemporaryDirectory(prefix="ingest-bench-") as log_dir:
        args = (log_dir, queue, stop, retention_s)
        server = ctx.Process(target=_serve, args=args, daemon=True)
        server.start()
        endpoint = queue.get(timeout=120)
        proc = psutil.Process(server.pid)
        rng = np.random.default_rng(0)
        ids = rng.integers(0, 1 << 20, (2, batch_rows))
        batch = edge_updates(ids[0], ids[1], event_time=0)
        samples: list[tuple[float, int]] = []
        start = time.monotonic()

        def batches() -> Iterator[pa.RecordBatch]:
            while time.monotonic() - start < seconds:
                yield batch

        def sample(_: dict[str, Any]) -> None:
            now = time.monotonic()
            if not samples or now - start - samples[-1][0] >= 0.1:
                samples.append((now - start, proc.memory_info().rss))

        samples.append((0.0, proc.memory_info().rss))
        # Without retention the full log never frees space: the batches still in
        # flight at the end stay unacknowledged, so the producer stops waiting.
        deadline = None if retention_s is not None else seconds + 5.0
        with IngestClient(endpoint, "bench") as client:
            try:
                report = client.send_all(
                    batches(),
                    window=window,
                    ack_timeout_s=30.0,
                    deadline_s=deadline,
                    on_ack=sample,
                )
            except IngestTimeoutError as exc:
                if exc.report is None:
                    raise
                report = exc.report
        samples.append((time.monotonic() - start, proc.memory_info().rss))
        elapsed = time.monotonic() - start
        stop.set()
        counters = json.loads(queue.get(timeout=60))
        server.join(timeout=30)
    rss = np.array([r for _, r in samples], dtype=np.float64) / 2**20
    return {
        "seconds": round(elapsed, 1),
        "batch_rows": batch_rows,
        "window": window,
        "retention_s": retention_s,
        "acked_rows": report.acked_rows,
        "acked_rows_per_s": round(report.acked_rows / elapsed),
        "log_full_answers": report.full,
        "complete": report.complete,
        "server_rss_start_mb": round(float(rss[0]), 1),
        "server_rss_end_mb": round(float(rss[-1]), 1),
        "server_peak_rss_mb": round(float(rss.max()), 1),
        "rss_series_mb": [(round(t, 3), round(r / 2**20, 1)) for t, r in samples],
        "server": counters,
    }
