"""Set up one checkpointed run: the store, the resume point, the coordinator.

Both executors call :func:`begin` in the driver before any task starts, then hand
each task its :class:`~strata.engine.checkpoint.task.TaskCheckpointSpec`.

Examples:
    >>> import tempfile
    >>> from strata.engine.config import CheckpointConfig
    >>> from strata.engine.pipeline import Pipeline
    >>> from strata.engine.tasks import expand
    >>> from strata.engine.testing import ListSink, ListSource
    >>> p = Pipeline("demo")
    >>> _ = p.step("numbers", ListSource([1, 2]))
    >>> _ = p.step("sink", ListSink(), "numbers")
    >>> tasks = expand(p.validate())
    >>> session = begin("demo", tasks, CheckpointConfig(tempfile.mkdtemp(),
    ...                 every_items=1), resume=False, gathered={})
    >>> session.spec(0, tasks[0]).every_items, session.resumed_from
    (1, None)
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strata.engine.checkpoint.coordinator import CheckpointCoordinator, Gathered
from strata.engine.checkpoint.resume import ResumePoint, prepare
from strata.engine.checkpoint.store import CheckpointStore
from strata.engine.checkpoint.task import TaskCheckpointSpec
from strata.engine.config import CheckpointConfig
from strata.engine.operator import CheckpointListener
from strata.engine.pipeline import StepKind
from strata.engine.tasks import Task


@dataclass(frozen=True, slots=True)
class CheckpointSession:
    """The driver's checkpoint state for one run."""

    config: CheckpointConfig
    coordinator: CheckpointCoordinator
    point: ResumePoint
    run: str

    @property
    def resumed_from(self) -> int | None:
        """The checkpoint this run resumed from, if any."""
        return self.point.checkpoint

    def spec(self, index: int, task: Task) -> TaskCheckpointSpec:
        """Task ``index``'s checkpoint spec."""
        return TaskCheckpointSpec(
            # Absolute: a fork server's workers keep the cwd it started with.
            directory=str(self.coordinator.store.directory),
            run=self.run,
            every_items=self.config.every_items,
            restore_from=self.point.checkpoint,
            entry=self.point.entries.get(index),
            first_id=self.point.first_id,
        )

    def listeners(self) -> list[int]:
        """Tasks whose operator wants ``on_checkpoint_complete``."""
        return [
            i
            for i, task in enumerate(self.coordinator.tasks)
            if task.step.kind is not StepKind.BATCH
            and isinstance(task.step.fn, CheckpointListener)
            and i not in self.point.finished
        ]


def begin(
    pipeline: str,
    tasks: tuple[Task, ...],
    config: CheckpointConfig,
    *,
    resume: bool,
    gathered: Gathered,
) -> CheckpointSession:
    """Prepare the directory and coordinator; preload ``gathered`` on resume.

    Raises:
        CheckpointError: See :func:`~strata.engine.checkpoint.resume.prepare`.
    """
    store = CheckpointStore(Path(config.directory).resolve())
    store.directory.mkdir(parents=True, exist_ok=True)
    point = prepare(store, tasks, resume=resume)
    for key, items in point.gathered.items():
        restored: list[Any] = gathered.setdefault(key, [])
        restored.extend(items)
    coordinator = CheckpointCoordinator(
        pipeline,
        tasks,
        store,
        gathered,
        every_items=config.every_items,
        interval_s=config.interval_s,
        keep=config.keep,
        first_id=point.first_id,
        resumed_from=point.checkpoint,
        resumes=point.resumes,
        finished=point.finished,
    )
    return CheckpointSession(config, coordinator, point, secrets.token_hex(4))
