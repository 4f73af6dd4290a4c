"""The interaction-table loader: string ids from CSV and Parquet, and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from strata.operators.recsys.interactions import load_interactions
from strata.operators.recsys.split import temporal_split
from strata.storage.errors import FormatError

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROWS = {
    "user": ["ann", "bob", "ann", "cy", "bob", "ann"],
    "item": ["tea", "tea", "jam", "jam", "bun", "bun"],
    "timestamp": [5, 1, 2, 9, 4, 7],
    "label": [1, 0, 0, 1, 1, 0],
}


def _csv(path: Path, rows: dict[str, list[object]]) -> Path:
    names = list(rows)
    lines = [",".join(names)]
    lines += [
        ",".join(str(rows[n][i]) for n in names) for i in range(len(rows[names[0]]))
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _check(inter_path: Path) -> None:
    inter = load_interactions(inter_path)
    assert inter.user_ids.to_pylist() == ["ann", "bob", "cy"]
    assert inter.item_ids.to_pylist() == ["bun", "jam", "tea"]
    users = np.array(inter.user_ids.to_pylist())[inter.user].tolist()
    items = np.array(inter.item_ids.to_pylist())[inter.item].tolist()
    assert users == ROWS["user"]
    assert items == ROWS["item"]
    assert inter.timestamp.tolist() == ROWS["timestamp"]
    assert inter.label is not None
    assert inter.label.tolist() == ROWS["label"]
    assert inter.domains == ("all",)


def test_csv_with_string_ids(tmp_path: Path) -> None:
    _check(_csv(tmp_path / "events.csv", ROWS))


def test_parquet_with_string_ids(tmp_path: Path) -> None:
    path = tmp_path / "events.parquet"
    pq.write_table(pa.table(ROWS), path)
    _check(path)


def test_dates_parse_and_keep_order(tmp_path: Path) -> None:
    rows = {**ROWS, "timestamp": [f"2024-05-0{d}T10:00:00" for d in (5, 1, 2, 9, 4, 7)]}
    inter = load_interactions(_csv(tmp_path / "dates.csv", rows))
    assert (
        np.argsort(inter.timestamp).tolist() == np.argsort(ROWS["timestamp"]).tolist()
    )


def test_missing_column_is_named(tmp_path: Path) -> None:
    rows = {k: v for k, v in ROWS.items() if k != "timestamp"}
    with pytest.raises(
        FormatError, match=r"column 'timestamp'.*columns \['user', 'item', 'label'\]"
    ):
        load_interactions(_csv(tmp_path / "no_time.csv", rows))


def test_unparsable_timestamp_names_its_line(tmp_path: Path) -> None:
    rows = {**ROWS, "timestamp": [5, 1, 2, "yesterday", 4, 7]}
    # Row 3 (0-based) is line 5 of the file (line 1 is the header).
    with pytest.raises(FormatError, match=r"bad_time\.csv:5.*'yesterday'"):
        load_interactions(_csv(tmp_path / "bad_time.csv", rows))


def test_unparsable_timestamp_in_parquet_names_its_row(tmp_path: Path) -> None:
    path = tmp_path / "bad_time.parquet"
    rows = {**ROWS, "timestamp": ["5", "1", "2", "9", "soon", "7"]}
    pq.write_table(pa.table(rows), path)
    with pytest.raises(FormatError, match=r"row 4.*'soon'"):
        load_interactions(path)


def test_empty_id_and_bad_label_are_named(tmp_path: Path) -> None:
    path = tmp_path / "null.parquet"
    pq.write_table(pa.table({**ROWS, "user": ["ann", None, "a", "b", "c", "d"]}), path)
    with pytest.raises(FormatError, match=r"column 'user'.*row 1"):
        load_interactions(path)
    with pytest.raises(FormatError, match=r"column 'label'.*0 or 1, got 2"):
        load_interactions(
            _csv(tmp_path / "label.csv", {**ROWS, "label": [1, 0, 2, 1, 1, 0]})
        )


def test_users_without_train_are_skipped_and_counted(tmp_path: Path) -> None:
    # 10 events; "late" only acts in the last 20% (val/test): no train interaction.
    rows = {
        "user": ["a", "b", "a", "b", "a", "b", "a", "b", "late", "a"],
        "item": ["x", "y", "y", "x", "z", "z", "w", "w", "x", "v"],
        "timestamp": list(range(10)),
    }
    split = temporal_split(load_interactions(_csv(tmp_path / "late.csv", rows)))
    assert split.report.users_without_train == 1
    late = split.inter.user_ids.to_pylist().index("late")
    assert late not in split.eval_users.tolist()
    assert late not in split.val_users.tolist()


def test_integer_ids_with_gaps_keep_their_values(tmp_path: Path) -> None:
    path = tmp_path / "ints.parquet"
    table = {
        "user": pa.array([900, 7, 900], pa.int64()),
        "item": pa.array([2**63 + 5, 3, 3], pa.uint64()),  # above int64: kept exact
        "timestamp": [3, 1, 2],
    }
    pq.write_table(pa.table(table), path)
    inter = load_interactions(path)
    assert inter.user_ids.to_pylist() == [7, 900]
    assert inter.user.tolist() == [1, 0, 1]
    assert inter.item_ids.to_pylist() == ["3", str(2**63 + 5)]
    assert inter.item.tolist() == [1, 0, 0]
    assert inter.label is None
