"""Streaming graph updates, incremental GNN inference (D3-GNN): current embeddings.

The job loads a graph (a graph spec; default a generated SBM with community
features and labels) and a trained model (it trains a small GraphSAGE or GCN with
the batch layers for ``epochs`` full-batch epochs, or loads ``model_path``), then
keeps every node's embedding equal to a full forward pass while updates stream in::

    updates (LogSource | ZmqIngest) -> [gnn_fanout] -> gnn_layer1 -> gnn_layer2
        -> embeddings (EmbeddingSink) -> summary (outputs)

Where updates come from:

* default: a seeded generated stream (``num_updates`` rows, ``mix`` of add / remove
  / set-feature) is written to the update log, then replayed: self-contained;
* ``updates_file``: a Parquet/CSV update file is written to the log, then replayed;
* ``endpoint``: the job serves the ingestion endpoint (``ZmqIngest``), logging and
  acknowledging batches from ``strata ingest ENDPOINT FILE`` or any client, until
  ``max_updates`` rows, every producer's ``end``, or ``idle_timeout_s``.

The outputs report update throughput (rows per second from the first arrival to
the last flush), event-to-embedding latency percentiles, the window's message
counts per layer (``steps`` counters in the run report), a digest and a sample of
the final embeddings; ``embeddings_out`` receives all of them (``.npy``), and with
``query_endpoint`` the running job answers queries of current embeddings
(``strata.operators.streaming.client.query_embeddings``)::

    strata run jobs/stream_ingest.py
    strata run jobs/stream_ingest.py --set model=gcn --set window=session:20@200
    strata run jobs/stream_ingest.py --set shards=2 --executor process
    strata run jobs/stream_ingest.py --set endpoint=tcp://127.0.0.1:5555 \\
        --set log_dir=/tmp/strata-log --checkpoint-dir /tmp/ckpt --checkpoint-every 50
    strata ingest tcp://127.0.0.1:5555 updates.parquet     # from another shell

For a resumable run (``--checkpoint-dir`` ... ``--resume``) give ``log_dir``: the log
is the replay buffer recovery reads from.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from strata.engine import Pipeline, at_least, between
from strata.operators.streaming import (
    EmbeddingSink,
    LogSource,
    UpdateStream,
    streaming_gnn,
    summarize_stream,
)
from strata.operators.streaming.ingest import ZmqIngest
from strata.operators.streaming.training import TrainedSetup
from strata.operators.streaming.update_files import read_update_file, update_batches
from strata.operators.streaming.windows import parse_window
from strata.storage import UpdateLog

__all__ = [
    "PreparedLogSource",
    "SourceConfig",
    "StreamIngestConfig",
    "TrainedSetup",
    "build",
    "render",
]


class PreparedLogSource(LogSource):
    """A LogSource that first writes its updates into the log (idempotently).

    Batches go in as producer ``"job"`` with ``seq`` = batch index, so preparing
    again after a crash (``--resume``) logs nothing twice.
    """

    def __init__(
        self,
        path: str,
        *,
        setup: TrainedSetup,
        updates_file: str | None,
        num_updates: int,
        batch_rows: int,
        mix: tuple[float, float, float],
        new_nodes: float,
        seed: int,
    ) -> None:
        super().__init__(path, setup=setup)
        self.trained = setup
        self.updates_file = updates_file
        self.num_updates = num_updates
        self.batch_rows = batch_rows
        self.mix = mix
        self.new_nodes = new_nodes
        self.seed = seed

    def _batches(self) -> Any:
        if self.updates_file:
            return update_batches(read_update_file(self.updates_file), self.batch_rows)
        dataset, x = self.trained.features()
        stream = UpdateStream(
            dataset.graph,
            feature_dim=x.shape[1],
            mix=self.mix,
            new_nodes=self.new_nodes,
            seed=self.seed + 1,
        )
        return stream.batches(self.num_updates, self.batch_rows)

    def finish(self) -> Any:
        """Write the updates to the log (once), then replay it."""
        if not self.path:  # no log_dir: a fresh temporary log (not resumable)
            self.path = str(Path(tempfile.mkdtemp(prefix="strata-stream-")) / "log")
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        with UpdateLog(self.path) as log:
            if log.high_water("job") is None:
                items = [(b, "job", i) for i, b in enumerate(self._batches())]
                for start in range(0, len(items), 256):
                    log.append_many(items[start : start + 256])
        yield from super().finish()


DEFAULT_GRAPH = "sbm:n=20000,blocks=8,features=32,degree=10,seed=0"


@dataclass(frozen=True, slots=True)
class SourceConfig:
    """Where the updates come from.

    Attributes:
        endpoint: serve this ingestion endpoint (None: replay a file or a
            generated stream).
        updates_file: a Parquet/CSV update file to replay (None: generate).
        num_updates: rows of the generated stream.
        batch_rows: rows per replayed batch.
        mix: shares of add-edge, remove-edge and set-feature rows (generated).
        new_nodes: share of set-feature rows that create a node (generated).
        log_dir: the update log's directory: the replay buffer a resumed run
            reads (None: a temporary one, not resumable).
        max_updates: with an endpoint, stop once the log holds this many rows.
        idle_timeout_s: with an endpoint, stop after this long without a request.
    """

    endpoint: str | None = None
    updates_file: Path | None = None
    num_updates: int = 20_000
    batch_rows: int = 500
    mix: tuple[float, float, float] = (0.7, 0.2, 0.1)
    new_nodes: float = 0.1
    log_dir: Path | None = None
    max_updates: int | None = None
    idle_timeout_s: float | None = None

    def __post_init__(self) -> None:
        where = "SourceConfig"
        at_least(
            where,
            1,
            num_updates=self.num_updates,
            batch_rows=self.batch_rows,
            max_updates=self.max_updates,
        )
        at_least(where, 1e-3, idle_timeout_s=self.idle_timeout_s)
        between(where, 0, 1, new_nodes=self.new_nodes)


@dataclass(frozen=True, slots=True)
class StreamIngestConfig:
    """The job's parameters.

    Attributes:
        setup: the graph and the model trained on it (the ``init`` item).
        source: where the updates come from.
        window: when a layer flushes (``count:N``, ``session:MS@CAP``, ...).
        shards: shards of every layer step (keyed by vertex).
        embeddings_out: write the final embeddings here (``.npy``).
        query_endpoint: answer embedding queries here while running.
        dtype: precision of the stored inputs and emitted outputs.
    """

    setup: TrainedSetup = field(default_factory=lambda: TrainedSetup(DEFAULT_GRAPH))
    source: SourceConfig = field(default_factory=SourceConfig)
    window: str = "count:1000"
    shards: int = 1
    embeddings_out: Path | None = None
    query_endpoint: str | None = None
    dtype: Literal["float32", "float64"] = "float32"

    def __post_init__(self) -> None:
        at_least("StreamIngestConfig", 1, shards=self.shards)


#: The flat names of earlier versions.
ALIASES = {
    **{
        name: f"setup.{name}"
        for name in ("graph", "model", "hidden", "layers", "epochs", "model_path")
    },
    **{name: f"setup.{name}" for name in ("seed", "threads")},
    **{
        name: f"source.{name}"
        for name in (
            "endpoint",
            "updates_file",
            "num_updates",
            "batch_rows",
            "mix",
            "new_nodes",
            "log_dir",
            "max_updates",
            "idle_timeout_s",
        )
    },
}


def build(config: StreamIngestConfig) -> Pipeline:
    """Incremental GNN inference over a stream of graph updates (module docs)."""
    setup, src = config.setup, config.source
    log_path = str(src.log_dir / "log") if src.log_dir else ""
    p = Pipeline("stream-ingest")
    if src.endpoint:
        source: Any = ZmqIngest(
            log_path,
            src.endpoint,
            setup=setup,
            max_updates=src.max_updates,
            idle_timeout_s=src.idle_timeout_s,
        )
    else:
        source = PreparedLogSource(
            log_path,
            setup=setup,
            updates_file=None if src.updates_file is None else str(src.updates_file),
            num_updates=src.num_updates,
            batch_rows=src.batch_rows,
            mix=src.mix,
            new_nodes=src.new_nodes,
            seed=setup.seed,
        )
    p.step("updates", source)
    last = streaming_gnn(
        p,
        "gnn",
        "updates",
        num_layers=setup.layers,
        window=parse_window(config.window),
        shards=config.shards,
        dtype=config.dtype,
    )
    out = None if config.embeddings_out is None else str(config.embeddings_out)
    sink = EmbeddingSink(out, query_endpoint=config.query_endpoint)
    p.step("embeddings", sink, last)
    p.step("summary", summarize_stream, "embeddings")
    p.record("summary")
    return p


def render(outputs: dict[str, Any]) -> str:
    """The summary ``strata run`` prints."""
    lat = [outputs.get(f"latency_p{q}_ms") for q in (50, 90, 99)]
    lines = [
        f"applied {outputs['applied_updates']:,} updates in {outputs['flushes']:,} "
        f"flushes: {outputs['updates_per_s']:,.0f} updates/s, latency p50/p90/p99 "
        f"{lat[0]}/{lat[1]}/{lat[2]} ms",
        f"embeddings: {outputs['live_nodes']:,} nodes x {outputs['embedding_dim']} "
        f"(digest {outputs['embedding_digest']}, watermark {outputs['watermark']})",
    ]
    for node, row in outputs["embedding_sample"].items():
        lines.append(f"  node {node:>8}: {row} ...")
    if outputs.get("embeddings_path"):
        lines.append(f"  all embeddings: {outputs['embeddings_path']}")
    return "\n".join(lines)
