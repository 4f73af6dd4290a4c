"""How long the ``strata`` command takes before it works, warm and on a fresh clone.

``test_startup`` times, interleaved over 5 rounds, each in a new process:

* ``strata --help``;
* ``strata run jobs/cora_gcn.py --help`` (loads the job's modules, so torch);
* ``strata run jobs/cora_gcn.py --set epochs=1``: the time until its first step
  starts, and the whole run minus its work (the epochs, and the dataset load);
* the floor beside them: ``python -c "import torch"``.

Figures are wall seconds (median, [min, max]); CPU seconds go in ``extra_info``
(on a shared machine wall time is inflated by other processes, CPU time much less).

``test_first_run`` (slow) explains the first run on a fresh machine: it clones
this repository's HEAD, points the ``strata`` namespace at the clone, and runs the
main job there with no ``.pyc`` files and no numba cache, then again warm, 3
times. The fresh run's extra time is split into numba's compilations (each
kernel's wall and CPU seconds), ``.pyc`` compilation (the CPU difference before
the first step) and the rest. Both write ``benchmarks/results/startup.json``::

    .venv/bin/python -m pytest benchmarks/operators/test_cli_startup.py \
        -p no:cacheprovider -s -m "slow or not slow"
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESULTS = REPO / "benchmarks" / "results" / "startup.json"
STRATA = Path(sys.executable).with_name("strata")
JOB = "jobs/cora_gcn.py"
ROUNDS = 5
COMMAND = (
    ".venv/bin/python -m pytest benchmarks/operators/test_cli_startup.py "
    '-p no:cacheprovider -s -m "slow or not slow"'
)
PACKAGES = ("engine", "jobs", "operators", "partition", "storage")


def _env(pythonpath: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user runs it: .pyc files cached
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return env


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list[str], cwd: Path = REPO, **env: Any) -> tuple[float, float]:
    """Wall and CPU seconds of one command."""
    cpu, start = _children_cpu(), time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=_env(**env), check=True, capture_output=True)
    return time.perf_counter() - start, _children_cpu() - cpu


def _probe(cwd: Path, *settings: str, pythonpath: str | None = None) -> dict[str, Any]:
    """run_cli_probe.py's figures for one ``strata run`` of the main job."""
    launch = time.time()
    done = subprocess.run(
        [sys.executable, str(HERE / "run_cli_probe.py"), repr(launch), JOB, *settings],
        cwd=cwd,
        env=_env(pythonpath),
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["exit"] == 0
    return result


def _row(
    work: str, walls: list[float], floor: list[float], target: float, note: str
) -> dict[str, Any]:
    value, peer = statistics.median(walls), statistics.median(floor)
    return {
        "work": work,
        "metric": "wall seconds",
        "better": "lower",
        "strata": value,
        "strata_spread": [min(walls), max(walls)],
        "peer": 'python -c "import torch" (the floor)',
        "peer_value": peer,
        "peer_spread": [min(floor), max(floor)],
        "ratio": value / peer,
        "target": f"<= {target} s (absolute)",
        "met": value <= target,
        "command": COMMAND,
        "note": note,
    }


def _write(rows: list[dict[str, Any]] | None = None, **extra: Any) -> None:
    data: dict[str, Any] = {"topic": "startup", "rows": []}
    if RESULTS.exists():
        data = json.loads(RESULTS.read_text())
    if rows is not None:
        data["rows"] = rows
    data.update(extra)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=2))


