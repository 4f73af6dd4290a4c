"""``strata plot``: a run report's curves, a benchmark file's bars, clear refusals."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from strata.operators.cli.main import main
from strata.operators.cli.plot import contenders

REPORT = {
    "job": "jobs/cora_gcn.py",
    "executor": "local",
    "status": "ok",
    "steps": {
        "load": {"busy_s": 0.2, "blocked_s": 0.0},
        "train": {"busy_s": 1.9, "blocked_s": 0.1},
    },
    "outputs": {
        "test_accuracy": 0.824,
        "loss_curve": [1.9, 1.5, 1.1],
        "curves": {"val_loss": [1.9, 1.6, None], "val_accuracy": [0.2, 0.5, 0.7]},
    },
}
BENCH = {
    "benchmarks": [
        {
            "name": "test_gcn_epoch_vs_peers",
            "stats": {"median": 1.0},
            "extra_info": {
                "strata_epoch_s": 1.0,
                "pyg_csr_epoch_s": 1.5,
                "dgl_epoch_s": 1.2,
                "strata_peak_rss_mb": 900,
                "pyg_csr_peak_rss_mb": 800,
                "dgl_peak_rss_mb": 1000,
                "strata_over_dgl": 0.83,
                "threads": 2,
            },
        },
        {"name": "test_smoke", "stats": {"median": 0.1}, "extra_info": {}},
    ]
}


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "in.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("data", [REPORT, BENCH], ids=["report", "benchmark"])
@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_draws_a_picture(tmp_path: Path, data: object, suffix: str) -> None:
    out = tmp_path / f"pic{suffix}"
    assert main(["plot", str(_write(tmp_path, data)), "--out", str(out)]) == 0
    head = out.read_bytes()[:200]
    assert head.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in head


def test_contenders_are_the_prefixes_with_every_measure() -> None:
    info = {
        "strata_seeds_per_s": 10.0,
        "strata_sampler_seeds_per_s": 30.0,  # a measure, not a contender
        "dgl_seeds_per_s": 8.0,
        "dgl_sampler_seeds_per_s": 20.0,
        "strata_over_dgl": 1.25,
    }
    assert contenders(info) == {
        "seeds_per_s": {"strata": 10.0, "dgl": 8.0},
        "sampler_seeds_per_s": {"strata": 30.0, "dgl": 20.0},
    }


def test_missing_matplotlib_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    path = _write(tmp_path, REPORT)
    assert main(["plot", str(path), "--out", str(tmp_path / "a.png")]) == 2
    err = capsys.readouterr().err
    assert "needs matplotlib" in err
    assert "strata-gnn[plot]" in err


@pytest.mark.parametrize(
    ("data", "out", "expected"),
    [
        ({"x": 1}, "a.png", "a run report"),
        (REPORT, "a.txt", ".png, .svg"),
    ],
)
def test_bad_inputs_are_usage_errors(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    data: object,
    out: str,
    expected: str,
) -> None:
    path = _write(tmp_path, data)
    assert main(["plot", str(path), "--out", str(tmp_path / out)]) == 2
    assert expected in capsys.readouterr().err


def test_a_missing_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.json"
    assert main(["plot", str(missing), "--out", str(tmp_path / "a.png")]) == 2
    assert "a readable JSON file" in capsys.readouterr().err
