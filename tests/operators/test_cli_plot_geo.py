"""``strata plot`` of a geo_bench run report: CDFs and read maps, clear refusals."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from strata.operators.cli.main import main
from strata.operators.cli.plot_geo import baseline_of, is_geo_report, shares

REGIONS = ["USE", "USW", "LON", "SGP", "BJS"]


def _config(local: float, scale: float) -> dict[str, Any]:
    cdf = (scale * np.geomspace(1.0, 300.0, 41)).round(3).tolist()
    served = np.full((5, 5), (1.0 - local) / 4 * 100)
    np.fill_diagonal(served, local * 100)
    return {"cdf_ms": cdf, "served_by": served.round().astype(int).tolist()}


REPORT: dict[str, Any] = {
    "job": "jobs/geo_bench.py",
    "executor": "local",
    "status": "ok",
    "steps": {"workload": {"busy_s": 0.5, "blocked_s": 0.0}},
    "outputs": {
        "seed": 0,
        "regions": REGIONS,
        "configs": {
            "geolayer": _config(0.9, 0.5),
            "random3-random": _config(0.3, 1.0),
            "single-primary": _config(0.2, 1.5),
        },
    },
}


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_draws_the_cdfs_and_both_maps(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"geo{suffix}"
    assert main(["plot", str(_write(tmp_path, REPORT)), "--out", str(out)]) == 0
    data = out.read_bytes()
    assert len(data) > 10_000
    if suffix == ".png":
        assert data.startswith(b"\x89PNG")
    else:
        text = data.decode()
        # one CDF line per configuration (in the legend), both maps' titles
        for name in REPORT["outputs"]["configs"]:
            assert name in text
        assert text.count("where reads were served") == 2
        assert "serving region" in text


def test_shares_are_row_fractions() -> None:
    matrix = [[3, 1, 0], [0, 0, 0], [2, 2, 4]]
    expected = np.array([[0.75, 0.25, 0], [0, 0, 0], [0.25, 0.25, 0.5]])
    np.testing.assert_allclose(shares(matrix), expected)


def test_baseline_is_random3_then_any_other() -> None:
    configs = REPORT["outputs"]["configs"]
    assert baseline_of(configs) == "random3-random"
    assert baseline_of({"geolayer": {}, "zeta": {}}) == "zeta"
    assert baseline_of({"geolayer": {}}) is None
    assert is_geo_report(REPORT)
    assert not is_geo_report({"steps": {}, "outputs": {"loss_curve": [1.0]}})


def _broken(path: str, value: object) -> dict[str, Any]:
    report = copy.deepcopy(REPORT)
    *parents, last = path.split(".")
    node = report
    for key in parents:
        node = node[key]
    node[last] = value
    return report


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("outputs.regions", [], "outputs.regions in strata plot: expected a non-empty"),
        ("outputs.configs", {}, "outputs.configs in strata plot: expected a non-empty"),
        (
            "outputs.configs.geolayer.served_by",
            [[1, 2], [3, 4]],
            "outputs.configs.geolayer.served_by in strata plot: expected a 5 x 5",
        ),
        (
            "outputs.configs.hash",
            {"served_by": [[0] * 5] * 5},
            "outputs.configs.hash.cdf_ms in strata plot: expected a non-empty "
            "ascending list",
        ),
        (
            "outputs.configs.geolayer.cdf_ms",
            [3.0, 2.0],
            "outputs.configs.geolayer.cdf_ms",
        ),
        (
            "outputs.configs.geolayer.served_by",
            [[-1] * 5] * 5,
            "non-negative counts",
        ),
    ],
)
def test_a_bad_report_is_one_clear_usage_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    path: str,
    value: object,
    expected: str,
) -> None:
    bad = _write(tmp_path, _broken(path, value))
    out = tmp_path / "geo.png"
    assert main(["plot", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("strata plot: ")
    assert expected in err
    assert not out.exists()