def test_startup(benchmark: Any) -> None:
    strata = str(STRATA)
    commands = {
        "help": [strata, "--help"],
        "job_help": [strata, "run", JOB, "--help"],
        "torch": [sys.executable, "-c", "import torch"],
    }
    wall: dict[str, list[float]] = {k: [] for k in [*commands, "first_step", "rest"]}
    cpu: dict[str, list[float]] = {k: [] for k in wall}

    def one_round() -> None:
        for name, argv in commands.items():
            w, c = _timed(argv)
            wall[name].append(w)
            cpu[name].append(c)
        probe = _probe(REPO, "--set", "epochs=1")
        wall["first_step"].append(probe["first_step"][0])
        cpu["first_step"].append(probe["first_step"][1])
        # the whole run minus its work: the epochs and the dataset load
        work = probe["work_s"] + probe["dataset"][0]
        wall["rest"].append(probe["end"][0] - work)
        cpu["rest"].append(probe["end"][1] - probe["dataset"][1])

    _timed([strata, "--help"])  # the first run compiles .pyc files: not timed
    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)
    info = benchmark.extra_info
    for name in wall:
        info[f"{name}_wall_s"] = statistics.median(wall[name])
        info[f"{name}_cpu_s"] = statistics.median(cpu[name])
    floor = wall["torch"]
    cpu_note = "median CPU s: strata {:.2f}, import torch {:.2f}"
    rows = [
        _row(
            "strata --help",
            wall["help"],
            floor,
            1.0,
            cpu_note.format(info["help_cpu_s"], info["torch_cpu_s"]),
        ),
        _row(
            "strata run jobs/cora_gcn.py --help",
            wall["job_help"],
            floor,
            1.5,
            cpu_note.format(info["job_help_cpu_s"], info["torch_cpu_s"]),
        ),
        _row(
            "strata run jobs/cora_gcn.py: launch to its first step starting",
            wall["first_step"],
            floor,
            1.5,
            cpu_note.format(info["first_step_cpu_s"], info["torch_cpu_s"]),
        ),
        _row(
            "strata run jobs/cora_gcn.py --set epochs=1, minus the epochs and "
            "the dataset load",
            wall["rest"],
            floor,
            1.5,
            cpu_note.format(info["rest_cpu_s"], info["torch_cpu_s"])
            + "; includes torch._dynamo, which torch.optim imports when the "
            "trainer builds Adam",
        ),
    ]
    _write(rows)
    print()
    for name in wall:
        print(
            f"{name:12s} wall {statistics.median(wall[name]):.2f} "
            f"[{min(wall[name]):.2f}, {max(wall[name]):.2f}]  "
            f"cpu {statistics.median(cpu[name]):.2f}"
        )


@pytest.mark.slow
@pytest.mark.timeout(1800)  # six runs of the main job
def test_first_run(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    namespace = tmp_path / "namespace" / "strata"
    namespace.mkdir(parents=True)
    for package in PACKAGES:
        (namespace / package).symlink_to(clone / package)
    pythonpath = str(namespace.parent)
    runs: dict[str, list[dict[str, Any]]] = {"fresh": [], "warm": []}
    for _ in range(3):
        for cache in clone.rglob("__pycache__"):
            shutil.rmtree(cache)
        runs["fresh"].append(_probe(clone, pythonpath=pythonpath))
        runs["warm"].append(_probe(clone, pythonpath=pythonpath))
    assert all(r["numba"][1] > 0 for r in runs["fresh"])  # the clone was cold
    assert all(r["numba"][1] == 0 for r in runs["warm"])

    def median(kind: str, key: str, index: int) -> float:
        return statistics.median(r[key][index] for r in runs[kind])

    kernels: dict[str, list[float]] = {}
    for run in runs["fresh"]:
        for name, _, seconds in run["kernels"]:
            kernels.setdefault(name, []).append(seconds)
    first_run = {
        "what": "the main job (strata run jobs/cora_gcn.py) on a fresh clone of "
        "HEAD (no .pyc, no numba cache), then warm; medians of 3 pairs; "
        "[wall s, cpu s]",
        "fresh_total": [median("fresh", "end", 0), median("fresh", "end", 1)],
        "warm_total": [median("warm", "end", 0), median("warm", "end", 1)],
        "numba_compile": [median("fresh", "numba", 0), median("fresh", "numba", 1)],
        "numba_kernels_cpu_s": {k: statistics.median(v) for k, v in kernels.items()},
        "pyc_compile_cpu_s": median("fresh", "first_step", 1)
        - median("warm", "first_step", 1),
        "first_step_fresh": [
            median("fresh", "first_step", 0),
            median("fresh", "first_step", 1),
        ],
        "dataset_warm": [median("warm", "dataset", 0), median("warm", "dataset", 1)],
        "dynamo_at_first_adam": [
            median("warm", "dynamo", 0),
            median("warm", "dynamo", 1),
        ],
        "epochs_work_s_warm": statistics.median(r["work_s"] for r in runs["warm"]),
        "command": COMMAND,
    }
    _write(first_run=first_run)
    print(json.dumps(first_run, indent=1))
