"""The strata.* namespace: every package folder is installed, and --version."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

from strata.operators.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
TOP = ("engine", "operators", "storage", "partition", "jobs")


def test_pyproject_installs_every_package_folder_under_strata() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {f"strata.{top}": top for top in TOP}
    folders = {
        "strata." + ".".join(init.parent.relative_to(ROOT).parts)
        for top in TOP
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert set(config["packages"]) == folders  # a new package folder is listed


def test_version_comes_from_the_package_metadata(capsys) -> None:
    assert main(["--version"]) == 0
    expected = importlib.metadata.version("strata-gnn")
    assert capsys.readouterr().out.strip() == f"strata {expected}"
