"""EmbeddingSink: the current embedding of every node, and the stream's counters.

The last layer step sends the embeddings of every node once (``init``), then the
changed ones after every flush (``delta``). The sink *upserts* rows (the latest row
of a node wins), so a replayed flush after recovery rewrites the same values
instead of adding anything (d3gnn.md §3.8: idempotent sinks). It also counts the
update rows the flushes account for, keeps a histogram of event-to-embedding
latency (wall ms from the row's arrival at the source to the flush reaching the
sink) and the offset watermark.

* :meth:`EmbeddingSink.query` answers "what is node v's embedding now"; with a
  ``query_endpoint`` a running job answers it over loopback too (a ROUTER socket
  polled between items; :func:`strata.operators.streaming.client.query_embeddings`).
* At the end it yields one summary dict; :func:`summarize_stream` turns it into the
  job's JSON outputs, and ``out_path`` (``.npy``) receives the whole table.

It is ``Stateful``: the table, counters and histogram are its snapshot.

Examples:
    >>> import numpy as np
    >>> sink = EmbeddingSink(sample=2)
    >>> sink.open(None)
    >>> _ = list(sink.process({"kind": "init", "f": np.zeros((3, 2), np.float32),
    ...                         "live": np.ones(3, bool)}))
    >>> delta = {"nodes": np.array([1]), "values": np.ones((1, 2), np.float32),
    ...          "updates": 5, "arrivals": np.full(5, -1), "end_offset": 5}
    >>> _ = list(sink.process({"kind": "delta", "delta": delta}))
    >>> sink.query(np.array([1, 2])).tolist()
    [[1.0, 1.0], [0.0, 0.0]]
    >>> summary = next(iter(sink.finish()))
    >>> summary["applied_updates"], summary["watermark"], summary["live_nodes"]
    (5, 5, 3)
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import zmq

from strata.engine.operator import Operator, StepContext
from strata.operators.streaming.items import DELTA, INIT
from strata.operators.streaming.windows import wall_ms

_BINS = 60_001  # 1 ms latency bins up to 60 s, then one overflow bin
_MAX_QUERY = 10_000  # nodes answered per query


class EmbeddingSink(Operator[dict[str, Any], dict[str, Any]]):
    """Keeps the latest embedding of every node (see the module docstring).

    Args:
        out_path: Write the final table here as ``.npy`` (atomically), or None.
        sample: How many nodes' embeddings the summary shows.
        query_endpoint: Serve queries of current embeddings here (a JSON request
            ``{"nodes": [...]}``), or None.
    """

    def __init__(
        self,
        out_path: str | None = None,
        *,
        sample: int = 3,
        query_endpoint: str | None = None,
    ) -> None:
        self.out_path = out_path
        self.sample = sample
        self.query_endpoint = query_endpoint

    def open(self, ctx: StepContext | None) -> None:
        """Start empty."""
        self.table = np.zeros((0, 0), dtype=np.float32)
        self.live = np.zeros(0, dtype=np.bool_)
        self.initialized = False
        self.applied_updates = 0
        self.watermark = -1
        self.flushes = 0
        self.rows = 0
        self.histogram = np.zeros(_BINS, dtype=np.int64)
        self.first_arrival_ms = -1
        self.last_flush_ms = -1
        self.socket: zmq.Socket[Any] | None = None
        if self.query_endpoint is not None:
            self.socket = zmq.Context.instance().socket(zmq.ROUTER)
            self.socket.setsockopt(zmq.LINGER, 0)
            self.socket.bind(self.query_endpoint)

    def _grow(self, num_nodes: int, width: int) -> None:
        if num_nodes > self.table.shape[0] or self.table.shape[1] != width:
            capacity = max(num_nodes, 2 * self.table.shape[0])
            table = np.zeros((capacity, width), dtype=self.table.dtype)
            live = np.zeros(capacity, dtype=np.bool_)
            n = self.live.shape[0]
            if self.table.shape[1] == width:
                table[:n] = self.table
            live[:n] = self.live
            self.table, self.live = table, live

    def process(self, item: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Upsert an ``init`` or ``delta`` item's rows; other items are ignored."""
        if item["kind"] == INIT and not self.initialized:  # shards send copies
            self.initialized = True
            values = np.asarray(item["f"])
            self.table = values.copy()
            self.live = np.asarray(item["live"], dtype=np.bool_).copy()
        elif item["kind"] == DELTA:
            self._upsert(item["delta"])
        self._answer_queries()
        return iter(())

    def _answer_queries(self) -> None:
        """Answer the queries waiting on the socket (never blocks)."""
        while self.socket is not None and self.socket.poll(0):
            peer, *frames = self.socket.recv_multipart()
            try:
                request = json.loads(frames[-1]) if frames else {}
                nodes = np.asarray(request["nodes"], dtype=np.int64)[:_MAX_QUERY]
                n = self.live.shape[0]
                inside = (nodes >= 0) & (nodes < n)
                live = np.zeros(nodes.shape[0], dtype=np.bool_)
                live[inside] = self.live[nodes[inside]]
                reply = {
                    "ok": True,
                    "nodes": nodes.tolist(),
                    "live": live.tolist(),
                    "embeddings": self.query(np.where(inside, nodes, n)).tolist(),
                    "watermark": self.watermark,
                    "applied_updates": self.applied_updates,
                }
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                reply = {"ok": False, "error": str(exc)[:200]}
            self.socket.send_multipart([peer, json.dumps(reply).encode()])

    def _upsert(self, delta: dict[str, Any]) -> None:
        nodes = np.asarray(delta["nodes"], dtype=np.int64)
        values = np.asarray(delta["values"])
        if nodes.size:
            if self.table.dtype != values.dtype and self.table.size == 0:
                self.table = self.table.astype(values.dtype)
            self._grow(int(nodes.max()) + 1, values.shape[1])
            self.table[nodes] = values
            self.live[nodes] = True
        self.flushes += 1
        self.rows += int(nodes.size)
        self.applied_updates += int(delta["updates"])
        self.watermark = max(self.watermark, int(delta["end_offset"]))
        arrivals = np.asarray(delta["arrivals"], dtype=np.int64)
        arrivals = arrivals[arrivals >= 0]
        if arrivals.size:
            now = wall_ms()
            lat = np.clip(now - arrivals, 0, _BINS - 1)
            self.histogram += np.bincount(lat, minlength=_BINS)
            first = int(arrivals.min())
            if self.first_arrival_ms < 0 or first < self.first_arrival_ms:
                self.first_arrival_ms = first
            self.last_flush_ms = now

    def query(self, nodes: np.ndarray) -> np.ndarray:
        """The current embeddings of ``nodes`` (zeros for nodes never seen)."""
        ids = np.asarray(nodes, dtype=np.int64)
        out = np.zeros((ids.shape[0], self.table.shape[1]), dtype=self.table.dtype)
        inside = ids < self.table.shape[0]
        out[inside] = self.table[ids[inside]]
        return out

    def finish(self) -> Iterator[dict[str, Any]]:
        """Write the table (if asked) and yield the summary."""
        self._answer_queries()
        if self.socket is not None:
            self.socket.close(linger=0)
            self.socket = None
        n = self.live.shape[0]
        table = self.table[:n]
        if self.out_path is not None:
            _save_npy(self.out_path, table)
        live = np.flatnonzero(self.live)
        yield {
            "live_nodes": int(live.size),
            "embedding_dim": int(table.shape[1]) if table.ndim == 2 else 0,
            "applied_updates": self.applied_updates,
            "watermark": self.watermark,
            "flushes": self.flushes,
            "rows_received": self.rows,
            "latency_histogram_ms": self.histogram,
            "first_arrival_ms": self.first_arrival_ms,
            "last_flush_ms": self.last_flush_ms,
            "digest": embedding_digest(table[live]),
            "sample_nodes": live[: self.sample],
            "sample_embeddings": table[live[: self.sample]],
            "embeddings_path": self.out_path or "",
        }

    # ------------------------------------------------------------------ state
    def snapshot(self) -> dict[str, Any]:
        """Table, live mask, counters and histogram."""
        return {
            "initialized": self.initialized,
            "table": self.table[: self.live.shape[0]].copy(),
            "live": self.live.copy(),
            "applied_updates": self.applied_updates,
            "watermark": self.watermark,
            "flushes": self.flushes,
            "rows": self.rows,
            "histogram": self.histogram.copy(),
            "first_arrival_ms": self.first_arrival_ms,
            "last_flush_ms": self.last_flush_ms,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`snapshot`."""
        self.initialized = bool(state["initialized"])
        self.table = np.array(state["table"])
        self.live = np.array(state["live"], dtype=np.bool_)
        self.applied_updates = int(state["applied_updates"])
        self.watermark = int(state["watermark"])
        self.flushes = int(state["flushes"])
        self.rows = int(state["rows"])
        self.histogram = np.array(state["histogram"], dtype=np.int64)
        self.first_arrival_ms = int(state["first_arrival_ms"])
        self.last_flush_ms = int(state["last_flush_ms"])


def embedding_digest(table: np.ndarray, decimals: int = 4) -> str:
    """A short hash of embeddings rounded to ``decimals`` (stable across runs)."""
    rounded = np.round(np.asarray(table, dtype=np.float64), decimals) + 0.0  # no -0.0
    return hashlib.sha256(rounded.tobytes()).hexdigest()[:16]


def _save_npy(path: str, table: np.ndarray) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.save(f, table)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


def percentile_ms(histogram: np.ndarray, q: float) -> float | None:
    """The ``q``-th percentile (0-100) of a 1-ms latency histogram (None if empty)."""
    total = int(histogram.sum())
    if total == 0:
        return None
    rank = int(np.ceil(q / 100 * total))
    return float(np.searchsorted(np.cumsum(histogram), max(rank, 1)))


def summarize_stream(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """The job outputs from the sink's summary: counts, rates, latency, a sample."""
    s = summaries[0] if summaries else {}
    if not s:
        return {"applied_updates": 0}
    hist = np.asarray(s["latency_histogram_ms"])
    span_ms = max(int(s["last_flush_ms"]) - int(s["first_arrival_ms"]), 1)
    updates = int(s["applied_updates"])
    rate = updates / (span_ms / 1000) if s["first_arrival_ms"] >= 0 else 0.0
    sample = {
        str(int(node)): [round(float(v), 5) for v in row[:4]]
        for node, row in zip(s["sample_nodes"], s["sample_embeddings"], strict=True)
    }
    return {
        "applied_updates": updates,
        "live_nodes": int(s["live_nodes"]),
        "embedding_dim": int(s["embedding_dim"]),
        "flushes": int(s["flushes"]),
        "watermark": int(s["watermark"]),
        "updates_per_s": round(rate, 1),
        "latency_p50_ms": percentile_ms(hist, 50),
        "latency_p90_ms": percentile_ms(hist, 90),
        "latency_p99_ms": percentile_ms(hist, 99),
        "latency_max_ms": percentile_ms(hist, 100),
        "embedding_digest": str(s["digest"]),
        "embedding_sample": sample,
        "embeddings_path": str(s["embeddings_path"]),
    }
