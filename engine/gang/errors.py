"""How a gang fails: :class:`GangError`, naming the ranks, and its failures.

A gang fails when a worker raises, dies without reporting (a segfault, SIGKILL,
the OOM killer), misses a deadline (start-up, the gang's ``timeout_s``) or stops
heartbeating. The parent then stops every other worker and raises one
:class:`GangError` whose message follows the house template, names the failing
rank(s) and their pids, and lists secondary failures after the first (a peer's
"connection reset" usually follows a rank's death). When the first failure is an
exception, the worker's traceback is chained as an
:class:`~strata.engine.errors.RemoteError` (``raise ... from``).

Examples:
    >>> failure = WorkerFailure(1, 4242, FailureKind.DIED, "killed by SIGKILL")
    >>> error = GangError.build("train", [failure])
    >>> error.rank, error.pid, error.ranks
    (1, 4242, (1,))
    >>> print(error)  # doctest: +ELLIPSIS
    worker rank 1 (pid 4242) in step 'train': expected the worker to run until it \
returned, got killed by SIGKILL. Hint: a rank that dies without an error...
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from strata.engine.errors import format_error

_DETAIL_CHARS = 300  # secondary failures: enough to recognise, short enough to scan


class FailureKind(enum.Enum):
    """What went wrong with one rank."""

    RAISED = "raised"
    DIED = "died"
    TIMED_OUT = "timed out"
    STALLED = "stalled"
    NOT_STARTED = "not started"


_DEADLINES = (FailureKind.TIMED_OUT, FailureKind.STALLED, FailureKind.NOT_STARTED)
_EXPECTED = {
    FailureKind.RAISED: "the worker function to return",
    FailureKind.DIED: "the worker to run until it returned",
    FailureKind.TIMED_OUT: "every rank to finish within the gang's timeout_s",
    FailureKind.STALLED: "a heartbeat within heartbeat_timeout_s",
    FailureKind.NOT_STARTED: "every rank to join the process group in time",
}

_HINTS = {
    FailureKind.RAISED: "the chained RemoteError holds the worker's traceback.",
    FailureKind.DIED: (
        "a rank that dies without an error was killed from outside (the OOM "
        "killer, SIGKILL) or crashed in native code; check dmesg and peak memory."
    ),
    FailureKind.TIMED_OUT: (
        "the last heartbeat of each rank shows where it was; a rank waiting in a "
        "collective usually waits for a peer that is stuck elsewhere."
    ),
    FailureKind.STALLED: (
        "call ctx.heartbeat() more often than heartbeat_timeout_s, or raise it."
    ),
    FailureKind.NOT_STARTED: (
        "a cold fork server imports torch first; raise startup_timeout_s, or check "
        "that host and port of the rendezvous are reachable."
    ),
}


@dataclass(frozen=True, slots=True)
class WorkerFailure:
    """One rank's failure.

    Attributes:
        rank: The rank.
        pid: Its process id (``None`` if it never started).
        kind: What went wrong.
        detail: ``"ValueError: bad input"``, ``"killed by SIGKILL"``,
            ``"still running after 2.0 s"``...
        traceback: The worker's formatted traceback, for ``RAISED``.
        progress: The text of its last heartbeat, if any.
        since_beat_s: Seconds since its last heartbeat (or since it started).
    """

    rank: int
    pid: int | None
    kind: FailureKind
    detail: str
    traceback: str | None = None
    progress: str | None = None
    since_beat_s: float | None = None

    @property
    def who(self) -> str:
        """``rank 1 (pid 4242)``."""
        return f"rank {self.rank}" + (f" (pid {self.pid})" if self.pid else "")

    def describe(self) -> str:
        """The detail plus where the rank last said it was."""
        text = self.detail
        if self.since_beat_s is not None:
            where = f" {self.progress!r}" if self.progress else ""
            text += f" (last heartbeat{where} {self.since_beat_s:.1f} s before)"
        return text


class GangError(RuntimeError):
    """A gang failed; names the failing rank(s) (see the module docstring).

    Attributes:
        step: The gang's name (the worker function's, unless the spec names it).
        failures: Every failure seen, the first one first.
    """

    def __init__(self, message: str, *, step: str, failures: Sequence[WorkerFailure]):
        super().__init__(message)
        self.step = step
        self.failures = tuple(failures)

    @property
    def rank(self) -> int | None:
        """The rank that failed first (``None`` for a failure of the whole gang)."""
        return self.failures[0].rank if self.failures else None

    @property
    def pid(self) -> int | None:
        """That rank's process id."""
        return self.failures[0].pid if self.failures else None

    @property
    def ranks(self) -> tuple[int, ...]:
        """Every failing rank, in the order the failures were seen."""
        return tuple(dict.fromkeys(f.rank for f in self.failures))

    @classmethod
    def build(cls, step: str, failures: Sequence[WorkerFailure]) -> GangError:
        """Describe ``failures`` (the first one leads) in the house template.

        Ranks that missed the same deadline are grouped in the subject ("workers
        rank 0 (pid 11), rank 1 (pid 12)"); the others follow as "also ...".
        """
        first = failures[0]
        lead = [first]
        if first.kind in _DEADLINES:
            lead = [f for f in failures if f.kind is first.kind]
        rest = [f for f in failures if f not in lead]
        noun = "worker" if len(lead) == 1 else "workers"
        subject = f"{noun} " + ", ".join(f.who for f in lead)
        if len(lead) == 1:
            got = first.describe()
        else:
            got = "; ".join(f"{f.who} {f.describe()}" for f in lead)
        for failure in rest:
            detail = failure.describe()
            if len(detail) > _DETAIL_CHARS:
                detail = detail[:_DETAIL_CHARS] + "..."
            got += f"; also {failure.who} {failure.kind.value}: {detail}"
        message = format_error(
            subject, step, _EXPECTED[first.kind], got, _HINTS[first.kind]
        )
        return cls(message, step=step, failures=failures)

    @classmethod
    def of_gang(cls, step: str, expected: str, got: str, hint: str) -> GangError:
        """A failure of the gang as a whole (no rank to blame: e.g. start-up)."""
        return cls(
            format_error("gang", step, expected, got, hint), step=step, failures=()
        )
