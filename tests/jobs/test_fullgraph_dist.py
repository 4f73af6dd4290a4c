"""Distributed full-graph jobs: fullgraph_dist and cora_gcn with workers=2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from strata.engine import execute
from strata.jobs import fullgraph_dist
from strata.operators.cli.main import main
from strata.operators.errors import OperatorError

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


def test_cora_on_two_workers_equals_one_device_with_the_same_masks(
    tmp_path: Path,
) -> None:
    """The whole job (200 epochs at most, early stopping), same seed.

    ``workers=2`` draws counter-based dropout masks (a partitioned run cannot
    reproduce torch's generator); ``workers=1 masks=counter`` draws the same
    masks on one device. Every figure then agrees: accuracies exactly, the
    loss curve to its 4 printed digits, and the early-stopping epoch.
    """
    common = {"seed": 3, "device": "cpu", "threads": 1}
    one = run_cli(
        tmp_path, "jobs/cora_gcn.py", "one", workers=1, masks="counter", **common
    )
    two = run_cli(tmp_path, "jobs/cora_gcn.py", "two", workers=2, **common)
    a, b = one["outputs"], two["outputs"]
    for key in (
        "test_accuracy",
        "val_accuracy",
        "train_accuracy",
        "best_epoch",
        "epochs_run",
    ):
        assert a[key] == b[key], key
    assert a["loss_curve"] == pytest.approx(b["loss_curve"], abs=2e-4)
    assert a["test_accuracy"] > 0.78
    counters = two["steps"]["train"]["counters"]
    assert counters["fwd.halo_send_rows"] > 0  # it really ran on a gang
    assert counters["epochs"] == b["epochs_run"]


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
        job = fullgraph_dist.build(
            graph="rmat:scale=9,edge_factor=8",
            mode=mode,
            workers=2,
            features=8,
            classes=4,
            epochs=4,
            splits=2,
        )
        outputs[mode] = execute(job).outputs
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


def test_bad_settings_are_clear_errors() -> None:
    with pytest.raises(OperatorError, match="mode in fullgraph_dist: expected one of"):
        fullgraph_dist.build(mode="pipeline")
    with pytest.raises(OperatorError, match="device_budget in fullgraph_dist"):
        fullgraph_dist.build(mode="hongtu", device_budget="lots")
    with pytest.raises(OperatorError, match="device_budget=None with mode='exact'"):
        fullgraph_dist.build(mode="exact", device_budget=1 << 20)


def test_docstring_examples() -> None:
    import doctest

    result = doctest.testmod(fullgraph_dist, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
