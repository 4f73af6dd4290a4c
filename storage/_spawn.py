"""Server child processes: start them, wait for them, explain why one did not start.

The region servers (:mod:`strata.storage.geo.server`) and the feature servers
(:mod:`strata.storage.features.server_group`) run in fresh ``python -c`` children
(:func:`start_child`). The script's first lines register empty stand-ins for the
package modules, so importing the server's module does not run ``strata/__init__``
and friends (which import torch); submodules still load from the real folders. A
child prints one JSON line when it serves (:func:`await_ready`); its stderr goes to
a log file, whose tail a startup error quotes (:func:`startup_error`).
:class:`ServerProcesses` is the base of a group of them: it stops them all on
``close``.

Examples:
    >>> [name for name, _ in package_paths("geo")]
    ['strata', 'strata.storage', 'strata.storage.features', 'strata.storage.geo']
    >>> print(boot_script("strata.storage.geo.server").splitlines()[-2])
    from strata.storage.geo.server import _child_main
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import subprocess
import sys
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from multiprocessing import shared_memory
from pathlib import Path
from typing import IO, Any, NoReturn, Protocol, Self

from strata.storage.errors import StorageError

__all__ = [
    "ChildServer",
    "ChildState",
    "ServerProcesses",
    "await_ready",
    "boot_script",
    "package_paths",
    "serve_as_child",
    "shutdown",
    "start_child",
    "startup_error",
]

_STORAGE = Path(__file__).resolve().parent


def package_paths(*subpackages: str) -> list[tuple[str, str]]:
    """``(name, folder)`` of ``strata``, ``strata.storage`` and its ``subpackages``.

    ``features`` always comes along: every server speaks its wire format.
    """
    names = dict.fromkeys(("features", *subpackages))
    return [
        ("strata", str(_STORAGE.parent)),
        ("strata.storage", str(_STORAGE)),
        *((f"strata.storage.{name}", str(_STORAGE / name)) for name in names),
    ]


def boot_script(module: str) -> str:
    """Source for ``python -c SCRIPT SPEC``: stand-ins, then ``module._child_main``.

    ``SPEC`` (JSON) is the child's spec; its ``packages`` is :func:`package_paths`.
    """
    return f"""
import json, sys, types
spec = json.loads(sys.argv[1])
for name, path in spec["packages"]:
    module = types.ModuleType(name)
    module.__path__ = [path]
    sys.modules.setdefault(name, module)
from {module} import _child_main
_child_main(spec)
"""


@dataclass(slots=True)
class ChildState:
    """What a group of children must release, kept apart from it for the finalizer."""

    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[int, IO[bytes]] = field(default_factory=dict)
    segments: list[shared_memory.SharedMemory] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)  # of ipc:// endpoints


def shutdown(state: ChildState, grace_s: float = 2.0) -> None:
    """Stop every child (ask, terminate, kill), then unlink every segment."""
    for proc in state.procs.values():
        if proc.stdin is not None:
            # A byte (or EOF) on stdin asks the child to stop; the byte also works
            # when a forked process still holds the pipe open.
            with contextlib.suppress(OSError):
                proc.stdin.write(b"\n")
                proc.stdin.flush()
            with contextlib.suppress(OSError):
                proc.stdin.close()
    for action in (None, "terminate", "kill"):
        deadline = time.monotonic() + grace_s
        for proc in state.procs.values():
            if proc.poll() is None and action is not None:
                with contextlib.suppress(OSError):
                    getattr(proc, action)()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
    for proc in state.procs.values():
        if proc.stdout is not None:
            proc.stdout.close()
    for log in state.logs.values():
        log.close()
    state.procs.clear()
    state.logs.clear()
    for segment in state.segments:
        with contextlib.suppress(FileNotFoundError):
            segment.unlink()
    state.segments.clear()
    for folder in state.folders:
        shutil.rmtree(folder, ignore_errors=True)
    state.folders.clear()


class ServerProcesses:
    """Base of a group of server children: their :class:`ChildState` and ``close``.

    :func:`shutdown` runs on :meth:`close`, at the end of a ``with`` block, or when
    the group is collected (a finalizer holds the state, not the group).
    """

    def __init__(self) -> None:
        self._state = ChildState()
        self._finalizer = weakref.finalize(self, shutdown, self._state)

    def _kill(self, key: int) -> None:
        proc = self._state.procs[key]
        proc.kill()
        proc.wait(10)

    def _alive(self, key: int) -> bool:
        proc = self._state.procs.get(key)
        return proc is not None and proc.poll() is None

    def close(self) -> None:
        """Stop every server and release its segments and folders (idempotent)."""
        self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ChildServer(Protocol):
    """What :func:`serve_as_child` runs: a bound server."""

    def serve(
        self, should_stop: Callable[[], bool] | None = None, stop_fd: int | None = None
    ) -> None:
        """Serve until ``should_stop()`` or a byte/EOF on ``stop_fd``."""

    def close(self) -> None:
        """Release the server's socket."""


def serve_as_child(
    server: ChildServer, endpoint: str, parent: int, **ready: Any
) -> None:
    """In a child: say it is ready, serve until stdin closes or ``parent`` dies.

    The ready line (:func:`await_ready`) holds ``endpoint``, the pid, whether torch
    was imported, and ``ready``'s items. The server is closed either way.
    """
    message = {
        "endpoint": endpoint,
        "pid": os.getpid(),
        "torch": "torch" in sys.modules,
        **ready,
    }
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
    try:
        server.serve(lambda: os.getppid() != parent, stop_fd=sys.stdin.fileno())
    finally:
        server.close()


def start_child(
    module: str, spec: Mapping[str, Any], log: IO[bytes]
) -> subprocess.Popen[bytes]:
    """Run ``module._child_main(spec)`` in a child; stdin and stdout piped to us.

    ``spec["packages"]`` must be :func:`package_paths`; stderr goes to ``log``.
    """
    return subprocess.Popen(
        [sys.executable, "-c", boot_script(module), json.dumps(spec)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
    )


def await_ready(
    procs: Mapping[int, subprocess.Popen[bytes]],
    timeout_s: float,
    fail: Callable[[int, str], NoReturn],
) -> dict[int, dict[str, Any]]:
    """Each child's ready message (its first stdout line, JSON), by key.

    Calls ``fail(key, reason)`` for the first child that exits first, or for the
    lowest key still silent after ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    ready: dict[int, dict[str, Any]] = {}
    with selectors.DefaultSelector() as selector:
        for key, proc in procs.items():
            assert proc.stdout is not None
            selector.register(proc.stdout, selectors.EVENT_READ, key)
        while len(ready) < len(procs):
            left = deadline - time.monotonic()
            events = selector.select(left) if left > 0 else []
            if not events:
                fail(
                    min(set(procs) - set(ready)),
                    f"no ready message within {timeout_s} s",
                )
            for event, _ in events:
                line = procs[event.data].stdout.readline()  # type: ignore[union-attr]
                if not line:
                    fail(event.data, "the process exited before it was ready")
                ready[event.data] = json.loads(line)
                selector.unregister(event.fileobj)
    return ready


def startup_error(
    error: type[StorageError], where: str, got: str, log: IO[bytes]
) -> StorageError:
    """``error``: server ``where`` did not start (``got``), with its stderr's tail."""
    log.seek(0)
    tail = log.read()[-2000:].decode("utf-8", errors="replace").strip()
    return error.build(
        "startup",
        where,
        "a server ready to serve",
        got,
        f"its stderr: {tail}" if tail else None,
    )
