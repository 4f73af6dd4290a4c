"""Sustained ingestion over loopback: acknowledged updates per second, peak RSS.

The endpoint (:class:`operators.streaming.ingest.IngestServer` over an
:class:`storage.UpdateLog`, fsync before every ack, group commit) runs in its own
process, so its resident memory is measured alone (sampled every 0.1 s with
psutil). A consumer keeping up is simulated by truncating the log below its
committed offset every 2 s (what a checkpointing ``ZmqIngest`` does), so the disk
stays bounded too. The producer, in this process, keeps ``window`` batches of
``batch_rows`` edge updates in flight and counts acknowledged rows.
"""

from __future__ import annotations

import json
import multiprocessing
import tempfile
import time
from typing import Any

import numpy as np
import psutil

from operators.streaming.client import IngestClient, encode_batch
from storage import edge_updates


def _serve(log_dir: str, queue: Any, stop: Any) -> None:  # pragma: no cover - child
    from operators.streaming.ingest import IngestServer
    from storage import LogConfig, UpdateLimits, UpdateLog

    log = UpdateLog(f"{log_dir}/log", LogConfig(segment_bytes=32 << 20, limits=None))
    server = IngestServer(
        log, "tcp://127.0.0.1:*", limits=UpdateLimits(max_nodes=1 << 20)
    )
    queue.put(server.endpoint)
    last_truncate = time.monotonic()
    while not stop.is_set():
        server.serve_once(50)
        if time.monotonic() - last_truncate > 2.0:
            log.truncate_before(log.committed_offset)
            last_truncate = time.monotonic()
    queue.put(
        json.dumps(
            {
                **server.counters(),
                "log_bytes": log.size_bytes,
                "segments": log.num_segments,
            }
        )
    )
    server.close()
    log.close()


def sustained_ingest(
    seconds: float = 60.0, *, batch_rows: int = 10_000, window: int = 8
) -> dict[str, Any]:
    """Run the producer for ``seconds``; return rates and the server's memory."""
    ctx = multiprocessing.get_context("spawn")
    queue, stop = ctx.Queue(), ctx.Event()
    with tempfile.TemporaryDirectory(prefix="ingest-bench-") as log_dir:
        server = ctx.Process(target=_serve, args=(log_dir, queue, stop), daemon=True)
        server.start()
        endpoint = queue.get(timeout=120)
        proc = psutil.Process(server.pid)
        rng = np.random.default_rng(0)
        ids = rng.integers(0, 1 << 20, (2, batch_rows))
        payload = encode_batch(edge_updates(ids[0], ids[1], event_time=0))
        samples: list[tuple[float, int]] = []
        acked_rows = seq = 0
        in_flight: set[int] = set()
        with IngestClient(endpoint, "bench") as client:
            start = last_sample = time.monotonic()
            while (now := time.monotonic()) - start < seconds or in_flight:
                while len(in_flight) < window and now - start < seconds:
                    seq += 1
                    client.submit(payload, seq)
                    in_flight.add(seq)
                reply = client.receive(100)
                if reply is not None and reply.get("ok") and reply["seq"] in in_flight:
                    in_flight.discard(reply["seq"])
                    acked_rows += batch_rows
                if now - last_sample >= 0.1:
                    samples.append((now - start, proc.memory_info().rss))
                    last_sample = now
            elapsed = time.monotonic() - start
        stop.set()
        counters = json.loads(queue.get(timeout=60))
        server.join(timeout=30)
    rss = np.array([r for _, r in samples], dtype=np.float64) / 2**20
    times = np.array([t for t, _ in samples])
    return {
        "seconds": round(elapsed, 1),
        "batch_rows": batch_rows,
        "window": window,
        "acked_rows": acked_rows,
        "acked_rows_per_s": round(acked_rows / elapsed),
        "acked_batches_per_s": round(acked_rows / batch_rows / elapsed, 1),
        "server_peak_rss_mb": round(float(rss.max()), 1),
        "server_rss_first_10s_max_mb": round(float(rss[times < 10].max()), 1),
        "server_rss_last_10s_max_mb": round(float(rss[times > elapsed - 10].max()), 1),
        "server": counters,
    }
