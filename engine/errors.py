"""Errors raised by the engine, in the project's one error template.

Every message reads
``<subject> in step '<step>': expected <expected>, got <got>. Hint: <hint>``, so users
scan engine errors the same way as storage and partition errors (see STYLE.md, Errors).

Examples:
    >>> print(format_error("k", "part", "k >= 2", "1", "k counts parts."))
    k in step 'part': expected k >= 2, got 1. Hint: k counts parts.
    >>> print(UsageError.build("--report", "strata run", "a file", "a directory"))
    --report in strata run: expected a file, got a directory.
    >>> error = PlanError("demo", ["a", "b"])
    >>> error.problems
    ('a', 'b')
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping, Sequence
from typing import Any


def format_error(
    subject: str, step: str, expected: str, got: str, hint: str | None = None
) -> str:
    """Render one error message in the project template."""
    return format_where(subject, f"step '{step}'", expected, got, hint)


def format_where(
    subject: str, where: str, expected: str, got: str, hint: str | None = None
) -> str:
    """The template with a free-form ``where`` (a command, a function), not a step."""
    message = f"{subject} in {where}: expected {expected}, got {got}."
    if hint:
        message += f" Hint: {hint}"
    return message


class UsageError(ValueError):
    """A command-line argument or job parameter is unusable; found before any work.

    The message is one line in the template, naming the argument, where it was given
    (``strata run``, ``strata.jobs.degree_stats.build``), what was expected and the
    value that was given.
    """

    @classmethod
    def build(
        cls, subject: str, where: str, expected: str, got: str, hint: str | None = None
    ) -> UsageError:
        """Create the error from the template's parts."""
        return cls(format_where(subject, where, expected, got, hint))


class PlanError(ValueError):
    """A pipeline is invalid; carries every problem found, one message each."""

    def __init__(self, pipeline: str, problems: Sequence[str]) -> None:
        self.pipeline = pipeline
        self.problems = tuple(problems)
        count = len(self.problems)
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"{count} {noun} in pipeline '{pipeline}':\n{lines}")


class StepError(RuntimeError):
    """A step failed while running; raised ``from`` the step's own exception.

    Attributes:
        step: The id of the step that failed.
        location: ``module:qualname`` of the function or operator method that raised,
            or ``engine`` when the engine itself failed on the step's behalf.
        shard: The failing shard's index, or ``None`` for an unsharded step.
    """

    def __init__(
        self, message: str, *, step: str, location: str, shard: int | None = None
    ) -> None:
        super().__init__(message)
        self.step = step
        self.location = location
        self.shard = shard

    @classmethod
    def wrap(
        cls,
        exc: BaseException,
        *,
        step: str,
        location: str,
        shard: int = 0,
        shards: int = 1,
        got: str | None = None,
    ) -> StepError:
        """Describe ``exc``, raised by ``location`` in ``step`` (add ``from``)."""
        where = location if shards == 1 else f"{location} (shard {shard} of {shards})"
        message = format_error(
            where,
            step,
            "no exception",
            got if got is not None else f"{type(exc).__name__}: {exc}",
            "the chained cause above holds the step's own traceback.",
        )
        return cls(
            message, step=step, location=location, shard=shard if shards > 1 else None
        )


class WireError(TypeError):
    """An item cannot cross a process boundary (the wire never pickles data)."""


class RemoteError(Exception):
    """An exception raised in a worker process, carried back as text.

    The process executor never unpickles objects sent by workers, so the original
    exception object stays in the worker; its type name, message and formatted
    traceback travel instead and become the cause of the :class:`StepError`.
    """

    def __init__(self, type_name: str, message: str, traceback: str) -> None:
        super().__init__(f"{type_name}: {message}\n\nRemote traceback:\n{traceback}")
        self.type_name = type_name
        self.message = message
        self.traceback = traceback


def error_fields(error: StepError) -> dict[str, Any]:
    """A step error as plain JSON fields, to send from a worker to the driver.

    The cause travels as text (type name, message, traceback): the driver never
    unpickles exceptions made elsewhere. :func:`error_from_fields` rebuilds it.
    """
    cause = error.__cause__ or error
    return {
        "message": str(error),
        "step": error.step,
        "location": error.location,
        "shard": error.shard,
        "type": type(cause).__qualname__,
        "cause": str(cause),
        "traceback": "".join(traceback.format_exception(cause)),
    }


def error_from_fields(fields: Mapping[str, Any]) -> StepError:
    """The driver's :class:`StepError` for :func:`error_fields`' output.

    Examples:
        >>> try:
        ...     raise StepError("boom", step="s", location="m:f") from KeyError("k")
        ... except StepError as error:
        ...     back = error_from_fields(error_fields(error))
        >>> back.step, back.location, back.__cause__.type_name
        ('s', 'm:f', 'KeyError')
    """
    error = StepError(
        fields["message"],
        step=fields["step"],
        location=fields["location"],
        shard=fields["shard"],
    )
    error.__cause__ = RemoteError(fields["type"], fields["cause"], fields["traceback"])
    return error


class CheckpointError(RuntimeError):
    """Checkpoints cannot be resumed from (or written); carries every problem found.

    Raised before a resumed run starts when the checkpoint does not fit the pipeline
    (a step missing on either side, a changed shard count), and when a complete
    checkpoint's files are damaged.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        count = len(self.problems)
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"{count} checkpoint {noun}:\n{lines}")
