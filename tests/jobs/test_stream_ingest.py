"""jobs/stream_ingest.py: embeddings equal a full recompute; crash, resume, finish."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from strata.engine import Pipeline, execute
from strata.engine.job import job_config
from strata.jobs import stream_ingest
from strata.operators.cli.main import main
from strata.operators.streaming import UpdateStream
from strata.operators.streaming.chaos import CommandTrial
from strata.operators.streaming.client import IngestClient
from strata.operators.streaming.update_files import read_update_file, write_update_file
from strata.storage import UpdateLog
from tests.operators.streaming_helpers import Oracle, free_endpoint

ROOT = Path(__file__).resolve().parents[2]
GRAPH = "sbm:n=400,blocks=4,features=8,degree=6,seed=1"
SMALL = {"graph": GRAPH, "hidden": 16, "epochs": 3, "dtype": "float64", "seed": 1}


def stream_job(**params: object) -> Pipeline:
    """The job built from flat parameters (its aliases), as ``--set`` would."""
    return stream_ingest.build(job_config(stream_ingest, **params))


def expected_embeddings(updates_file: Path) -> tuple[np.ndarray, np.ndarray]:
    """Full recompute of the job's model on the graph after every update."""
    setup = stream_ingest.TrainedSetup(GRAPH, "sage", 16, 2, 3, None, 1, 1)
    dataset, x = setup.features()
    model = setup.trained_model(dataset, x)  # the trainers' code, as the job
    oracle = Oracle(dataset.graph, x)
    for batch in read_update_file(updates_file).to_batches():
        oracle.apply(batch)
    return oracle.embeddings(model)


@pytest.fixture(scope="module")
def updates_file(tmp_path_factory) -> Path:
    setup = stream_ingest.TrainedSetup(GRAPH, "sage", 16, 2, 0, None, 1, 1)
    dataset, x = setup.features()
    stream = UpdateStream(dataset.graph, feature_dim=x.shape[1], new_nodes=0.2, seed=9)
    path = tmp_path_factory.mktemp("updates") / "updates.parquet"
    return write_update_file(list(stream.batches(3000, 100)), path)


def test_replayed_file_gives_full_recompute_embeddings(updates_file, tmp_path) -> None:
    out = tmp_path / "emb.npy"
    p = stream_job(
        updates_file=str(updates_file),
        window="count:500",
        embeddings_out=str(out),
        **SMALL,
    )
    result = execute(p, "local")
    assert result.outputs["applied_updates"] == 3000
    assert result.outputs["latency_p50_ms"] is not None
    nodes, expected = expected_embeddings(updates_file)
    np.testing.assert_allclose(np.load(out)[nodes], expected, atol=1e-6)


#: Rates and latencies: how fast this executor ran, not what the job computed.
TIMED = ("updates_per_s", "latency_")


def test_outputs_identical_on_every_executor(
    other_executor: str, updates_file: Path, tmp_path: Path
) -> None:
    outputs, embeddings = {}, {}
    for name in ("local", other_executor):
        out = tmp_path / f"{name}.npy"
        p = stream_job(
            updates_file=str(updates_file),
            window="count:500",
            embeddings_out=str(out),
            **SMALL,
        )
        result = execute(p, name).outputs
        assert result.pop("embeddings_path") == str(out)
        outputs[name] = {k: v for k, v in result.items() if not k.startswith(TIMED)}
        embeddings[name] = np.load(out)
    assert outputs[other_executor] == outputs["local"]  # the digest among them
    assert outputs["local"]["applied_updates"] == 3000
    np.testing.assert_array_equal(embeddings[other_executor], embeddings["local"])


