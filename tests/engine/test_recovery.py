"""Crash recovery on the process executor: SIGKILLed workers and whole runs.

A killed worker, a worker killed while taking a checkpoint, and a whole run (the
driver, its fork server and every worker) killed at random moments: each time a
resumed run finishes with every item applied exactly once.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from checkpoint_steps import (
    CrashOnce,
    KillInSnapshot,
    counting_pipeline,
    expected_rows,
)

from strata.engine import CheckpointConfig, RunConfig, execute
from strata.engine.checkpoint import CheckpointStore

pytestmark = [pytest.mark.multiprocess, pytest.mark.usefixtures("no_leftovers")]

ITEMS = 300
HERE = Path(__file__).parent


def _config(directory: Path, *, every: int = 10, resume: bool = True) -> RunConfig:
    return RunConfig(
        checkpoint=CheckpointConfig(directory, every_items=every), resume=resume
    )


@pytest.mark.usefixtures("warm_process_executor")
def test_killed_worker_then_resume(tmp_path: Path) -> None:
    marker = tmp_path / "killed"
    p = counting_pipeline(ITEMS, before=CrashOnce(150, str(marker), how="kill"))
    ckpt = tmp_path / "ckpt"
    failed = execute(p, "process", config=_config(ckpt), check=False, collect=("out",))
    assert not failed.ok
    assert "killed by SIGKILL" in str(failed.error)
    resumed = execute(p, "process", config=_config(ckpt), collect=("out",))
    assert sorted(map(list, resumed.collected["out"])) == expected_rows(ITEMS)
    assert resumed.report.checkpoint is not None
    assert resumed.report.checkpoint.resumed_from is not None


@pytest.mark.usefixtures("warm_process_executor")
def test_worker_killed_mid_checkpoint_then_resume(tmp_path: Path) -> None:
    marker = tmp_path / "killed"
    p = counting_pipeline(ITEMS, before=KillInSnapshot(3, str(marker)))
    ckpt = tmp_path / "ckpt"
    failed = execute(p, "process", config=_config(ckpt), check=False, collect=("out",))
    assert not failed.ok
    assert marker.exists()
    store = CheckpointStore(ckpt)
    # One checkpoint is in flight at a time: 1 and 2 completed, 3 never did.
    assert store.complete_ids() == [1, 2]
    resumed = execute(p, "process", config=_config(ckpt), collect=("out",))
    assert sorted(map(list, resumed.collected["out"])) == expected_rows(ITEMS)


_DRIVER = """
import json, sys
sys.path[:0] = [{tests!r}]
from checkpoint_steps import Pace, counting_pipeline
from strata.engine import CheckpointConfig, RunConfig, execute

if __name__ == "__main__":
    p = counting_pipeline({items}, before=Pace(0.0015))
    config = RunConfig(
        checkpoint=CheckpointConfig({ckpt!r}, every_items={every}), resume=True
    )
    result = execute(p, "process", config=config, collect=("out",))
    with open({out!r}, "w") as f:
        json.dump({{"rows": result.collected["out"],
                   "resumed_from": result.report.checkpoint.resumed_from}}, f)
"""


def _start(script: Path, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as err:
        return subprocess.Popen(
            [sys.executable, str(script)],
            start_new_session=True,  # its own process group: kill it all at once
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    time.sleep(0.1)  # let orphans (if any) notice; none should remain


def _kill_when(
    process: subprocess.Popen[bytes], ckpt: Path, when: str, rng: random.Random
) -> None:
    """Wait until the run is mid-stream, or mid-checkpoint, before the kill.

    ``random``: a random moment after the first checkpoint completed (so the
    resumed run has one to start from); ``mid-checkpoint``: as soon as a checkpoint
    directory exists without its manifest.
    """
    store = CheckpointStore(ckpt)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        if when == "random" and store.complete_ids():
            time.sleep(rng.uniform(0.0, 0.4))
            return
        if when == "mid-checkpoint" and any(
            store.manifest(n) is None for n in store.ids()
        ):
            return
        time.sleep(0.002)


def _trial(tmp_path: Path, seed: int, when: str) -> tuple[int, int | None]:
    rng = random.Random(seed)
    ckpt, out = tmp_path / f"ckpt{seed}", tmp_path / f"out{seed}.json"
    script = tmp_path / f"driver{seed}.py"
    script.write_text(
        _DRIVER.format(
            tests=str(HERE), items=ITEMS, ckpt=str(ckpt), every=10, out=str(out)
        )
    )
    log = tmp_path / f"driver{seed}.log"
    kills = 0
    process = _start(script, log)
    _kill_when(process, ckpt, when, rng)
    if process.poll() is None:
        _kill_group(process)
        kills += 1
    else:
        process.wait()
    for _ in range(3):  # resume until a run finishes
        if out.exists():
            break
        process = _start(script, log)
        process.wait(timeout=60)
        assert process.returncode == 0, log.read_text()[-3000:]
    data = json.loads(out.read_text())
    assert sorted(map(list, data["rows"])) == expected_rows(ITEMS), (seed, when)
    return kills, data["resumed_from"]


def test_whole_run_killed_mid_checkpoint_then_resumed(tmp_path: Path) -> None:
    kills, _ = _trial(tmp_path, 1, "mid-checkpoint")
    assert kills == 1


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10, 22))
def test_whole_run_killed_at_random_moments(tmp_path: Path, seed: int) -> None:
    kills, _ = _trial(tmp_path, seed, "mid-checkpoint" if seed % 3 == 0 else "random")
    assert kills == 1
