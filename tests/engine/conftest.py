"""Engine test helpers: leftover thread and process checks, a warm fork server."""

from __future__ import annotations

import os
import sys
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
    """Descendant processes of this one, except multiprocessing's and Ray's own.

    The fork server and the resource tracker are direct children; workers forked by
    the fork server are its children and share its command line, so only direct
    children are matched against the helpers' command lines. A local Ray cluster
    (the ``ray_session`` fixture's) is a set of direct children too (GCS, raylet,
    monitors); its worker processes come and go under the raylet as Ray pools them,
    so each Ray daemon's whole subtree is left out: Ray's leftovers are counted as
    actors instead (:func:`ray_actors`).
    """
    me = psutil.Process()
    helpers = set()
    for child in me.children():
        try:
            if any(h in " ".join(child.cmdline()) for h in _HELPERS):
                helpers.add(child.pid)
            elif _is_ray(child):
                helpers.add(child.pid)
                helpers.update(p.pid for p in child.children(recursive=True))
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


def _is_ray(process: psutil.Process) -> bool:
    """Whether ``process`` runs a program from the installed ``ray`` package."""
    ray = sys.modules.get("ray")
    if ray is None or ray.__file__ is None:  # not imported: no cluster of ours
        return False
    package = os.path.dirname(ray.__file__) + os.sep
    return any(arg.startswith(package) for arg in process.cmdline())


def ray_actors() -> set[str]:
    """Ids of the live actors of this process's Ray cluster; empty without one.

    Reads the GCS's actor table (``ray._private.state``: the public state API
    needs the dashboard, which ``ray_cluster.connect`` does not start); ~1 ms.
    """
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return set()
    from ray._private import state

    from strata.engine.executors.ray_driver import pooled_actor_ids

    # The ray executor keeps idle actors between good runs on purpose.
    return set(state.actors(actor_state_name="ALIVE")) - pooled_actor_ids()


def ray_actors_of(class_name: str) -> set[str]:
    """Ids of every actor of ``class_name`` (alive or dead) this cluster has seen.

    Tells a test that a step really ran on Ray actors (a gang's ``RankActor``s,
    say): the ids that appear across a run are the actors it started.
    """
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return set()
    from ray._private import state

    return {
        actor_id
        for actor_id, actor in state.actors().items()
        if actor["ActorClassName"].rpartition(".")[2] == class_name
    }


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    """Fail the test if it leaves threads, worker processes or Ray actors running."""
    threads = set(threading.enumerate())
    actors = ray_actors()
    yield
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        extra_threads = {
            t for t in set(threading.enumerate()) - threads if not _ray_thread(t)
        }
        extra_processes = worker_processes()
        extra_actors = ray_actors() - actors
        if not extra_threads and not extra_processes and not extra_actors:
            return
        time.sleep(0.05)
    assert not extra_threads, f"threads left behind: {extra_threads}"
    assert not extra_processes, f"processes left behind: {extra_processes}"
    assert not extra_actors, f"Ray actors left alive: {_describe(extra_actors)}"


def _ray_thread(thread: threading.Thread) -> bool:
    """A thread of Ray's driver (started with the run's shared cluster)."""
    return thread.name.startswith("ray_") or type(thread).__module__.startswith("ray")


def _describe(actor_ids: set[str]) -> list[str]:
    from ray._private import state

    table = state.actors(actor_state_name="ALIVE")
    return [
        f"{table[a]['ActorClassName']} (pid {table[a]['Pid']})"
        for a in sorted(actor_ids)
        if a in table
    ]


@pytest.fixture(scope="session")
def warm_process_executor() -> None:
    """Start the fork server once, so timed tests measure runs, not start-up."""
    p = Pipeline("warm-up")
    p.step("items", ListSource([1]))
    p.step("out", ListSink(), "items")
    execute(p, "process")
