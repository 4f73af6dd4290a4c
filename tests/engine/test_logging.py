"""What a run shows while it runs: epoch lines as they happen, -v/-q, Ctrl-C."""

from __future__ import annotations

import io
import json
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from strata.engine.progress import (
    BarHandler,
    configure_logging,
    progress_extra,
    reset_logging,
)

ROOT = Path(__file__).resolve().parents[2]
STRATA = [str(Path(sys.executable).parent / "strata")]
log = logging.getLogger("strata.tests")


@pytest.fixture(autouse=True)
def _reset() -> None:
    yield
    reset_logging()


def test_levels_follow_verbosity() -> None:
    out = io.StringIO()
    configure_logging(-1, stream=out)
    log.info("hidden")
    log.warning("shown")
    configure_logging(0, stream=out)
    log.info("epoch line")
    log.debug("hidden too")
    configure_logging(1, stream=out)
    log.debug("detail")
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["warning: shown", "epoch line"]
    assert lines[2].endswith("DEBUG strata.tests: detail")
    assert len(lines) == 3


def test_bars_show_progress_records_and_print_the_rest() -> None:
    out = io.StringIO()
    configure_logging(0, bars=True, stream=out)
    assert any(isinstance(h, BarHandler) for h in logging.getLogger("strata").handlers)
    for n in (1, 2):
        log.info(
            "epoch %d",
            n,
            extra=progress_extra(
                "train epochs", n, 3, unit="epoch", values={"loss": "0.5"}
            ),
        )
    log.info("done", extra=progress_extra("train epochs", 2, 3, done=True))
    log.info("a plain line")
    text = out.getvalue()
    assert "train epochs" in text
    assert "2/3" in text
    assert "loss 0.5" in text
    assert "a plain line" in text
    assert "epoch 1" not in text  # progress records move the bar, not print


def _cora(*extra: str) -> list[str]:
    return [*STRATA, "run", "jobs/cora_gcn.py", "--set", "patience=0", *extra]


def _default_sigint() -> None:
    # A shell without job control starts background commands with SIGINT ignored,
    # and Python then keeps it ignored; the Ctrl-C test needs the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_default_sigint,
    )


@pytest.mark.timeout(120)
def test_a_pipe_sees_each_epoch_as_it_ends() -> None:
    # stdout and stderr into one pipe, read line by line: the first epoch line
    # must arrive long before the 200th epoch ends.
    start = time.monotonic()
    arrivals = {}
    with _start(_cora("--set", "epochs=200")) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "epoch 1/200" in line or "epoch 200/200" in line:
                arrivals[line.split()[2]] = time.monotonic() - start
        assert proc.wait() == 0
    end = time.monotonic() - start
    assert set(arrivals) == {"1/200", "200/200"}
    assert end - arrivals["1/200"] > 0.5  # 199 epochs still to run when it came
    assert arrivals["1/200"] < arrivals["200/200"]


@pytest.mark.timeout(120)
def test_ctrl_c_writes_an_interrupted_report(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    with _start(_cora("--set", "epochs=100000", "--report", str(report))) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "epoch 2/" in line:
                proc.send_signal(signal.SIGINT)
                break
        rest = proc.stdout.read()
        assert proc.wait() == 130
    assert "strata run: interrupted" in rest
    data = json.loads(report.read_text())
    assert data["status"] == "interrupted"
    assert data["error"] == "KeyboardInterrupt"


def test_quiet_prints_no_epoch_lines(capsys: pytest.CaptureFixture[str]) -> None:
    from strata.operators.cli.main import main

    argv = ["run", "jobs/cora_gcn.py", "--set", "epochs=2", "--report", "-"]
    assert main([*argv, "-q"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["outputs"]["curves"]["val_loss"]
    assert "epoch 1/2" not in captured.err
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["status"] == "ok"  # stdout: the report alone
    assert "train: epoch 1/2" in captured.err


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
def test_the_process_executor_prints_epoch_lines_too() -> None:
    """The trainer runs in a worker process there; its records reach stderr."""
    argv = _cora("--set", "epochs=3", "--set", "patience=0", "--executor", "process")
    with _start(argv) as proc:
        out, _ = proc.communicate()
    assert proc.returncode == 0, out
    assert [line.split()[2] for line in out.splitlines() if " epoch " in line][:3] == [
        "1/3",
        "2/3",
        "3/3",
    ]
