"""``strata plot`` on a recsys table: variants with seed error bars, task weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from strata.operators.cli.main import main
from strata.operators.cli.plot_recsys import mean_std, recsys_table

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TABLE = {
    "seeds": [0, 1, 2],
    "variants": {
        "B0": {"recall@20": [0.10, 0.11, 0.09], "ndcg@20": [0.05, 0.06, 0.05]},
        "E2E": {"recall@20": [0.14, 0.15, 0.13], "ndcg@20": [0.07, 0.08, 0.07]},
    },
    "gradnorm": {
        "E2E": {
            "step": [0, 10, 20],
            "weights": {"rank": [1, 1.2, 1.3], "long_view": [1, 0.9, 0.8]},
        }
    },
}


def test_mean_std_is_numpys_sample_statistics() -> None:
    np = pytest.importorskip("numpy")
    values = [0.1, 0.25, 0.4]
    mean, std = mean_std(values)
    assert mean == pytest.approx(np.mean(values))
    assert std == pytest.approx(np.std(values, ddof=1))
    assert mean_std([0.3]) == (0.3, 0.0)


def test_the_table_is_found_in_a_run_report_and_a_harness_file() -> None:
    assert recsys_table({"outputs": {"recsys": TABLE}, "steps": {}}) is TABLE
    assert recsys_table({"topic": "e2egrec", "recsys": TABLE}) is TABLE
    assert recsys_table({"outputs": {"test_accuracy": 0.5}, "steps": {}}) is None


@pytest.mark.parametrize("where", ["report", "harness"])
def test_draws_variants_and_weights(tmp_path: Path, where: str) -> None:
    pytest.importorskip("matplotlib")
    if where == "report":
        data: dict[str, object] = {"steps": {}, "outputs": {"recsys": TABLE}}
    else:
        data = {"topic": "e2egrec", "recsys": TABLE}
    path = tmp_path / "in.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "pic.svg"
    assert main(["plot", str(path), "--out", str(out)]) == 0
    svg = out.read_text()
    for text in ("Recall@20", "NDCG@20", "GradNorm task weights", "E2E rank"):
        assert text in svg
