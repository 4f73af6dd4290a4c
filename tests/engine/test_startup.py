"""What the ``strata`` command imports before it does any work.

Heavy libraries (torch, numba, torch._dynamo) cost seconds to import, so a
command that does not need them must not load them: each check runs the command
in a fresh interpreter and reads its ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from strata.engine.cli import OPENMP_WAIT_SETTINGS, passive_openmp_threads
from strata.operators.cli.main import main

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import contextlib, io, json, sys
from strata.operators.cli.main import main
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
heavy = ("torch", "torch._dynamo", "numba", "sympy")
print(json.dumps([m for m in heavy if m in sys.modules]))
"""


def imported_after(*argv: str) -> list[str]:
    """The heavy modules loaded by ``strata ARGV`` (run in a new interpreter)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_help_does_not_import_torch() -> None:
    assert imported_after("--help") == []


def test_describe_of_an_engine_job_does_not_import_torch() -> None:
    assert imported_after("describe", "strata.engine._example_job") == []


def test_job_help_does_not_import_dynamo() -> None:
    # The job's own modules need torch, but torch._dynamo (about 1 s, what
    # torch.optim imports when it builds an optimiser) waits for training.
    loaded = imported_after("run", "jobs/cora_gcn.py", "--help")
    assert "torch" in loaded
    assert "torch._dynamo" not in loaded
    assert "sympy" not in loaded


def test_version_is_the_installed_distributions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # looked up only when asked for (finding it reads every installed package)
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"strata {metadata.version('strata-gnn')}\n"


def test_openmp_threads_sleep_when_idle_unless_the_user_chose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in OPENMP_WAIT_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    assert main(["describe", "strata.engine._example_job"]) == 0
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setenv("GOMP_SPINCOUNT", "10000")
    passive_openmp_threads()
    assert "OMP_WAIT_POLICY" not in os.environ
