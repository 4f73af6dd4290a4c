"""Checks a command or a job runs before it starts the work.

An output path that cannot be written, or a count that is negative, should fail in
the first second with one line naming the argument, not with a traceback after the
whole job ran. Every check raises :class:`~strata.engine.errors.UsageError` in the project
template (``<subject> in <where>: expected <expected>, got <got>. Hint: <hint>``).

* :func:`check_output_file`: a file will be written at ``path`` (``-`` is stdout).
* :func:`check_output_dir`: a directory will be written at ``path``.
* :func:`at_least`, :func:`between`: numeric parameters have bounds (``None`` is
  skipped).

Output checks write nothing that stays: they probe the nearest existing directory
with a temporary file, which is removed again, so a job that is then refused leaves
no trace (running as root, ``os.access`` says yes to ``/proc``; a real probe does
not).

Examples:
    >>> at_least("jobs.demo.build", 1, num_edges=10, shards=None)
    >>> at_least("jobs.demo.build", 1, num_edges=-5)
    Traceback (most recent call last):
    ...
    strata.engine.errors.UsageError: num_edges in jobs.demo.build: expected num_edges >= 1, got -5.
    >>> check_output_file("-", argument="--report", where="strata run")
    >>> check_output_file("/proc/report.json", argument="--report", where="strata run")
    Traceback (most recent call last):
    ...
    strata.engine.errors.UsageError: --report in strata run: expected a writable file path, got '/proc/report.json' (cannot create files in /proc). Hint: choose a path in a directory you can write to, or '-' for stdout.
"""  # noqa: E501

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

from strata.engine.errors import UsageError

#: The path that means "standard output" for file outputs.
STDOUT = "-"


def is_stdout(path: str | os.PathLike[str] | None) -> bool:
    """Whether an output path is ``-`` (standard output)."""
    return path is not None and os.fspath(path) == STDOUT


def check_output_file(
    path: str | os.PathLike[str], *, argument: str, where: str, stdout: bool = True
) -> None:
    """Raise unless a file can be written at ``path`` (its parents may be missing).

    Args:
        path: The output file; ``-`` (standard output) passes when ``stdout``.
        argument: The argument that gave the path (``--report``), for the message.
        where: The command (``strata run``), for the message.
        stdout: Whether ``-`` is accepted.

    Raises:
        UsageError: ``path`` is a directory, lies under a regular file, or in a
            directory that cannot be written.
    """
    text = os.fspath(path)
    if text == STDOUT and stdout:
        return
    target = Path(text)
    expected = "a writable file path"
    hint = "choose a path in a directory you can write to" + (
        ", or '-' for stdout." if stdout else "."
    )
    if text == "" or target.is_dir():
        raise UsageError.build(
            argument, where, expected, f"{text!r} (a directory)" if text else "''", hint
        )
    if target.exists():
        if not os.access(target, os.W_OK):
            raise UsageError.build(
                argument, where, expected, f"{text!r} (a read-only file)", hint
            )
        return
    _check_creatable(target.parent, text, argument, where, expected, hint)


def check_output_dir(
    path: str | os.PathLike[str], *, argument: str, where: str
) -> None:
    """Raise unless a directory can be written at ``path`` (created if missing).

    Raises:
        UsageError: ``path`` is a file, lies under a regular file, or in a
            directory that cannot be written.
    """
    text = os.fspath(path)
    target = Path(text)
    expected = "a writable directory"
    hint = "choose a directory you can write to."
    if text == "":
        raise UsageError.build(argument, where, expected, "''", hint)
    if target.exists() and not target.is_dir():
        raise UsageError.build(argument, where, expected, f"{text!r} (a file)", hint)
    _check_creatable(target, text, argument, where, expected, hint)


def at_least(where: str, minimum: float, **values: float | None) -> None:
    """Raise naming the first of ``values`` below ``minimum`` (``None`` is skipped).

    Also refuses NaN and infinities, which no count or size allows.

    Args:
        where: The function that takes the values (``strata.jobs.degree_stats.build``).
        minimum: The smallest allowed value.
        values: The parameters by name.
    """
    for name, value in values.items():
        if value is None:
            continue
        number = float(value)
        if math.isnan(number) or math.isinf(number) or number < minimum:
            bound = int(minimum) if float(minimum).is_integer() else minimum
            raise UsageError.build(name, where, f"{name} >= {bound}", repr(value))


def between(where: str, low: float, high: float, **values: float | None) -> None:
    """Raise naming the first of ``values`` outside ``[low, high]`` (``None`` skipped).

    Examples:
        >>> between("jobs.demo.build", 0, 1, train_fraction=1.5)
        Traceback (most recent call last):
        ...
        strata.engine.errors.UsageError: train_fraction in jobs.demo.build: expected 0 <= train_fraction <= 1, got 1.5.
    """  # noqa: E501
    for name, value in values.items():
        if value is None:
            continue
        number = float(value)
        if math.isnan(number) or not low <= number <= high:
            lo, hi = (int(b) if float(b).is_integer() else b for b in (low, high))
            raise UsageError.build(name, where, f"{lo} <= {name} <= {hi}", repr(value))


def _check_creatable(
    target: Path, text: str, argument: str, where: str, expected: str, hint: str
) -> None:
    """Probe the nearest existing directory at or above ``target`` for writing."""
    existing = target
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        got = f"{text!r} ({str(existing)!r} is a file, not a directory)"
        raise UsageError.build(argument, where, expected, got, hint)
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".strata-probe-"):
            pass
    except OSError:
        got = f"{text!r} (cannot create files in {existing})"
        raise UsageError.build(argument, where, expected, got, hint) from None