def test_default_run_through_the_cli(tmp_path, capsys) -> None:
    code = main(
        [
            "run",
            "jobs/stream_ingest.py",
            "--quiet",
            "--set",
            f"graph={GRAPH}",
            "--set",
            "num_updates=2000",
            "--set",
            "epochs=2",
            "--report",
            str(tmp_path / "report.json"),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "applied 2,000 updates" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["outputs"]["applied_updates"] == 2000
    assert report["steps"]["gnn_layer1"]["counters"]["agg_rows"] > 0


def _job_argv(endpoint: str, tmp_path: Path, out: Path, executor: str) -> list[str]:
    sets = {
        **SMALL,
        "endpoint": endpoint,
        "log_dir": str(tmp_path / "log"),
        "max_updates": 3000,
        "embeddings_out": str(out),
        "window": "count:200",
    }
    args = [
        str(Path(sys.executable).parent / "strata"),
        "run",
        "jobs/stream_ingest.py",
        "--quiet",
        "--report",
        str(tmp_path / "report.json"),
        "--checkpoint-dir",
        str(tmp_path / "ckpt"),
        "--checkpoint-every",
        "4",
        "--executor",
        executor,
    ]
    for key, value in sets.items():
        args += ["--set", f"{key}={value}"]
    return args


def _job(
    endpoint: str, tmp_path: Path, out: Path, executor: str, *extra: str
) -> subprocess.Popen:
    return subprocess.Popen(
        [*_job_argv(endpoint, tmp_path, out, executor), *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: SIGKILL takes it all
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "executor", ["local", pytest.param("process", marks=pytest.mark.multiprocess)]
)
def test_sigkill_mid_stream_then_resume_applies_every_update_once(
    updates_file, tmp_path, executor
):
    """Kill -9 the job mid-stream; restart from its checkpoint and log; compare.

    The whole process group dies at once (coordinator, and on the process
    executor its fork server and workers, the ingest endpoint among them), as
    in a machine crash; the restarted job starts new ones.
    """
    endpoint = free_endpoint()
    out = tmp_path / "emb.npy"
    batches = read_update_file(updates_file).to_batches(max_chunksize=100)
    acked = {"rows": 0, "dups": 0}
    gate = threading.Event()

    def gated():  # a third of the stream, then the rest once the test says so
        yield from batches[:10]
        gate.wait(timeout=240)
        yield from batches[10:]

    def produce() -> None:  # resends until acknowledged, across the crash
        with IngestClient(endpoint, "producer") as client:
            report = client.send_all(gated(), window=2, timeout_s=0.5, deadline_s=300)
        acked["rows"], acked["dups"] = report.acked_rows, report.duplicate_rows

    job = _job(endpoint, tmp_path, out, executor)
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # kill once a checkpoint exists and the
        done = list((tmp_path / "ckpt").glob("checkpoint-*/MANIFEST.json"))
        logged = _logged(tmp_path / "log" / "log")
        if done and logged >= 1000:  # log holds a third of the stream
            break
        assert job.poll() is None, job.communicate()
        time.sleep(0.05)
    # The rest of the stream starts flowing as the job dies: the kill lands
    # mid-stream whatever the executor's speed (a process job checkpoints later).
    gate.set()
    os.killpg(job.pid, signal.SIGKILL)
    job.communicate()
    assert _logged(tmp_path / "log" / "log") < 3000  # it died mid-stream
    resumed = _job(endpoint, tmp_path, out, executor, "--resume")
    _stdout, stderr = resumed.communicate(timeout=300)
    producer.join(timeout=60)
    assert resumed.returncode == 0, stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["checkpoint"]["resumed_from"] is not None
    assert report["outputs"]["applied_updates"] == 3000  # none lost, none twice
    # Every batch acknowledged once: as new, or (its first ack lost in the crash)
    # as a duplicate of what the log already held; ...
    assert acked["rows"] + acked["dups"] == 3000
    with UpdateLog(tmp_path / "log" / "log", readonly=True) as log:
        assert log.next_offset == 3000  # ... and logged once
    nodes, expected = expected_embeddings(updates_file)
    np.testing.assert_allclose(np.load(out)[nodes], expected, atol=1e-6)
    clean = tmp_path / "clean.npy"  # a crash-free run over the same updates
    execute(
        stream_job(updates_file=str(updates_file), embeddings_out=str(clean), **SMALL),
        "local",
    )
    np.testing.assert_allclose(np.load(out), np.load(clean), rtol=0, atol=1e-12)


def _logged(path: Path) -> int:
    try:
        with UpdateLog(path, readonly=True) as log:
            return log.next_offset
    except Exception:  # not created yet
        return 0


@pytest.mark.slow
@pytest.mark.multiprocess
def test_strata_ingest_at_a_steady_rate_survives_three_job_kills(
    updates_file, tmp_path
) -> None:
    """The reported scenario with real commands: ``strata ingest FILE --rate R
    --batch-rows 10`` (default window 8) feeding the job, which is kill -9'd three
    times mid-stream and resumed each time; the producer is rerun whenever it
    gives up. Every row is applied once, and the embeddings equal a crash-free
    run over the same file."""
    endpoint = free_endpoint()
    out = tmp_path / "emb.npy"
    strata = str(Path(sys.executable).parent / "strata")
    producer = [strata, "ingest", endpoint, str(updates_file), "--rate", "1500"]
    producer += ["--batch-rows", "10", "--producer", "steady"]
    trial = CommandTrial(
        _job_argv(endpoint, tmp_path, out, "local"),
        producer,
        tmp_path / "log" / "log",
        kill_at_rows=(600, 1500, 2400),
        cwd=str(ROOT),
    )
    result = trial.run()
    assert result.kills == 3
    assert all(
        a < b for a, b in zip(result.logged_at_kill, (1000, 2000, 3000), strict=True)
    )
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["outputs"]["applied_updates"] == 3000  # the file's rows, once
    assert report["checkpoint"]["resumes"] == 3
    with UpdateLog(tmp_path / "log" / "log", readonly=True) as log:
        assert log.next_offset == 3000
    clean = tmp_path / "clean.npy"  # a crash-free run over the same updates
    execute(
        stream_job(updates_file=str(updates_file), embeddings_out=str(clean), **SMALL),
        "local",
    )
    np.testing.assert_allclose(np.load(out), np.load(clean), rtol=0, atol=1e-12)
