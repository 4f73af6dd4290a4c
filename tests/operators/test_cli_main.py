"""The assembled ``strata`` entry point exposes every package's subcommands."""

import json
import re
from pathlib import Path

import pytest

from strata.operators.cli.main import main


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("run", "describe", "dataset", "partition", "ingest"):
        assert re.search(rf"^ {{4}}{command}\b", out, re.MULTILINE), command


def test_partition_command_through_the_entry_point(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    argv = ["partition", "planetoid:cora", "--k", "2", "--method", "random"]
    assert main([*argv, "--report", str(report)]) == 0
    data = json.loads(report.read_text())
    assert data["method"] == "random"
    assert data["k"] == 2
    assert sum(data["part_sizes"]) == 2708


def test_ingest_command_through_the_entry_point_names_a_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no_such_updates.parquet"
    assert main(["ingest", "tcp://127.0.0.1:1", str(missing)]) == 2
    assert "no_such_updates.parquet" in capsys.readouterr().err
