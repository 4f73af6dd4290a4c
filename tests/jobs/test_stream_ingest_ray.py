"""jobs/stream_ingest.py on the ray executor: an actor killed mid-stream.

The job replays an update file through checkpointed streaming GNN layers; once a
checkpoint is complete, the actor of ``gnn_layer1`` is killed (``ray.kill``: its
process dies at once). The executor resumes the run from that checkpoint, and
every update is applied exactly once: the count, the update log and the final
embeddings (against a crash-free run and a full recompute) all agree.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from test_stream_ingest import GRAPH, SMALL, expected_embeddings, stream_job

from strata.engine import CheckpointConfig, RunConfig, execute
from strata.operators.streaming import UpdateStream
from strata.operators.streaming.update_files import write_update_file
from strata.storage import UpdateLog

pytestmark = [
    pytest.mark.ray,
    pytest.mark.multiprocess,
    pytest.mark.usefixtures("ray_session"),
]

UPDATES = 3000


@pytest.fixture(scope="module")
def updates_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from strata.jobs import stream_ingest

    setup = stream_ingest.TrainedSetup(GRAPH, "sage", 16, 2, 0, None, 1, 1)
    dataset, x = setup.features()
    stream = UpdateStream(dataset.graph, feature_dim=x.shape[1], new_nodes=0.2, seed=9)
    path = tmp_path_factory.mktemp("updates") / "updates.parquet"
    return write_update_file(list(stream.batches(UPDATES, 100)), path)


def test_actor_killed_mid_stream_then_every_update_applied_once(
    updates_file: Path, tmp_path: Path, ray_session: ModuleType
) -> None:
    from strata.engine.executors.ray_driver import RayExecutor

    out = tmp_path / "emb.npy"
    ckpt = tmp_path / "ckpt"
    job = stream_job(
        updates_file=str(updates_file),
        log_dir=str(tmp_path / "log"),
        batch_rows=10,  # 300 batches: the kill lands mid-stream
        window="count:200",
        embeddings_out=str(out),
        **SMALL,
    )
    executor = RayExecutor()  # default: up to 2 restarts
    killed: list[str] = []

    def kill_after_first_checkpoint() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            actor = executor.actors.get("gnn_layer1")
            if actor is not None and any(ckpt.glob("checkpoint-*/MANIFEST.json")):
                ray_session.kill(actor, no_restart=True)
                killed.append("gnn_layer1")
                return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_after_first_checkpoint, daemon=True)
    killer.start()
    config = RunConfig(checkpoint=CheckpointConfig(ckpt, every_items=5))
    result = execute(job, executor, config=config)
    killer.join(timeout=10)
    assert killed == ["gnn_layer1"], "the kill landed while the job ran"
    assert executor.restarts == 1
    report = result.report.checkpoint
    assert report is not None
    assert report.resumed_from is not None
    assert result.outputs["applied_updates"] == UPDATES  # none lost, none twice
    with UpdateLog(tmp_path / "log" / "log", readonly=True) as log:
        assert log.next_offset == UPDATES  # logged once
    nodes, expected = expected_embeddings(updates_file)
    np.testing.assert_allclose(np.load(out)[nodes], expected, atol=1e-6)
    clean = tmp_path / "clean.npy"  # a crash-free local run over the same updates
    execute(
        stream_job(updates_file=str(updates_file), embeddings_out=str(clean), **SMALL),
        "local",
    )
    np.testing.assert_allclose(np.load(out), np.load(clean), rtol=0, atol=1e-12)
