"""How gang workers are started: a fork server with torch preloaded.

Measured on the shared 2-core dev box (``benchmarks/engine/bench_gang.py``; start-up
is launch until every rank joined the group): ``spawn`` imports torch in every
worker, so 1, 2 and 4 workers take 2.4-3.7, 4.9-8.9 and 7.7-17.7 s; forking from a
server that imported torch once takes 0.03, 0.05 and 0.09 s (0.05, 0.08 and 0.15 s
for a whole trivial gang). The server's own start costs one torch import (2.5-5 s),
once per process. Forking the parent directly is unsafe once torch, OpenMP or zmq
started threads.

The gang shares multiprocessing's fork server with the process executor (one
server per process, whoever starts it first sets its preload list), using the
executor's preload list plus torch, ``torch.distributed``, the gang's worker
module and the worker function's module, and the executor's handling of the
main script (:mod:`strata.engine.executors._fork_main`). A process executor worker that
runs a gang step starts a server of its own (the inherited one cannot be reused),
so a gang step there pays one torch import.

Process-executor workers are daemons, and multiprocessing forbids daemons to
have children because a daemon's children would outlive it. Gang workers cannot
outlive their parent (each runs a lifeline thread, see
:mod:`strata.engine.gang.worker`), so :func:`allow_children` lifts the rule while a gang
starts.

Examples:
    >>> preload_modules(None)[:2]
    ['strata.engine.executors._fork_main', 'strata.engine.executors.worker']
    >>> "torch" in preload_modules(None)
    True
"""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing
from collections.abc import Callable, Iterator
from multiprocessing.context import BaseContext
from typing import Any

# The process executor's fork-server setup, shared so both reuse one server.
from strata.engine.executors.process import _PRELOAD, _main_path_for_fork_server

_GANG_PRELOAD = ("torch", "torch.distributed", "strata.engine.gang.worker")


def default_start_method() -> str:
    """``forkserver`` where the platform has it, else ``spawn``."""
    methods = multiprocessing.get_all_start_methods()
    return "forkserver" if "forkserver" in methods else "spawn"


def preload_modules(fn: Callable[..., Any] | None) -> list[str]:
    """The fork server's preload list for a gang running ``fn``."""
    modules = [*_PRELOAD, *_GANG_PRELOAD]
    if importlib.util.find_spec("pandas") is not None:
        modules.append("pandas")  # as the process executor does: a superset of its list
    module = getattr(fn, "__module__", None)
    if isinstance(module, str) and module not in ("__main__", *modules):
        modules.append(module)
    return modules


def worker_context(fn: Callable[..., Any], start_method: str | None) -> BaseContext:
    """Return the multiprocessing context gang workers start from."""
    method = start_method or default_start_method()
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        # Takes effect only when the server starts; a running one keeps its list.
        context.set_forkserver_preload(preload_modules(fn))
    return context


@contextlib.contextmanager
def starting() -> Iterator[None]:
    """Wrap process starts: name the main script for a new server, allow children."""
    with _main_path_for_fork_server(), allow_children():
        yield


@contextlib.contextmanager
def allow_children() -> Iterator[None]:
    """Let a daemon process (a process-executor worker) start gang workers."""
    config = multiprocessing.current_process()._config  # type: ignore[attr-defined]
    daemon = config.get("daemon")
    if daemon:
        config["daemon"] = False
    try:
        yield
    finally:
        if daemon:
            config["daemon"] = daemon
