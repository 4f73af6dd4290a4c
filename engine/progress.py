"""Progress bars for long-running steps (tqdm), one line per streaming step.

Bars appear only for runs that last over a second, so short runs print nothing, and
only when enabled: the CLI enables them when stderr is a terminal and ``--quiet`` is
absent. A source's bar counts the items it produced; any other step's bar counts the
items it consumed, with items out and the share of time spent backpressured after
it. Executors call :meth:`Progress.update` from their driver loop; no thread of its
own.

Examples:
    >>> from strata.engine.metrics import StepMetrics
    >>> progress = Progress(enabled=False, steps=["load"])
    >>> progress.update({"load": StepMetrics(items_out=3)})
    >>> progress.close()
"""

from __future__ import annotations

import sys
import time
from collections.abc import Collection, Mapping, Sequence
from typing import IO, Any

from strata.engine.metrics import StepMetrics


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
            for position, step in enumerate(self._steps):
                self._bars[step] = tqdm(
                    desc=step.ljust(width),
                    unit=" items",
                    position=position,
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
