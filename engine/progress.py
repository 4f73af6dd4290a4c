"""What a run shows while it runs: log lines or tqdm bars, and per-step bars.

Steps log through :mod:`logging` (``logging.getLogger("strata.<...>")``). A record
may carry a :class:`ProgressUpdate` (``extra=progress_extra(...)``): work with a
count, such as a trainer's epochs or the phases of a partitioner. The command line
sets the view once with :func:`configure_logging`: on a terminal, a
:class:`BarHandler` turns such records into tqdm bars (their postfix: the update's
values) and prints the others above the bars; elsewhere (a pipe, a file) every
record is one line on stderr, written and flushed as it happens, so
``strata run JOB | cat`` shows each epoch as it ends.

Bars of items per step (:class:`Progress`) appear only for runs that last over a
second, so short runs print nothing, and only when enabled: the CLI enables them
when stderr is a terminal and ``--quiet`` is absent. A source's bar counts the items
it produced; any other step's bar counts the items it consumed, with items out and
the share of time spent backpressured after it. Executors call
:meth:`Progress.update` from their driver loop; no thread of its own.

Examples:
    >>> from strata.engine.metrics import StepMetrics
    >>> progress = Progress(enabled=False, steps=["load"])
    >>> progress.update({"load": StepMetrics(items_out=3)})
    >>> progress.close()
    >>> import io, logging
    >>> out = io.StringIO()
    >>> _ = configure_logging(0, bars=False, stream=out)
    >>> log = logging.getLogger("strata.demo")
    >>> log.info("epoch 1/2  loss 0.5", extra=progress_extra("train", 1, 2))
    >>> _ = configure_logging(-1, bars=False, stream=out)  # -q: warnings only
    >>> log.info("epoch 2/2  loss 0.4")
    >>> print(out.getvalue(), end="")
    epoch 1/2  loss 0.5
    >>> reset_logging()
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from strata.engine.metrics import StepMetrics

#: The logger every Strata package logs under (``strata.<package>.<module>``).
#: The environment variable that tells worker processes the command's verbosity.
VERBOSITY_ENV = "STRATA_LOG_VERBOSITY"
LOGGER = "strata"


@dataclass(frozen=True, slots=True)
class ProgressUpdate:
    """Where a counted piece of work is: what a log record's bar shows.

    Attributes:
        key: Names the bar (e.g. ``"train epochs"``); updates with one key move
            one bar.
        n: Units done.
        total: Units in all (None: unknown).
        unit: What is counted (``"epoch"``, ``"phase"``).
        values: Shown after the bar, ``name=value`` (loss, metrics, phase name).
        done: The work ended (the bar closes, even below ``total``).
    """

    key: str
    n: int
    total: int | None = None
    unit: str = "it"
    values: Mapping[str, str] = field(default_factory=dict)
    done: bool = False


def progress_extra(
    key: str,
    n: int,
    total: int | None = None,
    *,
    unit: str = "it",
    values: Mapping[str, str] | None = None,
    done: bool = False,
) -> dict[str, Any]:
    """The ``extra=`` of a log record that also moves a bar (:class:`ProgressUpdate`).

    Examples:
        >>> progress_extra("part phases", 1, 3, unit="phase")["progress"].total
        3
    """
    update = ProgressUpdate(key, n, total, unit, dict(values or {}), done)
    return {"progress": update}


class BarHandler(logging.Handler):
    """A logging handler for terminals: records with a progress update move bars.

    Records with a :class:`ProgressUpdate` (their ``progress`` attribute) draw one
    tqdm bar per key; every other record is printed above the bars.

    Args:
        stream: Where bars and lines go (default: stderr).
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        super().__init__()
        self._stream = stream
        self._bars: dict[str, Any] = {}

    def emit(self, record: logging.LogRecord) -> None:
        """Move the record's bar, or print the record."""
        from tqdm import tqdm

        stream = self._stream or sys.stderr
        update = getattr(record, "progress", None)
        try:
            if not isinstance(update, ProgressUpdate):
                tqdm.write(self.format(record), file=stream)
                return
            bar = self._bars.get(update.key)
            if bar is None:
                bar = self._bars[update.key] = tqdm(
                    desc=update.key,
                    total=update.total,
                    unit=f" {update.unit}",
                    leave=True,
                    file=stream,
                )
            text = "  ".join(f"{k} {v}" for k, v in update.values.items())
            if text:
                bar.set_postfix_str(text, refresh=False)
            bar.update(update.n - bar.n)  # update(), not n=: tqdm measures the rate
            bar.refresh()
            if update.done:
                bar.close()
                del self._bars[update.key]
        except Exception:  # logging must never break the run
            self.handleError(record)

    def close(self) -> None:
        """Close the open bars, leaving their last state on screen."""
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()
        super().close()


