"""geo_bench: every executor agrees; the summary against the library and hand counts."""

from __future__ import annotations

import doctest
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from strata.engine import Pipeline, execute
from strata.engine.job import JobError, job_config
from strata.jobs import geo_bench
from strata.operators.cli import plot_geo
from strata.operators.cli.main import main
from strata.operators.io import geo_bench as geo_bench_steps
from strata.operators.io import geo_report
from strata.operators.io.geo_bench import (
    generate,
    layer_tree,
    place,
    router_of,
    topology_of,
    workload_of,
)
from strata.storage.geo.items import ItemSpace, Placement
from strata.storage.geo.twin import simulate
from strata.storage.geo.workload import GeoWorkloadConfig, Requests

TINY = {"num_vertices": 1000, "history_ops": 800, "test_ops": 150, "seed": 3}
CONFIGS = "geolayer,random3-random,single-primary,full-replication,home-only"


def geo_job(**params: Any) -> Pipeline:
    """The job built from flat parameters (its aliases), as ``--set`` would."""
    return geo_bench.build(job_config(geo_bench, **params))


def untimed(outputs: dict[str, Any]) -> dict[str, Any]:
    """Outputs without wall-clock figures (placement seconds, the servers' rows)."""
    configs = {
        name: {k: v for k, v in row.items() if k not in ("placement_s", "servers")}
        for name, row in outputs["configs"].items()
    }
    return {**outputs, "configs": configs, "a1_met": None}


def test_outputs_identical_on_every_executor(executor: str) -> None:
    params = {**TINY, "configs": CONFIGS, "server_requests": 0}
    local = execute(geo_job(**params), "local").outputs
    other = execute(geo_job(**params), executor).outputs
    assert untimed(other) == untimed(local)
    assert "servers" not in other["configs"]["geolayer"]


@pytest.mark.slow  # starts 5 region-server processes per executor run (~5-20 s)
@pytest.mark.multiprocess
def test_servers_run_inside_every_executor(other_executor: str) -> None:
    # The servers step starts region-server processes from inside a step: a
    # process-executor worker (a daemon) and a Ray worker must both allow that.
    params = {**TINY, "configs": "geolayer,geolayer-random", "server_requests": 20}
    local = execute(geo_job(**params), "local").outputs
    other = execute(geo_job(**params), other_executor).outputs
    assert untimed(other) == untimed(local)
    for outputs in (local, other):
        for row in outputs["configs"].values():
            assert row["servers"]["requests"] == 20
            assert row["servers"]["a1"]["failed"] == 0


@pytest.fixture(scope="module")
def twin_outputs() -> dict[str, Any]:
    params = {**TINY, "configs": CONFIGS, "server_requests": 0}
    return execute(geo_job(**params)).outputs


def test_summary_matches_hand_counts(twin_outputs: dict[str, Any]) -> None:
    cfg = GeoWorkloadConfig(num_vertices=1000, history_ops=800, test_ops=150)
    payload = generate(cfg, "table1", seed=3)
    test = Requests(**payload["test"])
    reads = ~test.is_write
    item_bytes = payload["item_bytes"].astype(np.int64)
    rows = twin_outputs["configs"]
    assert list(rows) == CONFIGS.split(",")
    # Every read item is served once: row o of served_by sums to origin o's items.
    per_read = np.diff(test.indptr)
    for row in rows.values():
        expected = np.bincount(test.origin[reads], per_read[reads], minlength=5)
        np.testing.assert_array_equal(np.sum(row["served_by"], axis=1), expected)
    full, home = rows["full-replication"], rows["home-only"]
    assert full["storage_bytes"] == 5 * item_bytes.sum()
    assert home["storage_bytes"] == item_bytes.sum()
    assert full["local_only_fraction"] == 1.0
    assert full["regions_contacted_mean"] == 1.0
    assert np.count_nonzero(np.asarray(full["served_by"]) * (1 - np.eye(5))) == 0
    # single-primary: USE serves every read
    primary = np.asarray(rows["single-primary"]["served_by"])
    assert primary[:, 1:].sum() == 0
    assert rows["single-primary"]["storage_bytes_per_region"][1:] == [0.0] * 4
    assert twin_outputs["seed"] == 3
    assert twin_outputs["regions"] == ["USE", "USW", "LON", "SGP", "BJS"]


def test_latencies_are_the_twins(twin_outputs: dict[str, Any]) -> None:
    # Oracle: the library's twin run directly on the same workload and placement.
    cfg = GeoWorkloadConfig(num_vertices=1000, history_ops=800, test_ops=150)
    payload = generate(cfg, "table1", seed=3)
    w = workload_of(payload, cfg)
    topology = topology_of("table1")
    placed = place(payload, workload=cfg, placements=("random3",), seed=3)["random3"]
    space = ItemSpace(1000, w.space.num_edges, w.space.item_bytes, placed["home"])
    placement = Placement(placed["holders"])
    tree = layer_tree(w, topology)
    router = router_of("random", placement, topology, tree, seed=3)
    result = simulate(w.test, placement, router, topology, space=space)
    reads = ~w.test.is_write
    latency = result.latency_ms[reads]
    row = twin_outputs["configs"]["random3-random"]
    assert row["read_ms"]["p50"] == pytest.approx(np.percentile(latency, 50), abs=1e-3)
    assert row["read_ms"]["p99"] == pytest.approx(np.percentile(latency, 99), abs=1e-3)
    violated = result.latency_ms > w.test.slo_ms
    assert row["slo_violation_rate"] == pytest.approx(violated[reads].mean(), abs=1e-6)
    assert row["cdf_ms"][0] == pytest.approx(latency.min(), abs=1e-3)
    assert row["cdf_ms"][-1] == pytest.approx(latency.max(), abs=1e-3)
    assert row["cost_per_hour"]["total_usd"] == pytest.approx(result.cost.total_usd)


def test_cli_report_plots(tmp_path: Path) -> None:
    report = tmp_path / "geo.json"
    settings = [f"--set={k}={v}" for k, v in {**TINY, "configs": CONFIGS}.items()]
    job = str(Path(geo_bench.__file__))
    argv = ["run", job, *settings, "--set=server_requests=0"]
    assert main([*argv, "--report", str(report), "--quiet"]) == 0
    data = json.loads(report.read_text())
    assert data["status"] == "ok"
    picture = tmp_path / "geo.png"
    assert main(["plot", str(report), "--out", str(picture)]) == 0
    assert picture.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"configs": "geolayer,nope"}, r"configurations.*'nope'"),
        ({"time_scale": 0.0}, r"time_scale"),
        ({"server_requests": -1}, r"server_requests"),
        ({"topology": "flat"}, r"topology"),
    ],
)
def test_bad_parameters_are_clear_errors(params: dict[str, Any], expected: str) -> None:
    with pytest.raises((JobError, ValueError), match=expected):
        geo_job(**params)


@pytest.mark.parametrize(
    "module", [geo_bench_steps, geo_report, plot_geo], ids=lambda m: m.__name__
)
def test_doctests(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
