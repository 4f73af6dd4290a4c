"""Before a checkpointed run starts: pick the checkpoint to resume from, check it.

:func:`prepare` runs in the driver before any task starts. A fresh run refuses a
directory that already holds complete checkpoints (resuming is a choice, and so is
starting over). A resumed run takes the newest complete checkpoint, checks that it
fits the pipeline (state is keyed by step id and shard, so the steps and their shard
counts must match) and tells each task what to restore. Incomplete checkpoints, left
by a crash mid-checkpoint, are deleted either way.

Examples:
    >>> import tempfile
    >>> from strata.engine.pipeline import Pipeline
    >>> from strata.engine.tasks import expand
    >>> from strata.engine.testing import ListSink, ListSource
    >>> p = Pipeline("demo")
    >>> _ = p.step("numbers", ListSource([1, 2]))
    >>> _ = p.step("sink", ListSink(), "numbers")
    >>> point = prepare(CheckpointStore(tempfile.mkdtemp()), expand(p.validate()),
    ...                 resume=True)
    >>> point.checkpoint, point.first_id  # nothing to resume from: start over
    (None, 1)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from strata.engine.checkpoint.store import (
    FINISHED,
    STATE,
    CheckpointStore,
    TaskEntry,
)
from strata.engine.errors import CheckpointError, format_error
from strata.engine.metrics import Totals
from strata.engine.operator import Stateful
from strata.engine.pipeline import StepKind
from strata.engine.tasks import Task


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where a run starts.

    Attributes:
        checkpoint: The checkpoint resumed from (``None``: from the start).
        entries: Each task's entry in that checkpoint, by task index.
        first_id: The id of this run's first checkpoint (ids never repeat).
        gathered: The items the driver had collected by that checkpoint, by
            (step id, port, shard).
        resumes: Times the run has resumed, this run included (0: from the
            start).
    """

    checkpoint: int | None = None
    entries: Mapping[int, TaskEntry] = field(default_factory=dict)
    first_id: int = 1
    gathered: Mapping[tuple[str, str, int], list[Any]] = field(default_factory=dict)
    resumes: int = 0

    @property
    def finished(self) -> dict[int, Totals | None]:
        """Tasks that had finished by the checkpoint, with their final counters.

        They do not run again.
        """
        return {i: e.totals for i, e in self.entries.items() if e.status == FINISHED}


def prepare(
    store: CheckpointStore, tasks: Sequence[Task], *, resume: bool
) -> ResumePoint:
    """Check the pipeline and the directory; return where the run starts.

    Raises:
        CheckpointError: Every problem at once: a streaming source that is not
            :class:`~strata.engine.operator.Stateful`, complete checkpoints in the
            directory of a fresh run, or a checkpoint that does not fit the
            pipeline (missing steps, changed shard counts, state changes).
    """
    problems = list(_source_problems(tasks))
    ids = store.ids()
    first_id = (ids[-1] + 1) if ids else 1  # ids never repeat in a directory
    store.discard_incomplete()
    complete = store.complete_ids()
    if complete and not resume:
        problems.append(
            format_error(
                "checkpoint directory",
                tasks[0].step.id if tasks else "?",
                "no complete checkpoint for a fresh run",
                f"checkpoint {complete[-1]} in {store.directory}",
                "resume=True (strata run --resume) continues from it; to start "
                "over, remove the directory or choose another.",
            )
        )
    if problems:
        raise CheckpointError(problems)
    if not complete:
        return ResumePoint(first_id=first_id)
    manifest = store.manifest(complete[-1])
    assert manifest is not None
    n = manifest.checkpoint
    saved = {(e.step, e.shard): e for e in manifest.tasks}
    shards = {e.step: e.shards for e in manifest.tasks}
    entries: dict[int, TaskEntry] = {}
    where = f"checkpoint {n} in {store.directory}"
    fresh = "or start over in an empty checkpoint directory."
    for index, task in enumerate(tasks):
        step = task.step
        if step.id not in shards:
            if task.shard == 0:
                problems.append(
                    format_error(
                        "checkpoint",
                        step.id,
                        f"the step's state in {where}",
                        "no entry for the step",
                        "steps cannot be added to a checkpointed job; remove it, "
                        + fresh,
                    )
                )
            continue
        if shards[step.id] != task.shards:
            if task.shard == 0:
                problems.append(
                    format_error(
                        "shards",
                        step.id,
                        f"{shards[step.id]} (as in {where})",
                        str(task.shards),
                        "state is keyed by (step, shard), so the shard count is "
                        "fixed when the job first runs; run with the same count, "
                        + fresh,
                    )
                )
            continue
        entry = saved[(step.id, task.shard)]
        stateful = step.kind is StepKind.BATCH or isinstance(step.fn, Stateful)
        if entry.status == STATE and not stateful:
            problems.append(
                format_error(
                    "checkpoint",
                    step.id,
                    "a Stateful operator to restore the saved state into",
                    f"{type(step.fn).__qualname__}, which has no restore()",
                    "give the step's operator back its snapshot()/restore(), " + fresh,
                )
            )
        entries[index] = entry
    known = {task.step.id for task in tasks}
    for step_id in sorted(set(shards) - known):
        problems.append(
            format_error(
                "step",
                step_id,
                f"a step of the pipeline (its state is in {where})",
                "no such step",
                "keep step ids stable across runs; to drop the old state, " + fresh,
            )
        )
    if problems:
        raise CheckpointError(problems)
    gathered = {}
    if manifest.driver is not None:
        for step_id, port, shard, items in store.read_state(n, manifest.driver):
            gathered[(step_id, port, shard)] = list(items)
    for index in entries:
        task = tasks[index]
        lost = [
            port
            for port in task.collect
            if (task.step.id, port, task.shard) not in gathered
        ]
        if lost and task.shard == 0:
            problems.append(
                format_error(
                    "collect",
                    task.step.id,
                    f"only ports collected when {where} was taken",
                    f"port {lost[0]!r}, which that run did not collect",
                    "resume with the same collect= (and recorded steps) as the "
                    "run that wrote the checkpoint.",
                )
            )
    if problems:
        raise CheckpointError(problems)
    return ResumePoint(n, entries, first_id, gathered, manifest.resumes + 1)


def _source_problems(tasks: Sequence[Task]) -> list[str]:
    problems = []
    for task in tasks:
        step = task.step
        if step.kind is StepKind.SOURCE and not isinstance(step.fn, Stateful):
            problems.append(
                format_error(
                    "source",
                    step.id,
                    "a Stateful source (snapshot() and restore() of its read "
                    "position) when the run checkpoints",
                    type(step.fn).__qualname__,
                    "a source that cannot seek would replay from its start on "
                    "resume and deliver items twice.",
                )
            )
    return problems
