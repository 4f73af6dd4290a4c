"""The child-process boot shared by the feature and region servers."""

from __future__ import annotations

import doctest
import tempfile
from pathlib import Path
from typing import NoReturn

import pytest

from strata.storage import _spawn
from strata.storage._spawn import (
    await_ready,
    package_paths,
    start_child,
    startup_error,
)
from strata.storage.geo.errors import GeoError


def test_docstring_examples() -> None:
    result = doctest.testmod(_spawn)
    assert result.failed == 0
    assert result.attempted > 0


def test_package_paths_are_the_package_folders() -> None:
    paths = dict(package_paths("geo", "features"))
    assert list(paths) == [
        "strata",
        "strata.storage",
        "strata.storage.features",
        "strata.storage.geo",
    ]
    assert all((Path(p) / "__init__.py").exists() for p in list(paths.values())[1:])


def test_a_child_that_exits_is_a_startup_error_quoting_its_stderr() -> None:
    # errors.py has no _child_main: the boot imports the module through the
    # stand-ins (no torch) and the child dies on the missing name.
    spec = {"packages": package_paths("geo")}
    with tempfile.TemporaryFile() as log:
        proc = start_child("strata.storage.geo.errors", spec, log)

        def fail(key: int, got: str) -> NoReturn:
            raise startup_error(GeoError, f"test server {key}", got, log)

        try:
            with pytest.raises(GeoError, match="exited before") as caught:
                await_ready({7: proc}, 60.0, fail)
        finally:
            proc.wait(60)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
    message = str(caught.value)
    assert "test server 7" in message
    assert "cannot import name '_child_main'" in message
    assert "torch" not in message
