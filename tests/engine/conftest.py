"""Engine test helpers: leftover thread and process checks, a warm fork server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psutil
import pytest

from strata.engine import Pipeline, execute
from strata.engine.testing import ListSink, ListSource

# Long-lived helpers of multiprocessing, started once per test session on purpose.
_HELPERS = ("multiprocessing.forkserver", "multiprocessing.resource_tracker")


def worker_processes() -> set[int]:
    """Descendant processes of this one, except multiprocessing's own helpers.

    The fork server and the resource tracker are direct children; workers forked by
    the fork server are its children and share its command line, so only direct
    children are matched against the helpers' command lines.
    """
    me = psutil.Process()
    helpers = set()
    for child in me.children():
        try:
            if any(h in " ".join(child.cmdline()) for h in _HELPERS):
                helpers.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    pids = set()
    for process in me.children(recursive=True):
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
        except psutil.NoSuchProcess:
            continue
        if process.pid not in helpers:
            pids.add(process.pid)
    return pids


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    """Fail the test if it leaves threads or worker processes running."""
    threads = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        extra_threads = set(threading.enumerate()) - threads
        extra_processes = worker_processes()
        if not extra_threads and not extra_processes:
            return
        time.sleep(0.05)
    assert not extra_threads, f"threads left behind: {extra_threads}"
    assert not extra_processes, f"processes left behind: {extra_processes}"


@pytest.fixture(scope="session")
def warm_process_executor() -> None:
    """Start the fork server once, so timed tests measure runs, not start-up."""
    p = Pipeline("warm-up")
    p.step("items", ListSource([1]))
    p.step("out", ListSink(), "items")
    execute(p, "process")
