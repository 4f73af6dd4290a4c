"""Exactly-once acceptance runs: randomized chaos trials, and the real job killed.

Usage (from the repository root)::

    # >= 200 seeded trials: windows 1/2/8/32, batch sizes, job and producer kills,
    # a delaying/reordering/lossy link; prints totals (runs, kills, lost, doubled)
    .venv/bin/python benchmarks/operators/streaming/run_chaos.py trials --runs 200

    # strata ingest FILE --rate 2500 --batch-rows 10 into jobs/stream_ingest.py,
    # the job kill -9'd three times and resumed; applied_updates and embeddings
    # against an uninterrupted run over the same file
    .venv/bin/python benchmarks/operators/streaming/run_chaos.py job \
        --rows 15000 --rate 2500 --batch-rows 10 --kills 2250,6750,12000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from strata.operators.streaming.chaos import (
    CommandTrial,
    free_endpoint,
    run_trials,
    summary,
    to_json,
)

ROOT = Path(__file__).resolve().parents[3]
STRATA = str(Path(sys.executable).parent / "strata")


def trials(runs: int, first_seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="chaos-") as directory:
        checks = []
        for plan, result, check in run_trials(
            range(first_seed, first_seed + runs), directory
        ):
            checks.append((plan, result, check))
            if not check.ok:
                print(f"FAILED {plan}: {check}", file=sys.stderr, flush=True)
        return summary(checks)


def _job_argv(directory: Path, sets: dict[str, object], report: Path) -> list[str]:
    argv = [STRATA, "run", "jobs/stream_ingest.py", "--quiet", "--report", str(report)]
    for key, value in sets.items():
        argv += ["--set", f"{key}={value}"]
    return argv


def job(rows: int, rate: float, batch_rows: int, kills: tuple[int, ...]) -> dict:
    from strata.jobs import stream_ingest
    from strata.operators.streaming import UpdateStream
    from strata.operators.streaming.update_files import write_update_file

    directory = Path(tempfile.mkdtemp(prefix="chaos-job-"))
    graph = "sbm:n=20000,blocks=8,features=32,degree=10,seed=0"  # the job's default
    setup = stream_ingest.TrainedSetup(graph, "sage", 64, 2, 0, None, 0, 1)
    dataset, x = setup.features()
    stream = UpdateStream(dataset.graph, feature_dim=x.shape[1], seed=11)
    updates = write_update_file(
        list(stream.batches(rows, 1000)), directory / "updates.parquet"
    )
    endpoint = free_endpoint()
    chaos_out = directory / "chaos.npy"
    report = directory / "report.json"
    sets = {
        "endpoint": endpoint,
        "log_dir": directory / "log",
        "embeddings_out": chaos_out,
        "dtype": "float64",
    }
    checkpoints = ["--checkpoint-dir", str(directory / "ckpt"), "--checkpoint-every"]
    job_argv = [*_job_argv(directory, sets, report), *checkpoints, "20"]
    producer = [STRATA, "ingest", endpoint, str(updates), "--rate", str(rate)]
    producer += ["--batch-rows", str(batch_rows), "--producer", "chaos"]
    trial = CommandTrial(
        job_argv,
        producer,
        directory / "log" / "log",
        kills,
        cwd=str(ROOT),
        output=directory / "stderr.txt",
    )
    result = trial.run()
    outputs = json.loads(report.read_text())["outputs"]
    clean_out = directory / "clean.npy"
    clean_report = directory / "clean.json"
    started = time.monotonic()
    subprocess.run(
        _job_argv(
            directory,
            {"updates_file": updates, "embeddings_out": clean_out, "dtype": "float64"},
            clean_report,
        ),
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    chaos, clean = np.load(chaos_out), np.load(clean_out)
    return {
        "rows_in_file": rows,
        "rate_rows_per_s": rate,
        "batch_rows": batch_rows,
        "kills": result.kills,
        "logged_at_kill": result.logged_at_kill,
        "job_runs": result.job_runs,
        "producer_runs": result.producer_runs,
        "producer_exits": result.producer_exits,
        "applied_updates": outputs["applied_updates"],
        "resumes": json.loads(report.read_text())["checkpoint"].get("resumes"),
        "embeddings_shape": list(chaos.shape),
        "max_abs_diff_vs_uninterrupted": float(np.abs(chaos - clean).max()),
        "uninterrupted_applied_updates": json.loads(clean_report.read_text())[
            "outputs"
        ]["applied_updates"],
        "seconds": round(result.seconds, 1),
        "uninterrupted_seconds": round(time.monotonic() - started, 1),
        "directory": str(directory),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("experiment", choices=["trials", "job"])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=15_000)
    parser.add_argument("--rate", type=float, default=2500)
    parser.add_argument("--batch-rows", type=int, default=10)
    parser.add_argument("--kills", default="2250,6750,12000")
    args = parser.parse_args()
    started = time.time()
    if args.experiment == "trials":
        result = trials(args.runs, args.first_seed)
    else:
        kills = tuple(int(k) for k in args.kills.split(","))
        result = job(args.rows, args.rate, args.batch_rows, kills)
    result["wall_s"] = round(time.time() - started, 1)
    print(to_json(result))


if __name__ == "__main__":
    main()
