"""degree_stats against numpy, on every executor and through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from strata.engine import execute
from strata.jobs import degree_stats
from strata.operators.cli.main import main

SMALL = {"num_edges": 150_000, "num_nodes": 5000, "seed": 3, "batch_rows": 16_384}


def oracle(num_edges: int, num_nodes: int, seed: int, batch_rows: int) -> dict:
    edges = pa.Table.from_batches(
        list(degree_stats.edge_batches(num_edges, num_nodes, seed, batch_rows))
    )
    src = edges.column("src").to_numpy()
    dst = edges.column("dst").to_numpy()
    out_degree = np.bincount(src, minlength=num_nodes)
    in_degree = np.bincount(dst, minlength=num_nodes)
    degree = out_degree + in_degree
    ordered = np.sort(degree)
    top = sorted(range(num_nodes), key=lambda node: (-degree[node], node))[:10]
    histogram = np.bincount([int(d).bit_length() for d in degree]).tolist()
    return {
        "in": in_degree,
        "out": out_degree,
        "outputs": {
            "num_nodes": num_nodes,
            "num_edges": num_edges,
            "isolated_nodes": int((degree == 0).sum()),
            "degree_mean": round(2 * num_edges / num_nodes, 6),
            "degree_p50": int(ordered[int(0.5 * (num_nodes - 1))]),
            "degree_p90": int(ordered[int(0.9 * (num_nodes - 1))]),
            "degree_p99": int(ordered[int(0.99 * (num_nodes - 1))]),
            "degree_p999": int(ordered[int(0.999 * (num_nodes - 1))]),
            "degree_max": int(degree.max()),
            "in_degree_max": int(in_degree.max()),
            "out_degree_max": int(out_degree.max()),
            "degree_log2_histogram": histogram,
            "top_nodes": top,
            "top_degrees": [int(degree[node]) for node in top],
        },
    }


@pytest.mark.parametrize("shards", [1, 3])
def test_degrees_and_outputs_match_numpy(executor: str, shards: int) -> None:
    # On Ray each shard of the keyed step is its own actor.
    expected = oracle(**SMALL)
    result = execute(
        degree_stats.build(degree_stats.DegreeStatsConfig(**SMALL, shards=shards)),
        executor,
        collect=("degrees",),
    )
    assert result.outputs == expected["outputs"]
    per_shard = result.collected["degrees"]
    assert len(per_shard) == shards
    table = pa.Table.from_batches(per_shard)
    nodes = table.column("node").to_numpy()
    assert len(np.unique(nodes)) == len(nodes)  # each node counted by one shard only
    in_degree = np.zeros(SMALL["num_nodes"], dtype=np.int64)
    out_degree = np.zeros(SMALL["num_nodes"], dtype=np.int64)
    in_degree[nodes] = table.column("in_degree").to_numpy()
    out_degree[nodes] = table.column("out_degree").to_numpy()
    np.testing.assert_array_equal(in_degree, expected["in"])
    np.testing.assert_array_equal(out_degree, expected["out"])


def test_edge_list_is_seeded_and_power_law_like() -> None:
    first = degree_stats.rmat_batch(50_000, 1 << 12, seed=1, index=0)
    assert first.equals(degree_stats.rmat_batch(50_000, 1 << 12, seed=1, index=0))
    assert not first.equals(degree_stats.rmat_batch(50_000, 1 << 12, seed=2, index=0))
    src = first.column("src").to_numpy()
    assert src.min() >= 0
    assert src.max() < 1 << 12
    degree = np.bincount(src, minlength=1 << 12)
    assert degree.max() > 50 * degree.mean()  # skewed, unlike a uniform graph


def test_cli_outputs_identical_on_every_executor(
    other_executor: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = [f"--set={key}={value}" for key, value in SMALL.items()]
    outputs = {}
    for name in ("local", other_executor):
        report = tmp_path / f"{name}.json"
        argv = ["run", "jobs/degree_stats.py", *settings, "--report", str(report)]
        assert main([*argv, "--executor", name, "--quiet"]) == 0
        data = json.loads(report.read_text())
        assert data["executor"] == name
        assert data["status"] == "ok"
        outputs[name] = data["outputs"]
    assert outputs["local"] == outputs[other_executor] == oracle(**SMALL)["outputs"]
    assert "top 10 nodes" in capsys.readouterr().out


def test_help_lists_every_parameter_and_bad_values_name_it() -> None:
    from strata.engine.job import JobError, job_config, job_spec

    rows = {p.name: p for p in job_spec(degree_stats).parameters()}
    assert list(rows) == ["num_edges", "num_nodes", "seed", "batch_rows", "shards"]
    assert (rows["num_edges"].type, rows["num_edges"].default) == ("int", "4000000")
    assert rows["shards"].doc.startswith("shards of the degree-counting step")
    assert job_config(degree_stats, num_edges="1_000").num_edges == 1000
    with pytest.raises(JobError, match=r"--set shards: shards in DegreeStatsConfig"):
        job_config(degree_stats, shards=0)
