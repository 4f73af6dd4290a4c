"""Distributed full-graph jobs: fullgraph_dist and cora_gcn with workers=2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from strata.engine import execute
from strata.engine.job import JobError, job_config, job_spec
from strata.jobs import cora_gcn, fullgraph_dist
from strata.operators.cli.main import main
from strata.operators.trainers import TIMING_KEYS
from strata.operators.trainers.distributed import DistributedConfig
from strata.operators.trainers.distributed.modes import Emma
from tests.engine.conftest import ray_actors_of

pytestmark = pytest.mark.multiprocess

HEADLINE = set(fullgraph_dist.HEADLINE)


def run_cli(tmp_path: Path, job: str, name: str, **settings: object) -> dict:
    """``strata run job --set k=v ...``; the run report."""
    report = tmp_path / f"{name}.json"
    argv = ["run", job, *[f"--set={k}={v}" for k, v in settings.items()]]
    assert main([*argv, "--report", str(report), "--quiet"]) == 0
    data = json.loads(report.read_text())
    assert data["status"] == "ok"
    return data


def test_cora_trains_the_same_model_on_one_and_two_workers_by_default() -> None:
    """The whole job with default settings (at most 200 epochs, early stopping).

    Every full-graph trainer draws the same counter-based dropout masks, so
    ``workers=1`` and ``workers=2`` differ only by float rounding: the losses of
    every epoch agree to 1e-5, the test accuracy to 0.002.
    """
    runs = {
        k: execute(
            cora_gcn.build(cora_gcn.CoraGcnConfig(workers=k)),
            collect=("train.epochs",),
        )
        for k in (1, 2)
    }
    one, two = (runs[k].outputs for k in (1, 2))
    losses = {k: [r["loss"] for r in runs[k].collected["train.epochs"]] for k in runs}
    assert len(losses[1]) == len(losses[2]) == one["epochs_run"] == two["epochs_run"]
    loss_err = max(abs(a - b) for a, b in zip(losses[1], losses[2], strict=True))
    print(
        f"test accuracy {one['test_accuracy']:.4f} (1 worker), "
        f"{two['test_accuracy']:.4f} (2 workers); max |loss diff| {loss_err:.1e}"
    )
    assert loss_err <= 1e-5
    assert abs(one["test_accuracy"] - two["test_accuracy"]) <= 0.002
    assert one["best_epoch"] == two["best_epoch"]
    assert one["test_accuracy"] > 0.78
    counters = runs[2].report.steps["train"].counters
    assert counters["fwd.halo_send_rows"] > 0  # it really ran on a gang


#: What the machine decides, not the job: resident memory and the gang's start-up.
MACHINE_KEYS = frozenset({"peak_rss_bytes", "gang_startup_s"})


def comparable(outputs: dict) -> dict:
    """The outputs without times, peak RSS and start-up (per worker too)."""
    dropped = TIMING_KEYS | MACHINE_KEYS
    kept = {k: v for k, v in outputs.items() if k not in dropped}
    kept["counters"] = [
        {k: v for k, v in worker.items() if k not in dropped}
        for worker in outputs["counters"]
    ]
    return kept


def test_outputs_identical_on_every_executor(other_executor: str) -> None:
    """A 2-worker exact gang: the same losses, accuracies, bytes and halo rows.

    On Ray the gang's ranks are Ray actors (the executor's workers launch their
    gangs on Ray); on the process executor, processes.
    """
    config = job_config(
        fullgraph_dist,
        graph="sbm:n=600,blocks=4,degree=6,features=16",
        mode="exact",
        workers=2,
        hidden=16,
        epochs=3,
    )
    local = execute(fullgraph_dist.build(config), "local").outputs
    ranks = ray_actors_of("RankActor")
    other = execute(fullgraph_dist.build(config), other_executor).outputs
    assert comparable(other) == comparable(local)
    assert local["counters_per_epoch"][0]["halo_rows"] > 0  # a real 2-worker gang
    assert len(local["loss_curve"]) == 3
    started = ray_actors_of("RankActor") - ranks
    assert len(started) == (2 if other_executor == "ray" else 0)


def test_hongtu_with_a_budget_reports_plan_counters_and_peaks(tmp_path: Path) -> None:
    budget = 3 << 19
    data = run_cli(
        tmp_path,
        "jobs/fullgraph_dist.py",
        "hongtu",
        graph="sbm:n=4000,blocks=8,degree=8,features=32",
        mode="hongtu",
        workers=2,
        device_budget="1.5MiB",
        hidden=32,
        epochs=10,
        lr=0.05,
    )
    out = data["outputs"]
    plan = out["plan"]
    assert plan["chunks"] > 1  # the budget forced chunking
    unchunked = plan["candidates"][0]
    assert unchunked["chunks"] == 1
    assert unchunked["peak_bytes"] > budget
    assert max(plan["modelled_peak_bytes"]) <= budget
    assert 0 < out["arena_peak_bytes"] <= budget
    assert len(out["counters"]) == 2
    for worker in out["counters"]:
        assert len(worker["epochs"]) == 10
        assert 0 < worker["arena_peak_bytes"] <= budget
        assert worker["tensor_peak_bytes"] == worker["arena_peak_bytes"]
        assert worker["peak_rss_bytes"] > 0
        for epoch in worker["epochs"]:
            assert set(epoch) == HEADLINE
            assert epoch["h2d_bytes"] > 0
            assert epoch["d2h_bytes"] > 0
            assert epoch["d2d_bytes"] > 0
            assert epoch["halo_rows"] > 0
    per_epoch = out["counters_per_epoch"]
    assert per_epoch[0] == per_epoch[-1]  # every epoch moves the same bytes
    assert per_epoch[0]["h2d_bytes"] == sum(
        w["epochs"][0]["h2d_bytes"] for w in out["counters"]
    )
    step = data["steps"]["train"]["counters"]
    assert step["fwd.h2d_bytes"] > 0
    assert step["arena_peak_bytes"] == out["arena_peak_bytes"]
    assert out["test_accuracy"] > 0.5  # 8 planted communities: chance is 0.125


def test_any_graph_spec_gets_a_task_and_every_mode_runs() -> None:
    """RMAT has no labels or masks: the job draws them and says so."""
    outputs = {}
    for mode in ("exact", "emma"):
        config = job_config(
            fullgraph_dist,
            graph="rmat:scale=9,edge_factor=8",
            mode=mode,
            workers=2,
            features=8,
            classes=4,
            epochs=4,
            **({"splits": 2} if mode == "emma" else {}),
        )
        outputs[mode] = execute(fullgraph_dist.build(config)).outputs
    exact, emma = outputs["exact"], outputs["emma"]
    assert exact["synthesized"] == ["y", "x", "masks"]
    assert exact["epochs_run"] == emma["epochs_run"] == 4
    assert exact["counters_per_epoch"][0]["halo_rows"] > 0
    assert exact["counters"][0]["setup"]["h2d_bytes"] > 0
    # resident features alone: 2 workers share 512 rows x 8 floats
    assert exact["tensor_peak_bytes"] > 512 * 8 * 4 / 2
    assert isinstance(emma["tensor_peak_bytes"], int)  # Emma measures it too
    assert emma["tensor_peak_bytes"] > 512 * 8 * 4 / 2
    assert emma["emma_splits"] == 2
    assert 0 < emma["emma_fwd_bytes_ratio"] < 1


def build(**flat: object) -> None:
    fullgraph_dist.build(job_config(fullgraph_dist, **flat))


def test_bad_settings_are_clear_errors() -> None:
    with pytest.raises(JobError, match=r"--set mode in .*\{exact,hongtu,emma\}"):
        build(mode="pipeline")
    with pytest.raises(JobError, match=r"--set device_budget in .*'lots'"):
        build(mode="hongtu", device_budget="lots")
    with pytest.raises(JobError, match=r"device_budget .*a setting of hongtu only"):
        build(mode="exact", device_budget=1 << 20)


def test_flat_aliases_and_dotted_keys_give_the_same_config() -> None:
    flat = job_config(fullgraph_dist, mode="hongtu", chunks="4", workers="3")
    dotted = job_config(
        fullgraph_dist,
        {"dist.mode": "hongtu", "dist.mode.chunks": "4", "dist.gang.workers": "3"},
    )
    assert flat == dotted
    assert flat.dist == DistributedConfig(workers=3, mode="hongtu", chunks=4)
    budget = job_config(fullgraph_dist, mode="hongtu", device_budget="1.5MiB")
    assert budget.dist.mode.device_budget == 3 << 19
    emma = job_config(fullgraph_dist, {"dist.mode": "emma", "dist.mode.splits": 4})
    assert emma.dist.mode == Emma(splits=4)


def test_help_lists_every_mode_setting() -> None:
    text = job_spec(fullgraph_dist).help()
    for key in ("dist.mode ", "dist.mode.chunks", "dist.mode.splits", "task.classes"):
        assert key in text
    assert "{exact,hongtu,emma}" in text


def test_docstring_examples() -> None:
    import doctest

    from strata.operators.io import task
    from strata.operators.trainers import gang_records

    for module in (task, gang_records):  # the job's helpers live there
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0
        assert result.failed == 0
