"""Running benchmark contenders in their own processes (Strata, PyG, DGL).

Every contender (Strata, PyG, DGL) runs in its own process through the same
harness (``gnn_harness.py``), so timings share one method and peak memory is each
process's own. ``STRATA_DGL_PYTHON`` names the DGL environment's interpreter
(default ``../dgl-env/bin/python`` next to the repository, as built by
``../shared/peers/dgl-env.sh``); without it the DGL contender is skipped with a
message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DGL_DIR = REPO / "benchmarks" / "peers" / "dgl"
PYG_SAMPLER_NOTE = (
    "PyG sampled training not run: torch_geometric.loader.NeighborLoader needs "
    "pyg-lib or torch-sparse, compiled extensions that are not on PyPI"
)


def dgl_python() -> Path | None:
    """The DGL environment's interpreter, or None when it is not installed."""
    configured = os.environ.get("STRATA_DGL_PYTHON")
    path = (
        Path(configured) if configured else REPO.parent / "dgl-env" / "bin" / "python"
    )
    return path if path.exists() else None


def run_json(argv: list[str], *, timeout: float = 1800) -> dict:
    """Run one contender process and parse the JSON line it prints last."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), env.get("PYTHONPATH", "")) if p
    )
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def strata_runner(script: str, data: Path, *extra: str) -> list[str]:
    """argv for a runner in this directory, under this interpreter."""
    return [sys.executable, str(HERE / script), "--data", str(data), *extra]


def dgl_runner(script: str, data: Path, *extra: str) -> list[str] | None:
    """argv for a DGL script, or None without the DGL environment."""
    python = dgl_python()
    if python is None:
        return None
    return [str(python), str(DGL_DIR / script), "--data", str(data), *extra]


def print_table(title: str, rows: list[tuple[str, ...]]) -> None:
    """Print an aligned table to the terminal (shown with -s or in the log)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [title] + [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows
    ]
    sys.stdout.write("\n" + "\n".join(lines) + "\n")
