"""Does the planner predict what it measures? `strata plan --measure`, three graphs.

For three graphs of different shape it runs ``strata plan JOB --measure
--recalibrate``: the planner costs every candidate with this machine's
calibration (measured afresh before each graph, so prediction and measurement
see the same machine: this 2-core machine is shared and its load moves),
then trains the chosen plan and the fastest rejected one for 6 epochs each, in
fresh processes. Each row compares a predicted figure (``strata``) with the
measured one (``peer`` = measured; median of epochs 2..6 and their spread):

* Cora (Planetoid, 2,708 nodes; ``jobs/cora_gcn.py``, GCN 16 hidden);
* RMAT scale 16 (65,536 nodes, 1M edges, power-law; GCN 128 hidden);
* SBM (65,536 nodes, 16 blocks, mean degree 16, near-regular; GCN 128 hidden).

Epoch seconds are an epoch record's ``seconds`` (training step and evaluation);
peak memory is the training process's peak RSS after its data loaded plus its
gang workers' peaks. Target: predicted / measured within 0.75..1.25. Writes
``benchmarks/results/planner.json``::

    .venv/bin/python -m pytest benchmarks/operators/test_planner.py \
        -p no:cacheprovider -s -m "slow or not slow"
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "planner.json"
COMMAND = (
    ".venv/bin/python -m pytest benchmarks/operators/test_planner.py "
    '-p no:cacheprovider -s -m "slow or not slow"'
)
WIDE = ["--set", "hidden=128", "--set", "train.threads=1"]
GRAPHS: list[tuple[str, str, list[str]]] = [
    ("Cora (2,708 nodes, 10,556 edges), GCN 16 hidden", "jobs/cora_gcn.py", []),
    (
        "RMAT-16 (65,536 nodes, 1M edges, power-law), GCN 128 hidden",
        "jobs/fullgraph_dist.py",
        ["--set", "graph=rmat:scale=16,features=128", *WIDE],
    ),
    (
        "SBM (65,536 nodes, 16 blocks, degree 16), GCN 128 hidden",
        "jobs/fullgraph_dist.py",
        ["--set", "graph=sbm:n=65536,blocks=16,degree=16,features=128", *WIDE],
    ),
]
LOW, HIGH = 0.75, 1.25


def plan_and_measure(job: str, args: list[str], recalibrate: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "plan.json"
        strata = Path(sys.executable).parent / "strata"
        argv = [str(strata), "plan", job]
        argv += [*args, "--measure", "--epochs", "6", "--json", str(out)]
        if recalibrate:
            argv.append("--recalibrate")
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
        print(done.stdout)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(out.read_text())


def rows_for(work: str, job: str, args: list[str], data: dict[str, Any]) -> list[dict]:
    command = " ".join(
        ["strata plan", job, *args, "--measure --epochs 6 --recalibrate"]
    )
    rows = []
    for run in data["measured"]:
        pred, meas = run["predicted"], run["measured"]
        role = "chosen" if run["chosen"] else "rejected"
        figures = [
            ("epoch seconds", pred["epoch_s"], meas["epoch_s"], meas["epoch_spread"]),
            (
                "peak MB",
                pred["peak_bytes"] / 2**20,
                meas["peak_bytes"] / 2**20,
                [meas["peak_bytes"] / 2**20] * 2,
            ),
        ]
        for metric, predicted, measured, spread in figures:
            ratio = predicted / measured
            rows.append(
                {
                    "work": f"{work}: {role} plan {run['plan']}",
                    "metric": metric,
                    "better": "lower",
                    "strata": predicted,
                    "strata_spread": [predicted, predicted],
                    "peer": "measured",
                    "peer_value": measured,
                    "peer_spread": list(spread),
                    "ratio": ratio,
                    "target": f"{LOW}..{HIGH}",
                    "met": LOW <= ratio <= HIGH,
                    "command": f"{COMMAND}  # runs: {command}",
                    "note": (
                        f"predicted train {pred['train_s']:.4f} s + eval "
                        f"{pred['eval_s']:.4f} s; measured train {meas['train_s']:.4f}"
                        f" s + eval {meas['eval_s']:.4f} s; chosen "
                        f"{data['chosen']}; calibration {data['calibration']}"
                        if metric == "epoch seconds"
                        else "peak RSS of the training process after loading "
                        "+ gang workers' peaks (one run: no spread); predicted "
                        "parts MB: "
                        + ", ".join(
                            f"{k} {v / 2**20:.0f}" for k, v in pred["memory"].items()
                        )
                    ),
                }
            )
    return rows


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_planner_predicts_what_it_measures() -> None:
    rows: list[dict] = []
    for work, job, args in GRAPHS:
        data = plan_and_measure(job, args, recalibrate=True)
        rows += rows_for(work, job, args, data)
    RESULTS.write_text(
        json.dumps({"topic": "planner", "rows": rows}, indent=2) + "\n",
        encoding="utf-8",
    )
    for row in rows:
        print(
            f"{row['work']:90} {row['metric']:14} pred {row['strata']:9.4f} "
            f"meas {row['peer_value']:9.4f} ratio {row['ratio']:.2f} "
            f"{'met' if row['met'] else 'NOT met'}"
        )
