"""O3 helpers: the graphs of tdorch.md (G1 RMAT symmetrised, G2 Zipf sources), results.

``scale`` shrinks both for quick runs: G1 is RMAT at ``18 + scale_shift`` and G2 has
``2**(20 + scale_shift)`` vertices and ``8M * 2**scale_shift`` sampled edges.
"""

from __future__ import annotations

import functools
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from strata.storage.csr import CSRGraph, DuplicatePolicy, SelfLoopPolicy
from strata.storage.generators.rmat import rmat
from strata.storage.generators.zipf import zipf_source_graph


@functools.cache
def g1(scale_shift: int = 0) -> CSRGraph:
    """RMAT scale 18 (edge factor 16), symmetrised, loops and duplicates removed."""
    return rmat(
        18 + scale_shift,
        16,
        seed=0,
        symmetrize=True,
        self_loops=SelfLoopPolicy.REMOVE,
        duplicates=DuplicatePolicy.REMOVE,
    )


@functools.cache
def g2(alpha: float, scale_shift: int = 0) -> CSRGraph:
    """2**20 vertices, 8M Zipf(alpha)-source edges, uniform destinations, deduped."""
    factor = 2.0**scale_shift
    return zipf_source_graph(
        1 << (20 + scale_shift),
        int(8_000_000 * factor),
        alpha=alpha,
        seed=0,
        weights=True,
    )


def describe(name: str, graph: CSRGraph) -> str:
    """``G2 a=1.2 (1048576 vertices, 6919323 edges, top source 11.6%)``."""
    top = int(graph.out_degree().max()) / max(graph.num_edges, 1)
    return (
        f"{name} ({graph.num_nodes} vertices, {graph.num_edges} edges, "
        f"top source {100 * top:.1f}% of edges)"
    )


RESULTS = Path(__file__).resolve().parents[2] / "results" / "tdorch_graph.json"


def write_rows(rows: list[dict[str, Any]], kind: str, path: Path = RESULTS) -> None:
    """Replace the rows of ``kind`` (``model`` or ``real``) in the results file."""
    data: dict[str, Any] = {"topic": "tdorch_graph", "rows": []}
    if path.exists():
        data = json.loads(path.read_text())
    kept = [row for row in data["rows"] if row.get("kind") != kind]
    data["rows"] = kept + [{**row, "kind": kind} for row in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def command() -> str:
    """The exact command line that is running (for the results rows)."""
    return " ".join([".venv/bin/python", *(shlex.quote(a) for a in sys.argv)])
