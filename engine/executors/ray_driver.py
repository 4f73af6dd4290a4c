"""The ray executor: tasks as Ray actors and Ray tasks, on one machine or many.

Every job runs unchanged on Ray (``strata run JOB --executor ray``). The driver
(this process) connects to Ray (:func:`strata.engine.ray_cluster.connect`: a local
cluster by default, ``address`` or ``$STRATA_RAY_ADDRESS`` to join one), then:

* **Streaming steps become actors**, one per task (a keyed step's shards are
  separate actors, so they spread over the cluster), and so does every step
  downstream of a streaming step: a batch step gathering a stream must take part
  in its checkpoints while it flows. Links between actors are bounded, with the
  local executor's backpressure (:mod:`strata.engine.executors.ray_host`).
* **Batch steps with no streaming step upstream become Ray tasks**, started when
  their producers finished. Outputs pass between them as object-store
  references: the driver never touches them, and a numpy array or Arrow table is
  read without a copy on the node that holds it.

Actors and tasks ask Ray for no CPUs by default (``task_cpus``), as the local
executor runs every task on a thread: a pipeline with more steps than the cluster
has cores still schedules. Gang steps running on Ray start their ranks as Ray
actors (``GangSpec(launcher="auto")``), which do ask for their devices.

Errors carry the step id, as on the other executors. An actor or task that dies
(killed, out of memory) fails its step, naming it; every other actor is then
cancelled and, after ``RunConfig.stop_timeout_s``, killed: nothing outlives the
run. A checkpointed run whose worker *died* (not a step's own exception) is
resumed from its last complete checkpoint, up to ``max_restarts`` times: a killed
actor costs a replay from the checkpoint, with nothing lost or doubled.

Examples:
    Needs Ray (``pip install 'strata-gnn[ray]'``); starts a local cluster::

        from strata.engine import Pipeline, execute
        from strata.engine.testing import ListSink, ListSource

        p = Pipeline("demo")
        p.step("numbers", ListSource([1, 2, 3]))
        p.step("sink", ListSink(), "numbers")
        execute(p, RayExecutor(), collect=("sink",)).collected  # {'sink': [1, 2, 3]}
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import secrets
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from strata.engine.checkpoint.coordinator import Actions, CheckpointCoordinator
from strata.engine.checkpoint.session import CheckpointSession, begin
from strata.engine.checkpoint.store import TaskEntry
from strata.engine.config import RunConfig
from strata.engine.errors import (
    CheckpointError,
    StepError,
    error_from_fields,
    format_error,
)
from strata.engine.executors.base import Gathered, Outcome
from strata.engine.executors.ray_host import (
    HostProcess,
    HostResult,
    HostSpec,
    LinkSpec,
    run_batch_task,
)
from strata.engine.metrics import StepMetrics, merge
from strata.engine.pipeline import StepKind
from strata.engine.plan import Plan
from strata.engine.progress import Progress
from strata.engine.ray_cluster import connect
from strata.engine.tasks import Task, expand, task_name

log = logging.getLogger("strata.ray")

_TICK_S = 0.2
_CHECKPOINT_TICK_S = 0.02
_LONG_POLL_S = 0.5


class RayExecutor:
    """Runs a plan's tasks on Ray; see the module docstring.

    Args:
        address: The cluster to join (``None``: ``$STRATA_RAY_ADDRESS``, else a
            local cluster started here).
        max_restarts: How many times a checkpointed run whose worker died is
            resumed from its last complete checkpoint.
        startup_timeout_s: How long actors may take to start.
        task_cpus: CPUs each actor and task asks Ray for.
        batch_items: Items one actor call may carry. An actor call costs about
            0.3 ms, so a link's item bound (``ChannelBounds.max_items``, 8 by
            default, sized for threads) is raised to twice this on Ray; the byte
            bound is the same as on every executor. A checkpointed run keeps the
            configured bounds: they also bound how many items travel ahead of a
            barrier, so checkpoints complete as soon as on the other executors.
    """

    name = "ray"

    def __init__(
        self,
        *,
        address: str | None = None,
        max_restarts: int = 2,
        startup_timeout_s: float = 120.0,
        task_cpus: float = 0.0,
        batch_items: int = 256,
    ) -> None:
        if max_restarts < 0:
            raise ValueError(
                format_error("max_restarts", "ray executor", ">= 0", str(max_restarts))
            )
        self.address = address
        self.max_restarts = max_restarts
        self.startup_timeout_s = startup_timeout_s
        self.task_cpus = task_cpus
        self.batch_items = batch_items
        #: Seconds from the run's start until every actor was up (last attempt).
        self.last_startup_s = 0.0
        #: Resumes after a worker died, in the last run.
        self.restarts = 0
        #: The actor of each task of the run in progress, by task name (``step`` or
        #: ``step[shard/shards]``): for operations, and for tests that kill one.
        self.actors: dict[str, Any] = {}

    def run(self, plan: Plan, config: RunConfig, collect: tuple[str, ...]) -> Outcome:
        """Run the plan on Ray; resume a checkpointed run whose worker died."""
        start = time.perf_counter()
        ray = connect(self.address)
        self.restarts = 0
        while True:
            attempt = _Attempt(ray, plan, config, collect, self)
            outcome = attempt.run()
            retry = (
                attempt.died
                and config.checkpoint is not None
                and self.restarts < self.max_restarts
            )
            if not retry:
                break
            self.restarts += 1
            log.warning(
                "ray: a worker died (%s); resuming from the last checkpoint "
                "(restart %d of %d)",
                outcome.error,
                self.restarts,
                self.max_restarts,
            )
            config = dataclasses.replace(config, resume=True)
        outcome.wall_s = time.perf_counter() - start
        return outcome


def _on_actors(tasks: tuple[Task, ...]) -> list[bool]:
    """Which tasks run as actors: streaming ones and all downstream of them."""
    streaming: dict[str, bool] = {}
    for task in tasks:  # ``expand`` lists producers before consumers
        step = task.step
        if step.id not in streaming:
            streaming[step.id] = step.kind is not StepKind.BATCH or any(
                streaming[link.producer] for link in task.inputs
            )
    return [streaming[task.step.id] for task in tasks]


class _Attempt:
    """One run of the plan on Ray (a resumed run is a new attempt)."""

    def __init__(
        self,
        ray: Any,
        plan: Plan,
        config: RunConfig,
        collect: tuple[str, ...],
        executor: RayExecutor,
    ) -> None:
        self.ray = ray
        self.plan = plan
        self.config = config
        self.executor = executor
        self.tasks = expand(plan, collect=collect, seed=config.seed)
        self.gathered: Gathered = {}
        self.session: CheckpointSession | None = None
        if config.checkpoint is not None:
            self.session = begin(
                plan.name,
                self.tasks,
                config.checkpoint,
                resume=config.resume,
                gathered=self.gathered,
            )
        self.listeners = set(self.session.listeners()) if self.session else set()
        self.metrics = {i: StepMetrics() for i in range(len(self.tasks))}
        self.on_actor = _on_actors(self.tasks)
        self.bounds = config.channel
        if config.checkpoint is None:
            items = max(config.channel.max_items, 2 * executor.batch_items)
            self.bounds = dataclasses.replace(config.channel, max_items=items)
        self.actors: dict[int, Any] = {}
        self.running: dict[Any, int] = {}  # result ref -> task index
        self.polls: dict[Any, int] = {}  # an actor's long poll -> task index
        self.payloads: dict[int, Any] = {}  # Ray task -> its payload ref
        self.done: set[int] = set()
        self.error: StepError | None = None
        self.died = False
        self.dead: set[int] = set()  # tasks whose actor or worker died
        self.token = secrets.token_hex(8)

    # -- the run ---------------------------------------------------------------

    def run(self) -> Outcome:
        progress = Progress(
            enabled=self.config.progress,
            steps=[s.id for s in self.plan.steps if s.kind is not StepKind.BATCH],
            sources=[s.id for s in self.plan.steps if s.kind is StepKind.SOURCE],
        )
        try:
            self._start_actors()
            links = self._links()
            self.producers = {
                i: sorted({p for p, ks in links.items() for k in ks if k.consumer == i})
                for i in range(len(self.tasks))
                if not self.on_actor[i]
            }
            self.links = links
            for i, actor in self.actors.items():
                self.running[actor.run.remote(self.token, links[i])] = i
            self._launch_ready_tasks()
            self.polling = self.session is not None or self.config.progress
            for i in self.actors:
                self._poll(i)
            tick = _CHECKPOINT_TICK_S if self.session is not None else _TICK_S
            while self.error is None and len(self.done) < len(self.tasks):
                self._wait(tick)
                progress.update(self._step_metrics())
                if self.session is not None and self.error is None:
                    self._coordinate(0, lambda c: c.tick())
        except _Abort:
            pass  # the error is recorded
        finally:
            self._stop()
            progress.close()
        metrics = {
            (task.step.id, task.shard): self.metrics[i]
            for i, task in enumerate(self.tasks)
        }
        summary = self.session.coordinator.summary() if self.session else None
        return Outcome(metrics, self.gathered, self.error, 0.0, summary)

    def _start_actors(self) -> None:
        start = time.perf_counter()
        wanted = [i for i in range(len(self.tasks)) if self.on_actor[i]]
        concurrency = [4 * self.tasks[i].inbound_links + 4 for i in wanted]
        handles = _POOL.take(self.ray, concurrency, self.executor.task_cpus)
        self.actors = dict(zip(wanted, handles, strict=True))
        self.executor.actors = {self.tasks[i].name: h for i, h in self.actors.items()}
        checks = {
            actor.start.remote(self.token, self._spec(i)): i
            for i, actor in self.actors.items()
        }
        timeout = self.executor.startup_timeout_s
        ready, late = self.ray.wait(
            list(checks), num_returns=len(checks), timeout=timeout
        )
        for ref in ready:
            try:
                self.ray.get(ref)
            except Exception as exc:
                self._fail_death(checks[ref], exc, "to start")
                raise _Abort from exc
        if late:
            names = [self.tasks[checks[ref]].name for ref in late]
            self._fail_engine(
                self.tasks[checks[late[0]]],
                f"every actor to start within {timeout:g} s",
                f"no answer from {names}",
                "the cluster may lack the resources the actors ask for.",
            )
            raise _Abort
        self.executor.last_startup_s = time.perf_counter() - start

    def _spec(self, i: int) -> HostSpec:
        task = self.tasks[i]
        checkpoint = self.session.spec(i, task) if self.session else None
        return HostSpec(task, i, self.bounds, checkpoint)

    def _links(self) -> dict[int, list[LinkSpec]]:
        """Every task's outlets, with the consumer's actor or ``None`` (Ray task)."""
        by_name = {task.name: i for i, task in enumerate(self.tasks)}
        bounds = self.bounds
        links: dict[int, list[LinkSpec]] = {}
        for i, task in enumerate(self.tasks):
            mine = links.setdefault(i, [])
            for port, routes in enumerate(task.routes):
                for r, route in enumerate(routes):
                    for shard in range(route.shards):
                        name = task_name(route.consumer, shard, route.shards)
                        j = by_name[name]
                        share = max(1, self.tasks[j].inbound_links)
                        mine.append(
                            LinkSpec(
                                port,
                                r,
                                shard,
                                route.input,
                                j,
                                name,
                                self.actors.get(j),
                                max(1, bounds.max_items // share),
                                max(1, bounds.max_bytes // share),
                                self.token,
                            )
                        )
        return links

    def _launch_ready_tasks(self) -> None:
        batch = self.ray.remote(run_batch_task)
        launched = set(self.payloads)
        for i, producers in self.producers.items():
            if i in launched or not all(p in self.done for p in producers):
                continue
            inputs = [self.payloads[p] for p in producers]
            result, payload = batch.options(
                num_returns=2, num_cpus=self.executor.task_cpus, max_retries=0
            ).remote(self._spec(i), self.links[i], *inputs)
            self.payloads[i] = payload
            self.running[result] = i

    def _wait(self, tick: float) -> None:
        refs = [*self.polls, *self.running]
        if not refs:
            return
        ready, _ = self.ray.wait(refs, num_returns=1, timeout=tick)
        if ready:
            ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in ready:  # what actors sent, before their results
            if ref in self.polls:
                self._polled(ref)
        results: list[tuple[int, HostResult]] = []
        for ref in ready:
            if ref not in self.running:
                continue
            i = self.running.pop(ref)
            for poll in [p for p, j in self.polls.items() if j == i]:
                self._polled(poll)  # its last entries came before the result
            try:
                results.append((i, self.ray.get(ref)))
            except Exception as exc:
                self._fail_death(i, exc, "to run until the step finished")
        for i, result in sorted(results, key=lambda r: r[1].error is not None):
            self._finish(i, result)
        if self.error is None:
            self._launch_ready_tasks()

    def _poll(self, i: int) -> None:
        """Start a long poll of actor ``i``'s outbox (checkpoints or progress)."""
        if self.polling:
            poll = self.actors[i].control.remote(self.token, _LONG_POLL_S)
            self.polls[poll] = i

    def _polled(self, ref: Any) -> None:
        i = self.polls.pop(ref)
        try:
            outbox, metrics = self.ray.get(ref)
        except Exception:
            return  # the actor's run result tells what happened
        self._apply(i, outbox)
        self.metrics[i] = StepMetrics.from_dict(metrics)
        if i in self.running.values():  # still running: keep listening
            self._poll(i)

    def _finish(self, i: int, result: HostResult) -> None:
        task = self.tasks[i]
        self._apply(i, result.outbox)
        metrics = StepMetrics.from_dict(result.metrics)
        metrics.peak_items, metrics.peak_bytes = result.peak_items, result.peak_bytes
        self.metrics[i] = metrics
        if result.error is not None:
            if self.error is None:
                self.error = error_from_fields(result.error)
            return
        if result.cancelled:
            if self.error is None:
                self._fail_engine(task, "the task to run", "it was cancelled")
            return
        self.done.add(i)
        if self.session is not None:
            totals = metrics.totals()
            self._coordinate(i, lambda c: c.finished(i, totals))

    def _apply(self, i: int, outbox: list[tuple[Any, ...]]) -> None:
        """Handle what task ``i`` sent the driver, in order."""
        task = self.tasks[i]
        for entry in outbox:
            kind = entry[0]
            if kind == "gather":
                key = (task.step.id, entry[1], task.shard)
                self.gathered.setdefault(key, []).append(entry[2])
            elif kind == "request":
                self._coordinate(i, lambda c: c.request(i), asked=i)
            elif kind == "report":
                report = TaskEntry.from_dict(entry[2])
                self._coordinate(i, partial(_report, i=i, n=entry[1], entry=report))

    def _coordinate(
        self,
        i: int,
        decide: Callable[[CheckpointCoordinator], Actions | None],
        *,
        asked: int | None = None,
    ) -> None:
        """Run a coordinator call; deliver its triggers and completion notices."""
        assert self.session is not None
        coordinator = self.session.coordinator
        try:
            actions = decide(coordinator) or Actions()
            done = coordinator.complete()  # fsyncs here, in the driver
        except (CheckpointError, OSError) as exc:
            if self.error is None:
                self.error = StepError.wrap(
                    exc, step=self.tasks[i].step.id, location="engine (checkpoint)"
                )
                self.error.__cause__ = exc
            return
        # Notices first: a task hears of n before it is asked for n + 1.
        for checkpoint in [*actions.completed, *done.completed]:
            for listener in sorted(self.listeners - self.done):
                if listener in self.actors:
                    self.actors[listener].notice.remote(self.token, checkpoint)
        triggers = [*actions.triggers, *done.triggers]
        for source, checkpoint in triggers:
            if source in self.actors:
                self.actors[source].trigger.remote(self.token, checkpoint)
        if asked is not None and all(source != asked for source, _ in triggers):
            # The source waits for an answer.
            self.actors[asked].trigger.remote(self.token, None)

    def _step_metrics(self) -> dict[str, StepMetrics]:
        steps: dict[str, list[StepMetrics]] = {}
        for i, task in enumerate(self.tasks):
            steps.setdefault(task.step.id, []).append(self.metrics[i])
        return {step_id: merge(parts) for step_id, parts in steps.items()}

    # -- failure and shutdown --------------------------------------------------

    def _fail_death(self, i: int, exc: BaseException, expected: str) -> None:
        self.died = True
        self.dead.add(i)
        if self.error is not None and not isinstance(self.error.__cause__, _Death):
            # A death outranks the errors it caused in its peers.
            self.error = None
        if self.error is None:
            what = "actor" if i in self.actors else "task"
            first = str(exc).strip().splitlines()[0][:400] if str(exc) else ""
            error = _engine_error(
                self.tasks[i],
                f"the Ray {what} {expected}",
                f"it died ({type(exc).__name__}: {first})",
                "the worker died without reporting an error: look for an "
                "out-of-memory kill, a crash in native code or a killed process.",
            )
            error.__cause__ = _Death(str(exc))
            self.error = error

    def _fail_engine(
        self, task: Task, expected: str, got: str, hint: str | None = None
    ) -> None:
        self.error = _engine_error(task, expected, got, hint)

    def _stop(self) -> None:
        """Cancel what still runs, wait a little; pool or kill the actors."""
        ray = self.ray
        self.executor.actors = {}
        if self.running:
            for i, actor in self.actors.items():
                if i not in self.done:
                    actor.cancel.remote(self.token)
            refs = list(self.running)
            ended, _ = ray.wait(
                refs, num_returns=len(refs), timeout=self.config.stop_timeout_s
            )
            for ref in ended:
                with contextlib.suppress(Exception):  # a death: not reusable
                    ray.get(ref)
                    self.running.pop(ref)  # its run returned: the actor is clean
            for ref, i in self.running.items():
                if i not in self.actors:
                    # Already finished, or its worker is gone: nothing to cancel.
                    with contextlib.suppress(Exception):
                        ray.cancel(ref, force=True)
        # An actor whose run returned (done, failed or cancelled) serves again;
        # one still busy in user code, or dead, is killed.
        busy = set(self.running.values()) | self.dead
        reusable = [a for i, a in self.actors.items() if i not in busy]
        stuck = [a for i, a in self.actors.items() if i in busy]
        cpus = self.executor.task_cpus
        _POOL.give_back(ray, reusable, self.token, cpus, reuse=True)
        _POOL.give_back(ray, stuck, self.token, cpus, reuse=False)


