"""The README's job example runs as written (so the README cannot drift)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import networkx as nx
import numpy as np

from strata.operators.cli.main import main
from strata.storage import load_graph

README = Path(__file__).resolve().parents[1] / "README.md"


def _example_job() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    (job,) = [b for b in blocks if "def build(" in b]
    return job


def test_readme_job_runs_and_its_cut_matches_networkx(tmp_path: Path) -> None:
    job = tmp_path / "partition_report.py"
    job.write_text(_example_job())
    report = tmp_path / "report.json"
    argv = ["run", str(job), "--set", "k=2", "--quiet", "--report", str(report)]
    assert main(argv) == 0
    outputs = json.loads(report.read_text())["outputs"]
    assert sum(outputs["part_sizes"]) == 2708

    # The cut fraction is a real cut of Cora: recompute it from the parts' sizes
    # alone is impossible, so rerun the partitioner and count with networkx.
    from strata.partition import MultilevelPartitioner

    graph = load_graph("planetoid:cora").graph
    part = MultilevelPartitioner(k=2).partition(graph)
    g = nx.Graph()
    src = np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))
    g.add_edges_from(zip(src.tolist(), graph.indices.tolist(), strict=True))
    g.remove_edges_from(nx.selfloop_edges(g))
    owner = part.assignment
    cut = sum(1 for u, v in g.edges if owner[u] != owner[v])
    assert outputs["edge_cut_fraction"] == cut / g.number_of_edges()


def test_readme_layer_runs_on_every_execution() -> None:
    """The "Writing a layer" example: full graph, and the streaming rule."""
    import torch

    from strata.operators.streaming.model import StreamingModel

    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    (code,) = [b for b in blocks if "(MessagePassing)" in b]
    scope: dict[str, object] = {"__name__": "readme_layer"}
    exec(compile(code, "README.md", "exec"), scope)
    model = scope["model"]
    graph = load_graph("planetoid:cora")
    x = torch.from_numpy(graph.x)
    out = model(graph.graph, x)  # type: ignore[operator]
    assert out.shape == (2708, 7)
    streaming = StreamingModel.from_module(model)  # type: ignore[arg-type]
    assert (streaming.in_dim, streaming.out_dim) == (1433, 7)
