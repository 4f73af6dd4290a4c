"""Progress bars for long-running steps (tqdm), one line per streaming step.

Bars appear only for runs that last over a second, so short runs print nothing, and
only when enabled: the CLI enables them when stderr is a terminal and ``--quiet`` is
absent. Executors call :meth:`Progress.update` from their driver loop; no thread of
its own.

Examples:
    >>> from engine.metrics import StepMetrics
    >>> progress = Progress(enabled=False, steps=["load"])
    >>> progress.update({"load": StepMetrics(items_out=3)})
    >>> progress.close()
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from engine.metrics import StepMetrics

_DELAY_S = 1.0


class Progress:
    """tqdm bars of items out per step, with items in and time backpressured."""

    def __init__(self, *, enabled: bool, steps: Sequence[str]) -> None:
        self._enabled = enabled
        self._steps = list(steps)
        self._start = time.monotonic()
        self._bars: dict[str, Any] = {}

    def update(self, metrics: Mapping[str, StepMetrics]) -> None:
        """Refresh the bars from each step's current (merged) metrics."""
        if not self._enabled or time.monotonic() - self._start < _DELAY_S:
            return
        if not self._bars:
            from tqdm import tqdm

            width = max(len(s) for s in self._steps)
            for position, step in enumerate(self._steps):
                self._bars[step] = tqdm(
                    desc=step.ljust(width), unit=" items", position=position, leave=True
                )
        elapsed = time.monotonic() - self._start
        for step, bar in self._bars.items():
            m = metrics.get(step)
            if m is None:
                continue
            bar.n = m.items_out
            share = min(1.0, m.blocked_s / elapsed)
            bar.set_postfix_str(
                f"in {m.items_in}  backpressured {share:.0%}", refresh=False
            )
            bar.refresh()

    def close(self) -> None:
        """Close the bars (leaving their last state on screen)."""
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()
