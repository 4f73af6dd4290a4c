"""A gang worker that dies while it is being started is reported as a death.

``Process.start()`` raises ``BrokenPipeError``/``EOFError`` when the new worker
(or the fork server) dies while its arguments are being sent; that used to be
reported as "pass picklable values", blaming the caller's arguments.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import gang_workers as gw
import pytest

from strata.engine.gang import FailureKind, GangError, GangSpec, run_gang
from strata.engine.gang import supervisor as gang_supervisor


class _DiesWhileStarting:
    """A multiprocessing context whose rank-0 process is killed inside start()."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def Pipe(self, duplex: bool = True) -> Any:
        return self._real.Pipe(duplex=duplex)

    def Process(self, **kwargs: Any) -> Any:
        process = self._real.Process(**kwargs)
        if kwargs["name"].endswith("[0]"):
            return _KilledInStart(process)
        return process


class _KilledInStart:
    """A process proxy: start() starts it, SIGKILLs it, then fails as a pipe would.

    (A proxy, because the process object itself is pickled for the fork server.)
    """

    def __init__(self, process: Any) -> None:
        self._process = process

    def __getattr__(self, name: str) -> Any:
        return getattr(self._process, name)

    def start(self) -> None:
        self._process.start()
        os.kill(self._process.pid, signal.SIGKILL)
        self._process.join(10)
        raise BrokenPipeError(32, "Broken pipe")


def test_worker_killed_during_launch_is_a_death_not_a_pickling_error(
    monkeypatch: pytest.MonkeyPatch, no_leftovers: None
) -> None:
    real = gang_supervisor.start.worker_context
    monkeypatch.setattr(
        gang_supervisor.start,
        "worker_context",
        lambda fn, method: _DiesWhileStarting(real(fn, method)),
    )
    with pytest.raises(GangError) as info:
        run_gang(gw.sleep_on, GangSpec(workers=2), rank=0, seconds=0.0)
    message = str(info.value)
    assert "picklable" not in message
    assert "rank 0 (pid " in message
    assert "killed by SIGKILL" in message
    assert "died while starting" in message
    assert info.value.failures[0].kind is FailureKind.DIED
    assert info.value.rank == 0
