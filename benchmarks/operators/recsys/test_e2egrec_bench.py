"""pytest-benchmark wrapper of the E2E-GRec acceptance harness.

``test_epoch`` times one training epoch of E2E and of A2 (the same tasks and
passes with fixed weights: the difference is GradNorm) on the smoke
configuration, 5 rounds after a warm-up round, with GradNorm's share of the step
time in ``extra_info``. ``test_harness_rows`` runs the harness end to end on a
tiny configuration (no timing), so its gates cannot rot unnoticed::

    .venv/bin/python -m pytest benchmarks/operators/recsys/test_e2egrec_bench.py \\
        -p no:cacheprovider
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from strata.operators.recsys.features import build_features
from strata.operators.recsys.graph import build_typed_graph
from strata.operators.recsys.split import temporal_split
from strata.operators.recsys.step import train_variant
from strata.operators.recsys.synth import SynthConfig, synth_interactions
from strata.operators.recsys.train import RecConfig

HARNESS = Path(__file__).with_name("e2egrec_acceptance.py")


@pytest.fixture(scope="module")
def smoke() -> tuple[Any, Any, Any]:
    import torch

    torch.set_num_threads(2)
    split = temporal_split(synth_interactions(SynthConfig.smoke(), seed=0))
    return build_typed_graph(split), build_features(split), split


@pytest.mark.parametrize("variant", ["E2E", "A2"])
def test_epoch(benchmark: Any, smoke: tuple[Any, Any, Any], variant: str) -> None:
    graph, features, split = smoke
    cfg = RecConfig(variant=variant, epochs=1)
    trained = benchmark.pedantic(
        train_variant,
        args=(cfg, graph, features, split),
        rounds=5,
        warmup_rounds=1,
    )
    times = trained.times.as_dict()
    busy = sum(times[p] for p in ("sampling", "forward", "gradnorm", "backward"))
    benchmark.extra_info["gradnorm_share"] = times["gradnorm"] / busy
    benchmark.extra_info["samples_per_s"] = times["samples"] / busy
    assert len(trained.val_history) == 1


def test_harness_rows(tmp_path: Path) -> None:
    out = tmp_path / "e2egrec.json"
    argv = [sys.executable, str(HARNESS), "--users", "300", "--items", "150"]
    argv += ["--epochs", "1", "--seeds", "0,1", "--skip-g4", "--skip-g5"]
    subprocess.run([*argv, "--out", str(out)], check=True, capture_output=True)
    spec = importlib.util.spec_from_file_location("results_table", _table())
    assert spec is not None
    assert spec.loader is not None
    table = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("results_table", table)  # its dataclasses look it up
    spec.loader.exec_module(table)
    rows = table.load_rows(tmp_path)
    gates = {r.work.split(":")[0] for r in rows}
    assert {"G0", "G1", "G2", "G3"} <= gates
    assert (tmp_path / "e2egrec_variants.png").exists()


def _table() -> Path:
    return Path(__file__).resolve().parents[2] / "results_table.py"
