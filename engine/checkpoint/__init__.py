"""Exactly-once checkpoints and recovery for streaming pipelines.

**The contract** (stable; streaming operators rely on it).

*Configuration.* ``RunConfig(checkpoint=CheckpointConfig(directory, every_items=N,
interval_s=T, keep=2), resume=False)``; on the command line ``strata run JOB
--checkpoint-dir DIR --checkpoint-every N [--checkpoint-interval T] [--resume]``.
A checkpoint starts after ``N`` items from one source since the previous one, or
``T`` seconds after the previous one started. One is in flight at a time, so
checkpoints are never closer than they take to complete (slow storage spaces them
out instead of piling them up).

*Sources* opt in by implementing :class:`~strata.engine.operator.Stateful`; with
checkpoints on, every streaming source must (a source that cannot seek would replay from
its start). Their state is their read position (a log offset). The engine snapshots a
source *between* items, while ``finish()`` is suspended at a ``yield``, so the snapshot
must describe the position after the item just yielded: advance the position, then
yield. Right after the snapshot the engine emits ``Barrier(n)`` on every outlet, in
order with the items. All sources inject the same checkpoint ids (the driver starts
checkpoint ``n`` in every running source). A source waiting for input should yield
:data:`~strata.engine.operator.IDLE` now and then, so checkpoints and notices are not
held up by a quiet source.

*Every task* aligns barriers across its inbound links (Chandy-Lamport as in Flink: a
link that delivered barrier ``n`` is held until every open link delivered it). Then a
``Stateful`` operator's ``snapshot()`` is taken, encoded with the wire codec
(:mod:`strata.engine.wire`: numpy arrays, torch tensors, Arrow batches and tables,
bytes, JSON scalars, and dicts with string keys, lists and tuples of them; never pickle;
a snapshot the codec refuses fails the run with an error naming the step), the barrier
is forwarded on every outlet, and the state is written to
``DIR/checkpoint-<n>/<step>.<shard>.<run>.state`` (temp file, rename) and reported to
the driver. The task then carries on: it never waits for fsync. A stateless streaming
step just forwards the barrier. A batch step gathering a stream stores what it has
gathered so far (it runs once, at the end, on all of it; for a long stream prefer a
``Stateful`` operator that folds as it goes, since each checkpoint rewrites the whole
gathered list).

*Completion.* Checkpoint ``n`` is complete when every task has stored its part or
has ended without meeting barrier ``n``. The driver then fsyncs every state file
and the directory, writes ``MANIFEST.json`` atomically (temp file, fsync, rename,
directory fsync), keeps the newest ``keep`` complete checkpoints and deletes older
and abandoned ones. Items the driver collects (``collect=``,
:class:`~strata.engine.testing.ListSink`, recorded outputs) are stored with each
checkpoint too, so they are exactly-once across a resume as well (resume with the
same ``collect=``; anything else is a :class:`~strata.engine.errors.CheckpointError`).

*Notification.* After the manifest is durable, each running operator that defines
``on_checkpoint_complete(n)`` (:class:`~strata.engine.operator.CheckpointListener`) has
it called on its own thread, between items: a log source may drop segments before its
offset in ``n``; a sink may commit output up to barrier ``n``. Notices come once each,
in order, and before the task's next snapshot, so the task's latest snapshot is the one
in ``n`` when it is told (the engine tells it early if checkpoint ``n + 1`` reaches the
task before the notice does).

*Resume.* ``execute(p, executor, config=RunConfig(checkpoint=..., resume=True))``
finds the newest complete checkpoint (incomplete ones are ignored and deleted),
checks it against the pipeline (a step missing on either side, or a changed shard
count, is a :class:`~strata.engine.errors.CheckpointError` listing every problem), then
each stateful task runs ``open(ctx)``, ``restore(state)`` and carries on: sources
from their saved positions, so everything after the checkpoint is replayed exactly
once. A task that had ended by the checkpoint does not run again (its consumers'
state holds everything it sent); anything an operator got from such a step, say a
model from a batch step, must be in its own snapshot or be loaded again in
``open()``. With no complete checkpoint the run starts from the beginning. A fresh
run (``resume=False``) refuses a directory holding complete checkpoints. The run
report's ``checkpoint`` section has the ids, counts, bytes and seconds, the
checkpoint resumed from and how many times the run has resumed (``resumes``). Each
task's entry keeps its work counters as the barrier passed (items, bytes, busy and
blocked seconds, the operator's counters), and a resumed task starts from them, so
a resumed run's step counters cover the whole run, replayed items counted once.

*What is not covered.* Side effects of operators (files written, messages sent)
happen again for the items replayed after a resume: make sinks idempotent, or
commit them in ``on_checkpoint_complete``. A batch step with no streaming input
runs once; if it ended before the checkpoint it is not run again. A notice may be
lost in a crash (the next one covers it). A complete checkpoint whose files were
damaged afterwards is an error, not a silent fall-back to an older one (a log
source may already have dropped what the older one needs).

*Testing.* :class:`~strata.engine.testing.ListSource` is ``Stateful``, and an
:class:`~strata.engine.testing.Abort` among its items injects a crash once (Bytewax's
``TestingSource.ABORT``), so a crash test is: run, fail, resume, compare.

Examples:
    A running count over a durable list, with a crash injected once:

    >>> import dataclasses, tempfile
    >>> from strata.engine import CheckpointConfig, Operator, Pipeline, RunConfig
    >>> from strata.engine import execute
    >>> from strata.engine.testing import Abort, ListSource
    >>> class Count(Operator[int, int]):
    ...     def open(self, ctx):
    ...         self.n = 0
    ...     def process(self, item):
    ...         self.n += 1
    ...         return ()
    ...     def finish(self):
    ...         yield self.n
    ...     def snapshot(self) -> int:  # Stateful: snapshot() and restore()
    ...         return self.n
    ...     def restore(self, state: int) -> None:
    ...         self.n = state
    >>> directory = tempfile.mkdtemp()
    >>> crash = Abort(f"{directory}/crashed")  # fails the first run, once
    >>> p = Pipeline("resumable")
    >>> _ = p.step("numbers", ListSource([*range(60), crash, *range(60, 100)]))
    >>> _ = p.step("count", Count(), "numbers")
    >>> config = RunConfig(checkpoint=CheckpointConfig(directory, every_items=10))
    >>> execute(p, config=config, collect=("count",), check=False).ok
    False
    >>> resumed = execute(p, config=dataclasses.replace(config, resume=True),
    ...                   collect=("count",))
    >>> resumed.collected["count"]  # from the last complete checkpoint, once each
    [100]
"""

from strata.engine.checkpoint.coordinator import CheckpointCoordinator
from strata.engine.checkpoint.resume import ResumePoint, prepare
from strata.engine.checkpoint.store import CheckpointStore, Manifest, TaskEntry
from strata.engine.checkpoint.task import CoordinatorLink, TaskCheckpoints
from strata.engine.config import CheckpointConfig
from strata.engine.errors import CheckpointError
from strata.engine.operator import IDLE, CheckpointListener, Stateful

__all__ = [
    "IDLE",
    "CheckpointConfig",
    "CheckpointCoordinator",
    "CheckpointError",
    "CheckpointListener",
    "CheckpointStore",
    "CoordinatorLink",
    "Manifest",
    "ResumePoint",
    "Stateful",
    "TaskCheckpoints",
    "TaskEntry",
    "prepare",
]
