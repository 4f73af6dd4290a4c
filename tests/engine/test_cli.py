"""``strata run`` and ``strata describe`` through ``main(argv, commands)``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from strata.engine.cli import main
from strata.engine.command import LazyCommand

JOB = "strata.engine._example_job"


def test_run_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "r.json"
    assert main(["run", JOB, "--set", "count=5", "--report", str(report)]) == 0
    out, err = capsys.readouterr()
    assert out == "total = 10\n"
    assert "items in" in err  # the step table (not --quiet)
    data = json.loads(report.read_text())
    assert {"job", "executor", "params", "status", "error", "steps", "outputs"} <= set(
        data
    )
    assert data["params"] == {"count": 5}
    assert data["status"] == "ok"
    assert data["error"] is None
    assert data["outputs"] == {"total": 10}
    step = data["steps"]["total"]
    assert {
        "items_in",
        "items_out",
        "bytes_out",
        "busy_s",
        "blocked_s",
        "wall_s",
    } <= set(step)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["run", JOB, "--set", "size=4"],
            "unknown parameter 'size'; valid parameters: count",
        ),
        (["run", JOB, "--set", "count=four"], "--set count in "),
        (["run", "no/such/job.py"], "does not exist"),
        (["run", JOB, "--executor", "spark"], "invalid choice: 'spark'"),
    ],
)
def test_usage_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_describe_mermaid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe", JOB, "--mermaid"]) == 0
    assert capsys.readouterr().out.startswith("flowchart LR\n")


class Hello:
    name = "hello"
    help = "say hello"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("who")

    def run(self, args: argparse.Namespace) -> int:
        print(f"hello {args.who}")
        return 0


def test_extra_commands_plug_in(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hello", "strata"], [Hello()]) == 0
    assert capsys.readouterr().out == "hello strata\n"


def test_lazy_commands_import_only_when_chosen(
    capsys: pytest.CaptureFixture[str],
) -> None:
    missing = LazyCommand("later", "never imported", "no_such_module_anywhere:Command")
    assert main(["describe", JOB], [missing]) == 0
    assert "later" in _help(capsys, [missing])
    with pytest.raises(ModuleNotFoundError):
        main(["later"], [missing])
    lazy = LazyCommand("hello", "say hello", "strata.engine.command:_Example")
    assert main(["hello", "strata"], [lazy]) == 0
    assert capsys.readouterr().out.endswith("hello strata\n")


def _help(capsys: pytest.CaptureFixture[str], commands: list[LazyCommand]) -> str:
    capsys.readouterr()
    assert main(["--help"], commands) == 0
    return capsys.readouterr().out


def test_job_rejecting_a_value_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "picky_job.py"
    job.write_text(
        "def build(mode: str = 'a'):\n"
        "    raise ValueError(f'mode: expected a or b, got {mode!r}')\n"
    )
    assert main(["run", str(job), "--set", "mode=c"]) == 2
    err = capsys.readouterr().err
    assert "build(): mode: expected a or b, got 'c'" in err
    assert "Traceback" not in err
