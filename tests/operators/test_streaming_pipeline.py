"""streaming_gnn as a pipeline: every executor, shards, checkpoints and resume."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

from strata.engine import CheckpointConfig, Operator, Pipeline, RunConfig, execute
from strata.engine.testing import ListSink, ListSource, run
from strata.operators.streaming import (
    Count,
    EmbeddingSink,
    LogSource,
    Session,
    StaticSetup,
    StreamingGNN,
    StreamingModel,
    UpdateStream,
    init_item,
    streaming_gnn,
    summarize_stream,
)
from strata.storage import UpdateLog
from tests.operators.streaming_helpers import (
    IN_DIM,
    Oracle,
    features,
    make_model,
    one_torch_thread,  # noqa: F401 (fixture)
    rmat_graph,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NUM_UPDATES, BATCH = 1200, 100


class Tripwire(Operator[dict, dict]):
    """Passes items on; at item ``at``, once a checkpoint is complete, fails (once).

    Barriers it forwarded already reach the sink, so waiting here for a
    checkpoint to complete cannot block that checkpoint.
    """

    def __init__(self, marker: str, checkpoints: str, at: int) -> None:
        self.marker = marker
        self.checkpoints = checkpoints
        self.at = at

    def open(self, ctx) -> None:
        self.seen = 0

    def process(self, item: dict) -> Iterable[dict]:
        self.seen += 1
        if self.seen == self.at and not Path(self.marker).exists():
            deadline = time.monotonic() + 30
            while not list(Path(self.checkpoints).glob("checkpoint-*/MANIFEST.json")):
                assert time.monotonic() < deadline, "no checkpoint completed"
                time.sleep(0.01)
            Path(self.marker).touch()
            raise RuntimeError("tripwire: a simulated crash")
        return (item,)


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    """A small graph, a model, and a log of 1200 updates (20% deletions)."""
    graph = rmat_graph(scale=7, seed=2)
    x = features(graph.num_nodes, seed=2)
    model = make_model("sage-mean", seed=2)
    path = tmp_path_factory.mktemp("stream") / "log"
    batches = list(
        UpdateStream(graph, feature_dim=IN_DIM, new_nodes=0.2, seed=2).batches(
            NUM_UPDATES, BATCH
        )
    )
    with UpdateLog(path) as log:
        for i, batch in enumerate(batches):
            log.append(batch, producer_id="test", seq=i)
    oracle = Oracle(graph, x)
    for batch in batches:
        oracle.apply(batch)
    nodes, expected = oracle.embeddings(model)
    return {
        "graph": graph,
        "x": x,
        "model": model,
        "log": str(path),
        "batches": batches,
        "nodes": nodes,
        "expected": expected,
    }


def pipeline(stream, out: Path, *, window=None, shards=1, tripwire=None) -> Pipeline:
    setup = StaticSetup(
        stream["graph"], stream["x"], StreamingModel.from_module(stream["model"])
    )
    p = Pipeline("stream-test")
    p.step("updates", LogSource(stream["log"], setup=setup))
    last = streaming_gnn(
        p, "gnn", "updates", num_layers=2, window=window, shards=shards, dtype="float64"
    )
    if tripwire is not None:
        p.step("trip", tripwire, last)
        last = "trip"
    p.step("embeddings", EmbeddingSink(str(out)), last)
    p.step("summary", summarize_stream, "embeddings")
    p.record("summary")
    return p


def check(stream, out: Path, outputs: dict) -> None:
    table = np.load(out)
    np.testing.assert_allclose(table[stream["nodes"]], stream["expected"], atol=1e-9)
    assert outputs["applied_updates"] == NUM_UPDATES
    assert outputs["watermark"] == NUM_UPDATES
    assert outputs["live_nodes"] == len(stream["nodes"])


def test_pipeline_equals_full_recompute(stream, executor, tmp_path) -> None:
    out = tmp_path / "emb.npy"
    result = execute(pipeline(stream, out, window=Count(250)), executor)
    check(stream, out, result.outputs)
    layer1 = result.report.steps["gnn_layer1"].counters
    assert layer1["updates"] == NUM_UPDATES
    assert layer1["flushes"] == NUM_UPDATES // 250 + 1  # the last, empty, at the end


@pytest.mark.multiprocess
def test_two_shards_on_processes_equal_one(stream, tmp_path) -> None:
    out = tmp_path / "emb.npy"
    result = execute(
        pipeline(stream, out, window=Session(gap_ms=2), shards=2), "process"
    )
    check(stream, out, result.outputs)


def test_resume_after_a_failure_applies_every_update_once(stream, tmp_path) -> None:
    out = tmp_path / "emb.npy"
    trip = Tripwire(str(tmp_path / "tripped"), str(tmp_path / "ckpt"), at=7)
    config = RunConfig(checkpoint=CheckpointConfig(tmp_path / "ckpt", every_items=3))
    p = pipeline(stream, out, window=Count(100), tripwire=trip)
    first = execute(p, "local", config=config, check=False)
    assert first.error is not None
    assert first.report.checkpoint.completed >= 1
    resumed = RunConfig(checkpoint=config.checkpoint, resume=True)
    result = execute(p, "local", config=resumed)
    assert result.report.checkpoint.resumed_from is not None  # not from the start
    check(stream, out, result.outputs)


def test_in_process_cascade_matches_the_pipeline(stream, tmp_path) -> None:
    gnn = StreamingGNN(StreamingModel.from_module(stream["model"]), dtype=np.float64)
    gnn.initialize(stream["graph"], stream["x"])
    for batch in stream["batches"]:
        gnn.apply_updates(batch)
    out = tmp_path / "emb.npy"
    execute(pipeline(stream, out), "local")
    np.testing.assert_allclose(
        np.load(out)[stream["nodes"]], gnn.embeddings(stream["nodes"]), atol=1e-12
    )


def test_ticks_close_idle_sessions_before_the_stream_ends(stream) -> None:
    setup = StaticSetup(
        stream["graph"], stream["x"], StreamingModel.from_module(stream["model"])
    )
    batch = stream["batches"][0].slice(0, 10)
    items = [
        init_item(setup.load()),
        {"kind": "updates", "batch": batch, "offset": 0, "arrival_ms": 0},
        {"kind": "tick", "now_ms": 10**12},  # far past every session's gap
        {
            "kind": "updates",
            "batch": stream["batches"][0].slice(10, 5),
            "offset": 10,
            "arrival_ms": 0,
        },
    ]
    p = Pipeline("ticks")
    p.step("source", ListSource(items))
    last = streaming_gnn(p, "gnn", "source", num_layers=2, window=Session(gap_ms=10**6))
    p.step("out", ListSink(), last)
    kinds = [
        (item["kind"], item.get("delta", {}).get("updates")) for item in run(p)["out"]
    ]
    # the tick flushed the first 10 updates; the last 5 flushed at the end
    assert kinds == [("init", None), ("delta", 10), ("tick", None), ("delta", 5)]
