"""Progress bars: one line per step, only when enabled and the run is long."""

from __future__ import annotations

import io

from strata.engine.metrics import StepMetrics
from strata.engine.progress import Progress


def test_bars_count_items_and_backpressure() -> None:
    out = io.StringIO()
    progress = Progress(
        enabled=True, steps=["edges", "degrees"], sources=["edges"], delay_s=0, file=out
    )
    progress.update(
        {
            "edges": StepMetrics(items_out=40, blocked_s=0.0),
            "degrees": StepMetrics(items_in=30, items_out=2),
        }
    )
    progress.close()
    text = out.getvalue()
    assert "edges  : 40 items" in text
    assert "degrees: 30 items" in text
    assert "out 2" in text


def test_short_or_disabled_runs_print_nothing() -> None:
    out = io.StringIO()
    for progress in (
        Progress(enabled=False, steps=["a"], delay_s=0, file=out),
        Progress(enabled=True, steps=["a"], delay_s=60, file=out),
    ):
        progress.update({"a": StepMetrics(items_out=1)})
        progress.close()
    assert out.getvalue() == ""