class _HostPool:
    """Idle :class:`HostProcess` actors of this process's Ray connection.

    A run takes actors from the pool (starting what is missing) and gives back
    those whose task returned (finished, failed or cancelled); an actor still
    stuck in user code when the run stops, or dead, is killed. An actor costs
    about 0.3-0.5 s to start (a Ray worker process importing the engine); a warm
    run takes milliseconds.
    """

    CONCURRENCY = 64  # threads of a pooled actor: a task with <= 15 inbound links
    KEEP = 32  # idle actors kept at most

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.job: str | None = None
        self.idle: dict[float, list[Any]] = {}
        self.dedicated: set[Any] = set()

    def take(self, ray: Any, concurrency: list[int], cpus: float) -> list[Any]:
        job = ray.get_runtime_context().get_job_id()
        with self.lock:
            if job != self.job:  # a new connection: old handles are void
                self.job, self.idle, self.dedicated = job, {}, set()
            idle = self.idle.setdefault(cpus, [])
            handles: list[Any] = []
            for needed in concurrency:
                if needed > self.CONCURRENCY:
                    handle = self._start(ray, needed, cpus)
                    self.dedicated.add(handle)
                elif idle:
                    handle = idle.pop()
                else:
                    handle = self._start(ray, self.CONCURRENCY, cpus)
                handles.append(handle)
        return handles

    def give_back(
        self, ray: Any, handles: list[Any], token: str, cpus: float, *, reuse: bool
    ) -> None:
        keep: list[Any] = []
        for handle in handles:
            if reuse and handle not in self.dedicated:
                handle.release.remote(token)
                keep.append(handle)
                continue
            self.dedicated.discard(handle)
            with contextlib.suppress(Exception):  # already dead
                ray.kill(handle, no_restart=True)
        with self.lock:
            if not keep:
                return
            idle = self.idle.setdefault(cpus, [])
            idle.extend(keep)
            extra, self.idle[cpus] = idle[self.KEEP :], idle[: self.KEEP]
        for handle in extra:
            ray.kill(handle, no_restart=True)

    def actor_ids(self) -> set[str]:
        """Ids of the idle actors (tests tell them from leftovers)."""
        with self.lock:
            return {h._actor_id.hex() for pool in self.idle.values() for h in pool}

    def _start(self, ray: Any, concurrency: int, cpus: float) -> Any:
        return (
            ray.remote(HostProcess)
            .options(num_cpus=cpus, max_concurrency=concurrency, max_restarts=0)
            .remote()
        )


_POOL = _HostPool()


def pooled_actor_ids() -> set[str]:
    """Ids of the idle pooled actors: alive between runs on purpose."""
    return _POOL.actor_ids()


def _engine_error(
    task: Task, expected: str, got: str, hint: str | None = None
) -> StepError:
    message = format_error("ray worker", task.step.id, expected, got, hint)
    shard = task.shard if task.shards > 1 else None
    return StepError(message, step=task.step.id, location="engine", shard=shard)


def _report(c: CheckpointCoordinator, *, i: int, n: int, entry: TaskEntry) -> None:
    c.report(i, n, entry)


class _Abort(Exception):
    """Start-up failed; the error is recorded."""


class _Death(Exception):
    """The cause of an error that a dead worker caused."""
