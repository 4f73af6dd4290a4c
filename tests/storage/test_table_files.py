"""Reading a user's table file: the formats node and interaction tables accept."""

from __future__ import annotations

import doctest
import gzip
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from strata.storage import FormatError
from strata.storage.loaders import tables
from strata.storage.loaders.tables import read_table_file

EXPECTED = pa.table({"a": [1, 3], "b": [2, 4]})


def test_docstring_examples() -> None:
    result = doctest.testmod(tables)
    assert result.failed == 0
    assert result.attempted > 0


@pytest.mark.parametrize("name", ["t.csv", "t.tsv", "t.parquet", "T.PQ"])
def test_each_format_reads_the_same_table(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    if name.lower().endswith((".parquet", ".pq")):
        pq.write_table(EXPECTED, path)
    else:
        sep = "\t" if name.endswith(".tsv") else ","
        path.write_text(f"a{sep}b\n1{sep}2\n3{sep}4\n")
    assert read_table_file(path, "test", "table").equals(EXPECTED)


def test_gzipped_text_only_where_allowed(tmp_path: Path) -> None:
    path = tmp_path / "t.tsv.gz"
    path.write_bytes(gzip.compress(b"a\tb\n1\t2\n3\t4\n"))
    assert read_table_file(path, "test", "table", gzip=True).equals(EXPECTED)
    with pytest.raises(FormatError, match=r"t\.tsv\.gz in test: expected .*got '\.gz'"):
        read_table_file(path, "test", "table")


def test_a_truncated_parquet_file_names_the_file_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(EXPECTED, path)
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(FormatError, match=r"t\.parquet in test.*written again"):
        read_table_file(path, "test", "node table")
