"""Gang failures: every way a worker can fail ends in a GangError naming it.

Each test checks the error names the rank (and pid), arrives within a bound, and
leaves no worker process and no shared-memory segment behind. The bounds are the
only timings asserted: generous, but a hang would break them.
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import gang_workers as gw
import psutil
import pytest
import torch

from strata.engine.errors import RemoteError
from strata.engine.gang import FailureKind, GangError, GangSpec, SharedTensors, run_gang
from strata.engine.gang.shared import PREFIX

pytestmark = pytest.mark.multiprocess


@pytest.fixture
def no_segments() -> Iterator[None]:
    """Fail the test if it leaves shared-memory segments of this process behind."""
    pattern = f"/dev/shm/{PREFIX}{os.getpid()}-*"
    before = set(glob.glob(pattern))
    yield
    assert set(glob.glob(pattern)) == before


@pytest.mark.parametrize("world", [1, 2])
def test_exception_names_the_rank_and_chains_its_traceback(
    world: int, no_leftovers: None
) -> None:
    rank = world - 1
    start = time.monotonic()
    with pytest.raises(GangError) as info:
        run_gang(gw.raise_on, GangSpec(workers=world, collective_timeout_s=30), rank)
    error = info.value
    assert time.monotonic() - start < 10
    assert (error.rank, error.failures[0].kind) == (rank, FailureKind.RAISED)
    assert f"worker rank {rank} (pid {error.pid}) in step 'raise_on'" in str(error)
    assert f"ValueError: bad input on rank {rank}" in str(error)
    assert isinstance(error.__cause__, RemoteError)
    assert "in raise_on" in error.__cause__.traceback  # the worker's own frames


def test_sigkill_mid_collective_fails_within_the_timeout_naming_the_worker(
    no_leftovers: None, no_segments: None
) -> None:
    spec = GangSpec(workers=2, collective_timeout_s=10, timeout_s=30)
    start = time.monotonic()
    with (
        SharedTensors.from_arrays({"x": torch.ones(1000)}) as shared,
        pytest.raises(GangError) as info,
    ):
        run_gang(gw.kill_in_collective, spec, rank=1, after=20, shared=shared)
    elapsed = time.monotonic() - start
    error = info.value
    assert elapsed < spec.collective_timeout_s
    assert (error.rank, error.failures[0].kind) == (1, FailureKind.DIED)
    assert f"worker rank 1 (pid {error.pid})" in str(error)
    assert "killed by SIGKILL" in str(error)
    assert "last heartbeat 'step " in str(error)  # where it was


def test_hung_worker_times_out_naming_the_stuck_rank(no_leftovers: None) -> None:
    spec = GangSpec(workers=2, timeout_s=2)
    start = time.monotonic()
    with pytest.raises(GangError) as info:
        run_gang(gw.sleep_on, spec, rank=1, seconds=600)
    assert time.monotonic() - start < spec.timeout_s + 5
    error = info.value
    assert error.ranks == (1,)
    assert error.failures[0].kind is FailureKind.TIMED_OUT
    assert "still running after timeout_s=2" in str(error)
    assert "'about to sleep'" in str(error)


def test_silent_worker_fails_the_heartbeat_check(no_leftovers: None) -> None:
    spec = GangSpec(workers=2, heartbeat_timeout_s=1.0)
    with pytest.raises(GangError) as info:
        run_gang(gw.beat_then_stall, spec, rank=0)
    assert info.value.ranks == (0,)
    assert info.value.failures[0].kind is FailureKind.STALLED
    assert "no heartbeat for" in str(info.value)


@pytest.mark.parametrize(
    ("how", "expected"), [("segfault", "killed by SIGSEGV"), ("exit", "exit code 3")]
)
def test_worker_dying_in_native_code_or_silently(
    how: str, expected: str, no_leftovers: None
) -> None:
    with pytest.raises(GangError, match=expected) as info:
        run_gang(gw.crash_on, GangSpec(workers=2, timeout_s=30), rank=1, how=how)
    assert (info.value.rank, info.value.failures[0].kind) == (1, FailureKind.DIED)


def test_keyboard_interrupt_stops_every_worker(no_leftovers: None) -> None:
    # Ctrl-C as a terminal delivers it: a test run started in the background
    # (``cmd &`` in a script) inherits SIGINT ignored, and Python keeps that.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    run_gang(gw.sleep_on, GangSpec(workers=1), rank=0, seconds=0)  # warm start-up
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_gang(gw.sleep_on, GangSpec(workers=2, timeout_s=60), rank=1, seconds=60)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)


def test_failed_join_is_retried_then_reported(no_leftovers: None) -> None:
    bad_interface = {"GLOO_SOCKET_IFNAME": "no-such-interface0"}
    spec = GangSpec(workers=2, startup_retries=1, env=bad_interface)
    with pytest.raises(GangError, match=r"start-up attempt 2") as info:
        run_gang(gw.describe, spec)
    assert "no-such-interface0" in str(info.value)
    assert info.value.failures[0].kind is FailureKind.RAISED


_PARENT = """
import sys
sys.path.insert(0, {tests!r})
import gang_workers
from strata.engine.gang import GangSpec, run_gang

if __name__ == "__main__":
    run_gang(gang_workers.record_pid_then_sleep, GangSpec(workers=2), {folder!r})
"""


@pytest.mark.slow  # a fresh interpreter and fork server import torch: seconds
def test_workers_exit_when_the_parent_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    tests = str(Path(__file__).resolve().parent)
    script.write_text(_PARENT.format(tests=tests, folder=str(tmp_path)))
    parent = subprocess.Popen([sys.executable, str(script)])
    try:
        pid_files = [tmp_path / f"rank{rank}.pid" for rank in range(2)]
        deadline = time.monotonic() + 60
        while not all(f.exists() and f.read_text() for f in pid_files):
            assert time.monotonic() < deadline, "the gang did not start"
            time.sleep(0.1)
        workers = [psutil.Process(int(f.read_text())) for f in pid_files]
    finally:
        parent.kill()  # SIGKILL: no cleanup code runs in the parent
        parent.wait()
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, f"workers outlived their parent: {alive}"


def test_arguments_that_cannot_be_sent_fail_before_any_rank_runs(
    no_leftovers: None,
) -> None:
    with pytest.raises(GangError, match="arguments that can be sent to rank 0"):
        run_gang(gw.sleep_on, GangSpec(workers=2), rank=0, seconds=threading.Lock())
