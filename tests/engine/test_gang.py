"""Gangs: results in rank order, collectives against one process, metrics, seeds."""

from __future__ import annotations

import pickle

import gang_workers as gw
import pytest
import torch

from strata.engine.gang import (
    GangError,
    GangSpec,
    rank_seed,
    run_gang,
    run_gang_report,
)
from strata.engine.gang.spec import usable_cores

pytestmark = pytest.mark.multiprocess
WORLDS = [1, 2, pytest.param(4, id="4")]


@pytest.mark.parametrize("world", WORLDS)
def test_results_come_back_in_rank_order(world: int, no_leftovers: None) -> None:
    spec = GangSpec(workers=world, seed=7, env={"STRATA_TEST_VAR": "set"})
    results = run_gang(gw.describe, spec)
    assert [r["rank"] for r in results] == list(range(world))
    assert {r["world_size"] for r in results} == {world}
    assert {(r["device"], r["backend"], r["env"]) for r in results} == {
        ("cpu", "gloo", "set")
    }
    assert [r["seed"] for r in results] == [rank_seed(7, r) for r in range(world)]
    assert {r["threads"] for r in results} == {max(1, usable_cores() // world)}
    assert len({r["pid"] for r in results}) == world
    torch.manual_seed(rank_seed(7, 0))
    assert results[0]["draw"] == torch.rand(1).item()  # seeded before fn ran


@pytest.mark.parametrize("world", WORLDS)
def test_collectives_match_one_process(world: int) -> None:
    values = torch.randn(world, 6, generator=torch.Generator().manual_seed(world))
    for result in run_gang(gw.collectives, GangSpec(workers=world), values):
        torch.testing.assert_close(result["sum"], values.sum(0))
        torch.testing.assert_close(result["mean"], values.mean(0))
        assert torch.equal(result["max"], values.max(0).values)
        assert torch.equal(result["min"], values.min(0).values)
        assert torch.equal(result["broadcast"], values[world - 1])
        assert torch.equal(result["gathered"], values)
        assert result["objects"] == [{"rank": r} for r in range(world)]


def test_report_carries_metrics_and_times() -> None:
    report = run_gang_report(gw.count, GangSpec(workers=2, name="counting"), epochs=3)
    assert report.results == ["rank 0 done", "rank 1 done"]
    assert (report.name, report.world_size, report.device) == ("counting", 2, "cpu")
    first, second = report.workers
    assert first.metrics.counters == {"rows": 30.0, "bytes": 300.0}
    assert second.metrics.counters["rows"] == 60.0
    assert first.metrics.peaks == {"tensor_bytes": 3000.0}
    assert first.metrics.series == {"epoch_loss": [1.0, 0.5, 1.0 / 3]}
    assert report.total("rows") == 90.0
    assert 0 < report.startup_s <= report.wall_s
    assert report.startup_attempts == 1
    assert all(
        w.peak_rss_bytes > 0 and w.peak_device_bytes is None for w in report.workers
    )
    data = report.to_dict()
    assert data["workers"][1]["counters"]["rows"] == 60.0
    assert pickle.loads(pickle.dumps(data)) == data  # plain data


def test_tensor_arguments_are_shared_and_tensors_come_back() -> None:
    big = torch.arange(1_000_000, dtype=torch.float64)
    results = run_gang(gw.shared_sum, GangSpec(workers=2), big)
    assert [r["sum"] for r in results] == [big.sum().item()] * 2
    assert all(r["is_shared"] for r in results)  # mapped, not pickled per worker
    assert torch.equal(results[1]["state"]["w"], torch.ones(3, 2))
    assert torch.equal(results[0]["state"]["b"], torch.arange(3))


@pytest.mark.slow  # spawn imports torch in every worker: seconds
def test_spawn_start_method_runs_the_same_code() -> None:
    results = run_gang(gw.describe, GangSpec(workers=1, start_method="spawn"))
    assert results[0]["rank"] == 0


def test_unpicklable_function_fails_before_starting(no_leftovers: None) -> None:
    with pytest.raises(GangError, match="picklable worker function") as info:
        run_gang(lambda ctx: ctx.rank, GangSpec(workers=2))
    assert info.value.rank is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("workers", 0, "expected workers >= 1"),
        ("device", "tpu", "device in step 'gang'"),
        ("timeout_s", -1.0, "timeout_s in step 'gang'"),
        ("threads_per_worker", 0, "threads_per_worker"),
        ("start_method", "fork", "start_method"),
        ("port", 70000, "port"),
    ],
)
def test_spec_rejects_bad_values(field: str, value: object, message: str) -> None:
    kwargs: dict[str, object] = {"workers": 2, field: value}
    with pytest.raises(ValueError, match=message):
        GangSpec(**kwargs)  # type: ignore[arg-type]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_gpus_is_refused_and_auto_falls_back() -> None:
    with pytest.raises(ValueError, match="device in step 'train'"):
        GangSpec(workers=1, device="cuda", name="train").placement()
    placement = GangSpec(workers=2).placement()
    assert (placement.device, placement.backend, placement.devices) == (
        "cpu",
        "gloo",
        ("cpu", "cpu"),
    )


def test_cuda_placement_puts_one_nccl_rank_on_each_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    placement = GangSpec(workers=2).placement()
    assert (placement.device, placement.backend, placement.devices) == (
        "cuda",
        "nccl",
        ("cuda:0", "cuda:1"),
    )
    shared = GangSpec(workers=3, backend="gloo").placement()
    assert shared.devices == ("cuda:0", "cuda:1", "cuda:0")  # rank % device_count
    with pytest.raises(ValueError, match="at most one NCCL rank per GPU"):
        GangSpec(workers=3).placement()
    assert GangSpec(workers=2, device="cpu").placement().backend == "gloo"
