"""The process executor: every task in its own process, pyzmq channels between.

Each step (or each shard of a keyed step) runs in a worker process
(:mod:`strata.engine.executors.worker`). Workers bind their input sockets to
abstract Unix sockets (on Linux loopback; elsewhere to ephemeral TCP ports); the
coordinator (this process) collects their endpoints, tells each worker where its
outputs go and how much credit each link has, then watches: it gathers collected
items and final metrics, and stops everything on the first error, a worker that dies
(a killed process is detected, not waited for), or Ctrl-C.

Frames carry a small JSON header plus Arrow IPC or raw tensor/ndarray buffers
(:mod:`strata.engine.wire`); data is never pickled. The *step definitions* are pickled
once, at start-up, to ship them to the workers, so functions and operator classes must
be importable (module level), not lambdas or closures.

Workers are forked from a **forkserver**: forking this process directly is unsafe
once torch, numba or Arrow started threads, and ``spawn`` would import torch in every
worker (1-2 s each). The fork server starts once per process, preloading the engine,
numpy, pyarrow, pyzmq, the modules defining the steps, pandas when installed (pyarrow
imports it at its first conversion, which would cost every worker a second) and torch
when this process has imported it; after that a worker starts in milliseconds.

Examples:
    >>> from strata.engine.executors import execute
    >>> from strata.engine.pipeline import Pipeline
    >>> from strata.engine.testing import ListSink, ListSource
    >>> p = Pipeline("demo")
    >>> _ = p.step("numbers", ListSource([1, 2, 3]))
    >>> _ = p.step("sink", ListSink(), "numbers")
    >>> execute(p, ProcessExecutor(), collect=("sink",)).collected
    {'sink': [1, 2, 3]}
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import multiprocessing
import os
import pickle
import secrets
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import zmq

from strata.engine.checkpoint.coordinator import Actions
from strata.engine.checkpoint.session import CheckpointSession, begin
from strata.engine.checkpoint.store import TaskEntry
from strata.engine.config import RunConfig
from strata.engine.errors import (
    CheckpointError,
    PlanError,
    StepError,
    error_from_fields,
    format_error,
)
from strata.engine.executors import worker
from strata.engine.executors.base import Outcome
from strata.engine.metrics import StepMetrics, merge
from strata.engine.pipeline import StepKind
from strata.engine.plan import Plan
from strata.engine.progress import Progress
from strata.engine.tasks import Task, expand, task_name
from strata.engine.wire import pack, unpack

_POLL_MS = 100
_EXIT_GRACE_S = 0.3  # a worker's last message may trail its exit by a moment
_PRELOAD = (
    "strata.engine.executors._fork_main",
    "strata.engine.executors.worker",
    "numpy",
    "pyarrow",
)
_MAIN_ENV = "STRATA_FORK_MAIN"
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class ProcessExecutor:
    """Runs every task in a worker process; see the module docstring.

    Args:
        host: Interface the sockets bind to (loopback by default).
        start_method: ``forkserver`` (default where available) or ``spawn``.
        startup_timeout_s: How long workers may take to start and say hello.
    """

    name = "process"

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        start_method: str | None = None,
        startup_timeout_s: float = 60.0,
    ) -> None:
        methods = multiprocessing.get_all_start_methods()
        self.host = host
        self.start_method = start_method or (
            "forkserver" if "forkserver" in methods else "spawn"
        )
        self.startup_timeout_s = startup_timeout_s

    def run(self, plan: Plan, config: RunConfig, collect: tuple[str, ...]) -> Outcome:
        """Run the plan's tasks in worker processes."""
        start = time.perf_counter()
        tasks = expand(plan, collect=collect, seed=config.seed)
        gathered: dict[tuple[str, str, int], list[Any]] = {}
        session = None
        if config.checkpoint is not None:
            session = begin(
                plan.name,
                tasks,
                config.checkpoint,
                resume=config.resume,
                gathered=gathered,
            )
        sockets = _ipc_prefix(self.host)
        specs = [
            worker.WorkerSpec(
                task,
                self.host,
                config.progress,
                session.spec(i, task) if session is not None else None,
                f"{sockets}{i}" if sockets is not None else None,
            )
            for i, task in enumerate(tasks)
        ]
        blobs = _pickle_tasks(plan.name, specs)
        run = _Run(tasks, config, self.host)
        run.gathered = gathered
        if session is not None:
            run.session = session
            run.listeners = set(session.listeners())
        progress = Progress(
            enabled=config.progress,
            steps=[s.id for s in plan.steps if s.kind is not StepKind.BATCH],
            sources=[s.id for s in plan.steps if s.kind is StepKind.SOURCE],
        )
        try:
            with _main_path_for_fork_server():
                run.launch(self._context(plan), blobs)
            run.handshake(self.startup_timeout_s)
            while run.error is None and not run.finished():
                run.poll()
                run.tick()
                progress.update(run.step_metrics())
        finally:
            run.stop(config.stop_timeout_s)
            progress.close()
        outcome = run.outcome()
        outcome.wall_s = time.perf_counter() - start
        if session is not None:
            outcome.checkpoint = session.coordinator.summary()
        return outcome

    def _context(self, plan: Plan) -> Any:
        context = multiprocessing.get_context(self.start_method)
        if self.start_method == "forkserver":
            modules = {_module_of(step.fn, step.kind) for step in plan.steps}
            extra: tuple[str, ...] = ("torch",) if "torch" in sys.modules else ()
            if importlib.util.find_spec("pandas") is not None:
                extra += ("pandas",)
            preload = [*_PRELOAD, *extra, *sorted(m for m in modules if m)]
            context.set_forkserver_preload(preload)  # used when the server first starts
        return context