def configure_logging(
    verbosity: int = 0, *, bars: bool | None = None, stream: IO[str] | None = None
) -> logging.Handler:
    """Set how the ``strata`` loggers show a run (what the command line calls).

    Args:
        verbosity: -1 (``-q``): warnings and errors only; 0: also progress lines
            (one per epoch); 1 (``-v``) or more: also debug lines, with the time
            and the logger's name.
        bars: Draw tqdm bars (default: when ``stream`` and stdout are both
            terminals and ``verbosity`` >= 0).
        stream: Where records go (default: the current stderr).

    Returns:
        The handler installed on the ``strata`` logger (it replaces the one an
        earlier call installed).
    """
    stream = stream or sys.stderr
    if bars is None:
        # Piped output (``strata run JOB | cat``) gets lines: a bar is for a
        # terminal session as a whole, not for a stream someone is reading.
        bars = verbosity >= 0 and _isatty(stream) and _isatty(sys.stdout)
    # StreamHandler flushes after every record: a pipe sees each line at once.
    handler: logging.Handler = (
        BarHandler(stream) if bars else logging.StreamHandler(stream)
    )
    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s" if verbosity > 0 else None
    handler.setFormatter(_Formatter(fmt))
    reset_logging()
    logger = logging.getLogger(LOGGER)
    handler._strata = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    levels = {-1: logging.WARNING, 0: logging.INFO}
    logger.setLevel(levels.get(max(-1, verbosity), logging.DEBUG))
    # Worker processes (the process executor) read it and log the same way.
    os.environ[VERBOSITY_ENV] = str(verbosity)
    return handler


def configure_worker_logging() -> None:
    """In a worker process: log as the command that started it asked (lines only).

    A worker's stderr is the command's, so its records (a trainer's epoch lines)
    appear as they happen, on every executor.
    """
    verbosity = os.environ.get(VERBOSITY_ENV)
    if verbosity is not None and verbosity.lstrip("-").isdigit():
        configure_logging(int(verbosity), bars=False)


def reset_logging() -> None:
    """Undo :func:`configure_logging`: remove its handler (closing its bars)."""
    os.environ.pop(VERBOSITY_ENV, None)
    logger = logging.getLogger(LOGGER)
    for old in [h for h in logger.handlers if getattr(h, "_strata", False)]:
        logger.removeHandler(old)
        old.close()
    logger.setLevel(logging.NOTSET)


class _Formatter(logging.Formatter):
    """The message alone, warnings and errors prefixed with their level."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if self._fmt == "%(message)s" and record.levelno >= logging.WARNING:
            return f"{record.levelname.lower()}: {text}"
        return text


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """tqdm bars of items per step, with items out and time backpressured.

    Args:
        enabled: Draw bars at all.
        steps: Step ids, one bar each, in this order.
        sources: The steps among them without inputs (counted by items out).
        delay_s: Draw nothing for runs shorter than this.
        file: Where bars go (default: stderr).
    """

    def __init__(
        self,
        *,
        enabled: bool,
        steps: Sequence[str],
        sources: Collection[str] = (),
        delay_s: float = 1.0,
        file: IO[str] | None = None,
    ) -> None:
        self._enabled = enabled and bool(steps)
        self._steps = list(steps)
        self._sources = set(sources)
        self._delay_s = delay_s
        self._file = file
        self._start = time.monotonic()
        self._bars: dict[str, Any] = {}

    def update(self, metrics: Mapping[str, StepMetrics]) -> None:
        """Refresh the bars from each step's current (merged) metrics."""
        elapsed = time.monotonic() - self._start
        if not self._enabled or elapsed < self._delay_s:
            return
        if not self._bars:
            from tqdm import tqdm

            width = max(len(s) for s in self._steps)
            for step in self._steps:  # tqdm places each below the bars open
                self._bars[step] = tqdm(  # (a trainer's epoch bar among them)
                    desc=step.ljust(width),
                    unit=" items",
                    leave=True,
                    file=self._file or sys.stderr,
                )
        for step, bar in self._bars.items():
            m = metrics.get(step)
            if m is None:
                continue
            source = step in self._sources
            bar.n = m.items_out if source else m.items_in
            share = min(1.0, m.blocked_s / elapsed)
            out = "" if source else f"out {m.items_out}  "
            bar.set_postfix_str(f"{out}backpressured {share:.0%}", refresh=False)
            bar.refresh()

    def close(self) -> None:
        """Close the bars (leaving their last state on screen)."""
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()
