"""The test run's shared Ray cluster, and the leftover checks beside it."""

from __future__ import annotations

import time
from types import ModuleType

import pytest

from tests.engine.conftest import ray_actors, worker_processes

pytestmark = [pytest.mark.ray, pytest.mark.multiprocess]


class _Idle:
    def pid(self) -> int:
        import os

        return os.getpid()


def test_ray_processes_are_not_leftovers_but_live_actors_are(
    ray_session: ModuleType,
) -> None:
    ray = ray_session
    before = ray_actors()
    actor = ray.remote(num_cpus=0)(_Idle).remote()
    pid = ray.get(actor.pid.remote())
    # The actor's process sits under the raylet: not a leftover process ...
    assert pid not in worker_processes()
    assert not worker_processes()  # nor are Ray's daemons or its idle workers
    # ... but a live actor, counted as one.
    assert ray_actors() - before == {actor._actor_id.hex()}
    ray.kill(actor)
    deadline = time.monotonic() + 10.0
    while ray_actors() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ray_actors() == before


def test_the_session_shares_one_cluster(ray_session: ModuleType) -> None:
    from strata.engine.ray_cluster import connect

    context = ray_session.get_runtime_context()
    assert connect() is ray_session  # reused, not a second cluster
    assert ray_session.get_runtime_context().get_node_id() == context.get_node_id()
