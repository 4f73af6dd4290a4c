"""Failures end the run promptly, name the step, and leave nothing behind."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from engine_steps import (
    Endless,
    FailAt,
    KillSelf,
    MakeOpaque,
    Stuck,
    identity,
)

from strata.engine import (
    Map,
    Pipeline,
    PlanError,
    RemoteError,
    RunConfig,
    StepError,
    execute,
)
from strata.engine.cli import main
from strata.engine.testing import ListSink, ListSource

# The bound: a failed run ends within 2 s. Runs here start warm.
BOUND_S = 2.0


def _fail_after(at: int) -> Pipeline:
    p = Pipeline("failing")
    p.step("numbers", Endless())
    p.step("fail", FailAt(at), "numbers")
    p.step("after", Map(identity), "fail", shards=2, key=int)
    p.step("out", ListSink(), "after")
    return p


@pytest.mark.usefixtures("warm_process_executor", "no_leftovers")
def test_failing_step_ends_run_and_names_step(executor: str) -> None:
    start = time.monotonic()
    with pytest.raises(StepError) as info:
        execute(_fail_after(20), executor)
    assert time.monotonic() - start < BOUND_S
    error = info.value
    assert error.step == "fail"
    assert "in step 'fail'" in str(error)
    assert "engine_steps:FailAt.process" in str(error)
    assert "ValueError: boom at item 19" in str(error)
    expected_cause = ValueError if executor == "local" else RemoteError
    assert isinstance(error.__cause__, expected_cause)
    assert "boom at item 19" in str(error.__cause__)


@pytest.mark.usefixtures("warm_process_executor", "no_leftovers")
def test_failed_run_returns_a_failed_report_without_check(executor: str) -> None:
    result = execute(_fail_after(3), executor, check=False)
    assert not result.ok
    assert result.report.status == "failed"
    assert "in step 'fail'" in (result.report.error or "")


def _raise(items: list[int]) -> int:
    raise KeyError("missing")


@pytest.mark.usefixtures("no_leftovers")
def test_failing_batch_function_names_its_location(executor: str) -> None:
    p = Pipeline("batch-failure")
    p.step("numbers", ListSource([1, 2]))
    p.step("summary", _raise, "numbers")
    with pytest.raises(StepError, match=r"test_failures:_raise in step 'summary'"):
        execute(p, executor)


@pytest.mark.multiprocess
@pytest.mark.usefixtures("warm_process_executor", "no_leftovers")
def test_killed_worker_is_detected() -> None:
    p = Pipeline("killed")
    p.step("numbers", Endless())
    p.step("victim", KillSelf(), "numbers")
    p.step("out", ListSink(), "victim")
    start = time.monotonic()
    with pytest.raises(StepError, match=r"in step 'victim'.*killed by SIGKILL"):
        execute(p, "process")
    assert time.monotonic() - start < BOUND_S


@pytest.mark.multiprocess
@pytest.mark.usefixtures("warm_process_executor", "no_leftovers")
def test_worker_stuck_in_user_code_is_terminated() -> None:
    p = Pipeline("stuck")
    p.step("numbers", ListSource(range(10)))
    p.step("stuck", Stuck(), "numbers")
    p.step("fail", FailAt(2), "numbers")
    start = time.monotonic()
    with pytest.raises(StepError, match="in step 'fail'"):
        execute(p, "process", config=RunConfig(stop_timeout_s=0.5))
    assert time.monotonic() - start < BOUND_S


@pytest.mark.multiprocess
def test_lambda_steps_are_refused_before_starting() -> None:
    p = Pipeline("lambda")
    p.step("numbers", ListSource([1]))
    p.step("double", Map(lambda x: 2 * x), "numbers")
    with pytest.raises(PlanError, match=r"function in step 'double'.*picklable"):
        execute(p, "process")


@pytest.mark.multiprocess
@pytest.mark.usefixtures("no_leftovers")
def test_item_the_wire_cannot_carry_names_the_step() -> None:
    p = Pipeline("opaque")
    p.step("numbers", ListSource([1]))
    p.step("opaque", MakeOpaque(), "numbers")
    p.step("out", ListSink(), "opaque")
    with pytest.raises(
        StepError, match=r"output in step 'opaque'.*Opaque.*never pickles"
    ):
        execute(p, "process")


FAILING_JOB = """
    from strata.engine import Pipeline
    from strata.engine.testing import ListSource

    def explode(items: list[int]) -> dict[str, int]:
        raise RuntimeError("exploded on purpose")

    def build(count: int = 3) -> Pipeline:
        p = Pipeline("failing-job")
        p.step("numbers", ListSource(range(count)))
        p.step("explode", explode, "numbers")
        p.record("explode")
        return p
"""


def _failing_job(tmp_path: Path) -> tuple[Path, Path]:
    job = tmp_path / "failing_job.py"
    job.write_text(textwrap.dedent(FAILING_JOB))
    return job, tmp_path / "report.json"


def test_cli_exit_status_on_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job, report = _failing_job(tmp_path)
    assert main(["run", str(job), "--report", str(report), "--quiet"]) == 1
    assert "in step 'explode'" in capsys.readouterr().err
    assert json.loads(report.read_text())["status"] == "failed"


@pytest.mark.multiprocess
def test_strata_script_exit_status_on_process_failure(tmp_path: Path) -> None:
    job, report = _failing_job(tmp_path)
    command = [
        str(Path(sys.executable).parent / "strata"),
        "run",
        str(job),
        "--executor",
        "process",
        "--report",
        str(report),
        "--quiet",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "in step 'explode'" in done.stderr
    assert "exploded on purpose" in done.stderr
    assert json.loads(report.read_text())["status"] == "failed"


ENDLESS_JOB = """
    import sys
    sys.path.insert(0, {steps_dir!r})
    from engine_steps import Endless, identity
    from strata.engine import Map, Pipeline

    def build() -> Pipeline:
        p = Pipeline("endless")
        p.step("numbers", Endless())
        p.step("keyed", Map(identity), "numbers", shards=2, key=int)
        return p
"""


@pytest.mark.slow
@pytest.mark.multiprocess
def test_workers_exit_when_the_coordinator_is_killed(tmp_path: Path) -> None:
    job = tmp_path / "endless_job.py"
    steps_dir = str(Path(__file__).parent)
    job.write_text(textwrap.dedent(ENDLESS_JOB.format(steps_dir=steps_dir)))
    strata = str(Path(sys.executable).parent / "strata")
    coordinator = subprocess.Popen(
        [strata, "run", str(job), "--executor", "process", "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        workers: list[psutil.Process] = []
        deadline = time.monotonic() + 60
        while len(workers) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
            workers = [
                p
                for p in psutil.Process(coordinator.pid).children(recursive=True)
                if "forkserver" in " ".join(p.cmdline()) and p.ppid() != coordinator.pid
            ]
        assert len(workers) == 3  # numbers, keyed[0/2], keyed[1/2]
    finally:
        coordinator.kill()
        coordinator.wait()
    _, alive = psutil.wait_procs(workers, timeout=5)
    assert not alive
