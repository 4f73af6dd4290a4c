"""Ray-actor gangs: the local gang's behaviour with one Ray actor per rank.

The oracle is the local launcher: the same worker functions (``gang_workers``)
give the same results, seeds and errors. Every test ends with no live actor.
Each gang starts fresh actors that import torch (seconds on a loaded 2-core
box), so the tests are few and each runs one gang.
"""

from __future__ import annotations

import time
from types import ModuleType

import gang_workers as gw
import pytest
import torch

from strata.engine.errors import RemoteError
from strata.engine.gang import (
    FailureKind,
    GangError,
    GangSpec,
    SharedTensors,
    rank_seed,
    run_gang,
    run_gang_report,
)
from strata.engine.gang.ray_gang import NETWORK_ENV

pytestmark = [pytest.mark.ray, pytest.mark.multiprocess]


@pytest.fixture
def no_live_actors(ray_session: ModuleType, no_leftovers: None) -> None:
    """The run's shared Ray cluster; no thread, process or actor left after."""


def spec(**settings: object) -> GangSpec:
    settings.setdefault("collective_timeout_s", 60.0)
    return GangSpec(workers=2, launcher="ray", **settings)  # type: ignore[arg-type]


def test_results_seeds_and_collectives_match_the_local_gang(
    no_live_actors: None,
) -> None:
    values = torch.randn(2, 6, generator=torch.Generator().manual_seed(2))
    report = run_gang_report(gw.collectives, spec(seed=7), values)
    local = run_gang(gw.collectives, GangSpec(workers=2, seed=7), values)
    assert report.world_size == 2
    assert report.backend == "gloo"
    for ray_rank, local_rank in zip(report.results, local, strict=True):
        for key in ("sum", "mean", "max", "min", "broadcast", "gathered"):
            torch.testing.assert_close(ray_rank[key], local_rank[key])
        assert ray_rank["objects"] == local_rank["objects"]
    torch.testing.assert_close(report.results[0]["sum"], values.sum(0))
    assert all(w.startup_s > 0 and w.pid > 0 for w in report.workers)
    # Seeds: the rank seed of the local gang, applied before fn runs.
    described = run_gang(gw.describe, spec(seed=7, env={"STRATA_TEST_VAR": "set"}))
    assert [r["rank"] for r in described] == [0, 1]
    assert [r["seed"] for r in described] == [rank_seed(7, r) for r in range(2)]
    torch.manual_seed(rank_seed(7, 1))
    assert described[1]["draw"] == torch.rand(1).item()
    assert described[0]["env"] == "set"


def test_a_raising_rank_is_named_with_its_traceback(no_live_actors: None) -> None:
    with pytest.raises(GangError) as info:
        run_gang(gw.raise_on, spec(), 1)
    error = info.value
    assert (error.rank, error.failures[0].kind) == (1, FailureKind.RAISED)
    assert f"worker rank 1 (pid {error.pid}) in step 'raise_on'" in str(error)
    assert isinstance(error.__cause__, RemoteError)
    assert "in raise_on" in error.__cause__.traceback


def test_an_actor_that_exits_is_named_within_the_timeout(
    no_live_actors: None,
) -> None:
    start = time.monotonic()
    with pytest.raises(GangError) as info:
        run_gang(gw.crash_on, spec(timeout_s=60.0), 1, "exit")
    error = info.value
    assert time.monotonic() - start < 60  # the peer sleeps 60 s: not waited for
    assert (error.rank, error.failures[0].kind) == (1, FailureKind.DIED)
    assert "worker rank 1 (pid" in str(error)
    assert "died" in str(error)


def test_network_path_carries_segments_and_brings_writes_back(
    no_live_actors: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NETWORK_ENV, "1")  # as if each rank sat on another node
    with SharedTensors.from_arrays(
        {"x": torch.arange(4.0), "out": torch.zeros(2)}
    ) as shared:
        sums = run_gang(gw.fill_rows, spec(), shared)
        assert sums == [6.0, 6.0]
        assert shared["out"].tolist() == [1.0, 2.0]  # both ranks' rows landed


class CpuHolder:
    """An actor that holds CPUs of the cluster, as a running step's task does."""

    def ping(self) -> bool:
        return True


def test_a_cpu_gang_runs_while_every_cpu_of_the_cluster_is_held(
    ray_session: ModuleType, no_live_actors: None
) -> None:
    cpus = ray_session.cluster_resources()["CPU"]
    holder = ray_session.remote(CpuHolder).options(num_cpus=cpus).remote()
    try:
        assert ray_session.get(holder.ping.remote(), timeout=60)
        assert ray_session.available_resources().get("CPU", 0.0) == 0.0
        assert [r["rank"] for r in run_gang(gw.describe, spec())] == [0, 1]
    finally:
        ray_session.kill(holder)


def test_cuda_without_a_gpu_in_the_cluster_is_refused(ray_session: ModuleType) -> None:
    if ray_session.cluster_resources().get("GPU"):
        pytest.skip("the cluster has GPUs")
    with pytest.raises(ValueError, match="expected a Ray GPU, got none"):
        run_gang(gw.describe, spec(device="cuda"))


@pytest.mark.slow
def test_sigkill_mid_collective_is_named(no_live_actors: None) -> None:
    with pytest.raises(GangError) as info:
        run_gang(gw.kill_in_collective, spec(collective_timeout_s=30.0), 0, 3)
    assert info.value.rank == 0
    assert info.value.failures[0].kind is FailureKind.DIED


@pytest.mark.slow
def test_gang_timeout_names_the_late_rank(no_live_actors: None) -> None:
    start = time.monotonic()
    with pytest.raises(GangError) as info:
        run_gang(gw.sleep_on, spec(timeout_s=20.0), 1, 120.0)
    assert time.monotonic() - start < 40
    assert info.value.failures[0].kind is FailureKind.TIMED_OUT
    assert 1 in info.value.ranks
    assert "timeout_s=20" in str(info.value)


@pytest.mark.slow
def test_a_silent_rank_is_reported_stalled(no_live_actors: None) -> None:
    with pytest.raises(GangError) as info:
        run_gang(gw.beat_then_stall, spec(heartbeat_timeout_s=3.0), 1)
    assert (info.value.rank, info.value.failures[0].kind) == (1, FailureKind.STALLED)
    assert "'working'" in str(info.value)  # its last heartbeat's progress