class _Run:
    """The coordinator's sockets, processes and bookkeeping for one run."""

    def __init__(self, tasks: tuple[Task, ...], config: RunConfig, host: str) -> None:
        self.tasks = tasks
        self.config = config
        self.zmq = zmq.Context()
        self.control = self.zmq.socket(zmq.ROUTER)
        self.control.setsockopt(zmq.LINGER, 0)
        port = self.control.bind_to_random_port(f"tcp://{host}")
        self.endpoint = f"tcp://{host}:{port}"
        self.processes: list[Any] = []
        self.endpoints: dict[int, str | None] = {}
        self.metrics: dict[int, StepMetrics] = {
            i: StepMetrics() for i in range(len(tasks))
        }
        self.peaks: dict[str, list[int]] = {}
        self.gathered: dict[tuple[str, str, int], list[Any]] = {}
        self.done: set[int] = set()
        self.exited: dict[int, float] = {}
        self.error: StepError | None = None
        self.session: CheckpointSession | None = None
        self.listeners: set[int] = set()

    def launch(self, context: Any, blobs: Sequence[bytes]) -> None:
        for index, (task, blob) in enumerate(zip(self.tasks, blobs, strict=True)):
            process = context.Process(
                target=worker.main,
                args=(self.endpoint, _identity(index), task.step.id, blob),
                name=f"strata:{task.name}",
                daemon=True,
            )
            process.start()
            self.processes.append(process)

    def handshake(self, timeout: float) -> None:
        """Wait for every worker's hello, then send each its outlets and credits."""
        deadline = time.monotonic() + timeout
        while len(self.endpoints) < len(self.tasks) and self.error is None:
            if time.monotonic() > deadline:
                missing = [
                    t.name for i, t in enumerate(self.tasks) if i not in self.endpoints
                ]
                self._fail_engine(
                    self.tasks[0], "every worker to start", f"no hello from {missing}"
                )
                return
            self.poll()
        if self.error is not None:
            return
        inbound = {t.name: t.inbound_links for t in self.tasks}
        by_name = {t.name: i for i, t in enumerate(self.tasks)}
        bounds = self.config.channel
        for index, task in enumerate(self.tasks):
            links = []
            for port, routes in enumerate(task.routes):
                for r, route in enumerate(routes):
                    for shard in range(route.shards):
                        consumer = task_name(route.consumer, shard, route.shards)
                        share = inbound[consumer]
                        links.append(
                            {
                                "port": port,
                                "route": r,
                                "shard": shard,
                                "input": route.input,
                                "consumer": consumer,
                                "endpoint": self.endpoints[by_name[consumer]],
                                "items": max(1, bounds.max_items // share),
                                "bytes": max(1, bounds.max_bytes // share),
                            }
                        )
            # The credit of each link into this task: it acknowledges in halves.
            share = max(1, task.inbound_links)
            credit = {
                "items": max(1, bounds.max_items // share),
                "bytes": max(1, bounds.max_bytes // share),
            }
            self._send(index, pack({"k": "start", "links": links, "credit": credit}))

    def poll(self) -> None:
        """Handle every message that arrives within one poll interval; watch exits."""
        if self.control.poll(_POLL_MS):
            while self.control.poll(0):
                frames = self.control.recv_multipart(copy=False)
                index = int(frames[0].bytes)
                header, value = unpack(frames[1:])
                self._handle(index, header, value)
        now = time.monotonic()
        for index, process in enumerate(self.processes):
            if index in self.done or process.exitcode is None:
                continue
            first_seen = self.exited.setdefault(index, now)
            if now - first_seen > _EXIT_GRACE_S and self.error is None:
                self._fail_exit(index, process.exitcode)

    def finished(self) -> bool:
        return len(self.done) == len(self.tasks)

    def tick(self) -> None:
        """Let the checkpoint coordinator start a checkpoint that is due."""
        if self.session is not None and self.error is None:
            self._coordinate(0, lambda c: c.tick())

    def stop(self, timeout: float) -> None:
        """Cancel live workers, then join; terminate and kill the ones that linger."""
        if not self.finished():
            for index, process in enumerate(self.processes):
                if process.exitcode is None and index in self.endpoints:
                    self._send(index, pack({"k": "cancel"}))
        deadline = time.monotonic() + (timeout if not self.finished() else 10 * timeout)
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
        for process in self.processes:
            if process.exitcode is None:
                process.terminate()
                process.join(0.5)
            if process.exitcode is None:
                process.kill()
                process.join()
        for process in self.processes:
            process.close()
        self.zmq.destroy(linger=0)

    def outcome(self) -> Outcome:
        metrics = {}
        for index, task in enumerate(self.tasks):
            m = self.metrics[index]
            m.peak_items, m.peak_bytes = self.peaks.get(task.name, [0, 0])
            metrics[(task.step.id, task.shard)] = m
        return Outcome(metrics, self.gathered, self.error)

    def step_metrics(self) -> dict[str, StepMetrics]:
        steps: dict[str, list[StepMetrics]] = {}
        for index, task in enumerate(self.tasks):
            steps.setdefault(task.step.id, []).append(self.metrics[index])
        return {step_id: merge(parts) for step_id, parts in steps.items()}

    def _handle(self, index: int, header: dict[str, Any], value: Any) -> None:
        task = self.tasks[index]
        kind = header["k"]
        if kind == "hello":
            self.endpoints[index] = header["endpoint"]
        elif kind == "gather":
            key = (task.step.id, header["port"], task.shard)
            self.gathered.setdefault(key, []).append(value)
        elif kind == "progress":
            self.metrics[index] = StepMetrics.from_dict(header["metrics"])
        elif kind == "done":
            self.metrics[index] = StepMetrics.from_dict(header["metrics"])
            for consumer, (items, size) in header["peaks"].items():
                peak = self.peaks.setdefault(consumer, [0, 0])
                peak[0] += items
                peak[1] += size
            self.done.add(index)
            if self.session is not None:
                totals = self.metrics[index].totals()
                self._coordinate(index, lambda c: c.finished(index, totals))
        elif kind == "ckpt_request":
            self._coordinate(index, lambda c: c.request(index))
        elif kind == "ckpt":
            entry = TaskEntry.from_dict(header["entry"])
            self._coordinate(index, lambda c: c.report(index, header["n"], entry))
        elif kind == "error" and self.error is None:
            self.error = error_from_fields(header)
            self.done.add(index)

    def _coordinate(self, index: int, decide: Any) -> None:
        """Run a coordinator call; deliver its triggers and completion notices."""
        assert self.session is not None
        coordinator = self.session.coordinator
        try:
            actions: Actions = decide(coordinator) or Actions()
            done = coordinator.complete()  # fsyncs here, in the driver
            actions.triggers += done.triggers
            actions.completed += done.completed
        except (CheckpointError, OSError) as exc:
            if self.error is None:
                self.error = StepError.wrap(
                    exc, step=self.tasks[index].step.id, location="engine (checkpoint)"
                )
                self.error.__cause__ = exc
            return
        # Notices first: a task hears of n before it is asked for n + 1.
        for checkpoint in actions.completed:
            for listener in sorted(self.listeners - self.done):
                self._send(listener, pack({"k": "complete", "n": checkpoint}))
        for source, checkpoint in actions.triggers:
            self._send(source, pack({"k": "trigger", "n": checkpoint}))

    def _fail_exit(self, index: int, exitcode: int) -> None:
        how = f"exit code {exitcode}"
        if exitcode < 0:
            how = f"killed by {signal.Signals(-exitcode).name}"
        self._fail_engine(
            self.tasks[index],
            "the worker to run until the step finished",
            how,
            "the worker died without reporting an error: look for an out-of-memory "
            "kill or a crash in native code.",
        )

    def _fail_engine(
        self, task: Task, expected: str, got: str, hint: str | None = None
    ) -> None:
        message = format_error("worker process", task.step.id, expected, got, hint)
        shard = task.shard if task.shards > 1 else None
        self.error = StepError(
            message, step=task.step.id, location="engine", shard=shard
        )

    def _send(self, index: int, frames: list[Any]) -> None:
        self.control.send_multipart([_identity(index), *frames])


@contextlib.contextmanager
def _main_path_for_fork_server() -> Iterator[None]:
    """Name the main script for a fork server started now (see ``_fork_main``)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if getattr(main, "__spec__", None) is not None or not isinstance(path, str):
        yield  # ``python -m`` or interactive: workers do not re-run a script
        return
    if not os.path.isabs(path):  # the same path multiprocessing sends to workers
        original = getattr(multiprocessing.process, "ORIGINAL_DIR", None)
        path = os.path.join(original or os.getcwd(), path)
    previous = os.environ.get(_MAIN_ENV)
    os.environ[_MAIN_ENV] = json.dumps(
        {"path": os.path.normpath(path), "argv": list(sys.argv)}
    )
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(_MAIN_ENV, None)
        else:
            os.environ[_MAIN_ENV] = previous


def _pickle_tasks(name: str, specs: Sequence[worker.WorkerSpec]) -> list[bytes]:
    blobs: list[bytes] = []
    problems: dict[str, str] = {}
    for spec in specs:
        task = spec.task
        try:
            blobs.append(pickle.dumps(spec))
        except Exception as exc:
            problems.setdefault(
                task.step.id,
                format_error(
                    "function",
                    task.step.id,
                    "a picklable function or operator (defined at module level)",
                    f"{type(exc).__name__}: {exc}",
                    "the process executor ships step definitions to worker processes; "
                    "lambdas and closures run only on the local executor.",
                ),
            )
    if problems:
        raise PlanError(name, list(problems.values()))
    return blobs


def _module_of(fn: Any, kind: StepKind) -> str | None:
    target = fn if kind is StepKind.BATCH else type(fn)
    module = getattr(target, "__module__", None)
    return module if isinstance(module, str) and module != "__main__" else None


def _ipc_prefix(host: str) -> str | None:
    """Where the workers bind their inputs: a unique ``ipc://@...`` prefix, or TCP.

    On Linux loopback, data links use Unix domain sockets in the abstract namespace
    (no file to clean up, even when the run is killed): a message costs about 30%
    less CPU than over TCP on 127.0.0.1. Other hosts and platforms keep TCP
    (``None``).
    """
    if host not in _LOOPBACK or not sys.platform.startswith("linux"):
        return None
    return f"ipc://@strata-{os.getpid()}-{secrets.token_hex(6)}-"


def _identity(index: int) -> bytes:
    return str(index).encode()
