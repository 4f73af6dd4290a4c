"""jobs/e2egrec: every executor, a user's table with string ids, bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pv
import pyarrow.parquet as pq
import pytest

from strata.engine import execute
from strata.engine.errors import StepError
from strata.engine.job import job_config
from strata.jobs import e2egrec
from strata.operators.cli.main import main
from strata.storage.errors import FormatError

#: A tiny run: 120 users, 60 items, narrow widths, 2 epochs.
TINY: dict[str, Any] = {
    "data.num_users": 120,
    "data.num_items": 60,
    "data.communities": 4,
    "data.max_per_user": 30,
    "train.dims.hidden": 8,
    "train.dims.id_dim": 4,
    "train.dims.tower_hidden": 8,
    "train.dims.tower_out": 8,
    "train.dims.fuse_dim": 8,
    "train.dims.head_hidden": 8,
    "fanouts": (4, 4),
    "batch_size": 256,
    "epochs": 2,
    "ks": (5, 10),
    "top_k": 5,
}


def run(executor: str = "local", **values: Any) -> dict[str, Any]:
    config = job_config(e2egrec, {**TINY, **values})
    return execute(e2egrec.build(config), executor).outputs


def untimed(outputs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in outputs.items() if k != "timing"}


def test_a_tiny_run_reports_every_variant(tmp_path: Path) -> None:
    outputs = run(variants=("B0", "B1", "E2E", "R"), output_dir=str(tmp_path))
    rows = {row["variant"]: row for row in outputs["variants"]}
    assert list(rows) == ["B0", "B1", "E2E", "R"]
    for row in rows.values():
        for key in ("recall@5", "recall@10", "ndcg@5", "ndcg@10"):
            assert 0.0 <= row[key] <= 1.0
        assert row["recall@5"] <= row["recall@10"]
    assert rows["R"]["long_view_auc"] is None is rows["R"].get("long_view_auc_std")
    assert 0.0 <= rows["E2E"]["long_view_auc"] <= 1.0
    assert "refresh_s" in outputs["timing"]["B1"]
    assert outputs["timing"]["E2E"]["gradnorm_share"] > 0.0
    weights = outputs["recsys"]["gradnorm"]["E2E"]["weights"]
    assert list(weights) == ["rank", "long_view", "gfae"]
    assert set(outputs["recommendations"]) == {"B0", "B1", "E2E", "R"}
    for name in ("B0", "B1", "E2E"):  # sampled inference, the gap to full (§4.5)
        sampled = rows[name]["sampled"]
        for key in ("recall@5", "recall@10", "ndcg@5", "ndcg@10"):
            assert 0.0 <= sampled[key] <= 1.0
            assert sampled[f"{key}_gap"] == pytest.approx(
                sampled[key] - rows[name][key]
            )
    assert rows["B0"]["sampled"]["recall@10_gap"] == 0.0  # no encoder: no sampling
    assert rows["E2E"]["sampled"]["ndcg@10_gap"] != 0.0  # fan-outs 4, 4 do sample
    assert rows["R"]["sampled"] is None
    text = e2egrec.render(outputs)
    assert "sampled inference E2E" in text
    assert "sampled inference R" not in text


def test_sampled_inference_with_every_neighbour_is_full_inference() -> None:
    # Fan-out -1 samples every neighbour: the sampled z is the full z, so the
    # sampled metrics equal the full ones and every gap is 0 (to rounding).
    outputs = run(variants=("E2E",), fanouts=(-1, -1), epochs=1)
    row = outputs["variants"][0]
    for key in ("recall@5", "recall@10", "ndcg@5", "ndcg@10"):
        assert row["sampled"][key] == pytest.approx(row[key])
        assert row["sampled"][f"{key}_gap"] == pytest.approx(0.0, abs=1e-9)


def test_every_training_step_checkpoints_and_resumes(tmp_path: Path) -> None:
    values = {"variants": ("B0", "R"), "checkpoint_dir": str(tmp_path)}
    first = run(**values)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train-B0.pt", "train-R.pt"]
    # Resuming finished runs trains nothing more and reports the same results.
    assert untimed(run(**values, resume=True)) == untimed(first)
    with pytest.raises(StepError, match="lr"):
        run(**values, resume=True, lr=0.01)


def test_same_seed_same_outputs() -> None:
    values = {"variants": ("E2E",)}
    assert untimed(run(**values)) == untimed(run(**values))  # G4: same executor


def test_outputs_identical_on_every_executor(other_executor: str) -> None:
    # One trained variant: on the process executor every step is a process that
    # imports torch and loads the numba kernels (~13-19 s for the test at load 14).
    values = {"variants": ("E2E",)}
    assert untimed(run(other_executor, **values)) == untimed(run(**values))


def _table(n_users: int = 40, n_items: int = 25, seed: int = 0) -> pa.Table:
    """Interactions with string ids: 6 per user, timestamps as ISO dates."""
    rng = np.random.default_rng(seed)
    users, items, times, labels = [], [], [], []
    for u in range(n_users):
        for i in rng.choice(n_items, 6, replace=False):
            users.append(f"user-{u:03d}")
            items.append(f"item-{(i * 7 + u) % n_items:03d}")
            times.append(f"2024-05-{1 + int(rng.integers(0, 28)):02d}T12:00:00")
            labels.append(int(rng.integers(0, 2)))
    return pa.table({"user": users, "item": items, "timestamp": times, "label": labels})


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_a_users_table_with_string_ids(tmp_path: Path, suffix: str) -> None:
    table = _table()
    path = tmp_path / f"events{suffix}"
    if suffix == ".csv":
        pv.write_csv(table, str(path))
    else:
        pq.write_table(table, str(path))
    out = tmp_path / "recs"
    outputs = run(interactions=str(path), variants=("B0", "E2E"), output_dir=str(out))
    assert {row["variant"] for row in outputs["variants"]} == {"B0", "E2E"}
    recs = pq.read_table(out / "recommendations_E2E.parquet")
    assert recs.column_names == ["user_id", "rank", "item_id", "score"]
    assert recs.schema.field("user_id").type == pa.string()
    seen = set(zip(table["user"].to_pylist(), table["item"].to_pylist(), strict=True))
    rows = recs.to_pylist()
    assert rows
    assert {r["user_id"] for r in rows} <= set(table["user"].to_pylist())
    assert {r["item_id"] for r in rows} <= set(table["item"].to_pylist())
    assert not any((r["user_id"], r["item_id"]) in seen for r in rows)
    first = [r for r in rows if r["user_id"] == rows[0]["user_id"]]
    assert [r["rank"] for r in first] == list(range(1, len(first) + 1))
    scores = [r["score"] for r in first]
    assert scores == sorted(scores, reverse=True)


def _failure(tmp_path: Path, table: pa.Table) -> BaseException:
    path = tmp_path / "bad.csv"
    pv.write_csv(table, str(path))
    with pytest.raises(StepError) as caught:
        run(interactions=str(path), variants=("B0",))
    assert caught.value.step == "load"
    cause = caught.value.__cause__
    assert isinstance(cause, FormatError)
    return cause


def test_a_missing_column_names_it(tmp_path: Path) -> None:
    error = _failure(tmp_path, _table().drop_columns(["timestamp"]))
    assert "'timestamp'" in str(error)
    assert "user, item" in str(error) or "['user', 'item'" in str(error)


def test_a_timestamp_that_does_not_parse_names_its_row(tmp_path: Path) -> None:
    table = _table()
    times = table["timestamp"].to_pylist()
    times[7] = "next tuesday"
    table = table.set_column(2, "timestamp", pa.array(times))
    error = _failure(tmp_path, table)
    assert "next tuesday" in str(error)
    assert "bad.csv:9" in str(error)  # header line 1, data row 7 -> line 9


def test_users_without_train_interactions_are_skipped_and_counted(
    tmp_path: Path,
) -> None:
    table = _table()
    late = {"user": [], "item": [], "timestamp": [], "label": []}
    for u in range(3):  # three users whose only interactions come last
        for i in range(2):
            late["user"].append(f"late-{u}")
            late["item"].append(f"item-{i:03d}")
            late["timestamp"].append("2024-07-01T00:00:00")
            late["label"].append(1)
    table = pa.concat_tables([table, pa.table(late)])
    path = tmp_path / "events.parquet"
    pq.write_table(table, str(path))
    out = tmp_path / "recs"
    outputs = run(interactions=str(path), variants=("B0",), output_dir=str(out))
    assert outputs["skipped_users"] == 3
    recs = pq.read_table(out / "recommendations_B0.parquet")
    assert not any(u.startswith("late-") for u in recs["user_id"].to_pylist())


def test_help_and_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "jobs/e2egrec.py", "--help"]) == 0
    assert "train.gradnorm.alpha" in capsys.readouterr().out
