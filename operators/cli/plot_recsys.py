"""``strata plot`` for recommender runs: per-variant scores and GradNorm's weights.

The E2E-GRec job (``jobs/e2egrec.py``) and its acceptance harness
(``benchmarks/operators/recsys/e2egrec_acceptance.py``) write one *recsys table*
(:func:`recsys_table` finds it: ``outputs["recsys"]`` of a run report, or
``"recsys"`` at the top of a harness file)::

    {"seeds": [0, 1, 2],
     "variants": {"B0": {"recall@20": [.., .., ..], "ndcg@20": [...], ...}, ...},
     "gradnorm": {"E2E": {"step": [...], "weights": {"rank": [...], ...}}}}

One list entry per model seed. The figure has three panels: Recall@20 and
NDCG@20 per variant (bar = mean over seeds, error bar = standard deviation, dots =
the seeds), and each task's GradNorm weight over the training steps of every
variant that balances with GradNorm (E2E solid, others dashed; seed 0's run).

Examples:
    >>> table = {"variants": {"B0": {"recall@20": [0.1, 0.2], "ndcg@20": [0.1]}}}
    >>> recsys_table({"outputs": {"recsys": table}}) is table
    True
    >>> recsys_table({"steps": {}}) is None
    True
    >>> mean_std([0.1, 0.3])
    (0.2, 0.141421356237)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["METRICS", "draw_recsys", "mean_std", "recsys_table"]

#: The bar panels: the metric key in the table, then its axis label.
METRICS = (("recall@20", "Recall@20"), ("ndcg@20", "NDCG@20"))


def recsys_table(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The recsys table of a run report or harness file, or None if it has none."""
    outputs = data.get("outputs")
    found = outputs.get("recsys") if isinstance(outputs, Mapping) else None
    if found is None:
        found = data.get("recsys")
    if isinstance(found, dict) and isinstance(found.get("variants"), dict):
        return found
    return None


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof 1; 0 for one value, NaN for none)."""
    if not values:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1)
    return round(mean, 12), round(math.sqrt(var), 12)


def draw_recsys(plt: Any, table: Mapping[str, Any], title: str | None = None) -> Any:
    """The figure: Recall@20 and NDCG@20 per variant, GradNorm weights (module docs)."""
    variants: Mapping[str, Mapping[str, Sequence[float]]] = table["variants"]
    gradnorm: Mapping[str, Any] = table.get("gradnorm") or {}
    panels = len(METRICS) + (1 if gradnorm else 0)
    figure, axes = plt.subplots(1, panels, figsize=(4.8 * panels, 3.8), squeeze=False)
    flat = list(axes[0])
    names = list(variants)
    for ax, (key, label) in zip(flat, METRICS, strict=False):
        values = [list(variants[n].get(key, [])) for n in names]
        stats = [mean_std(v) for v in values]
        colors = ["tab:orange" if n == "E2E" else "tab:blue" for n in names]
        rows = range(len(names))
        ax.bar(
            list(rows),
            [m for m, _ in stats],
            yerr=[s for _, s in stats],
            capsize=4,
            color=colors,
        )
        for row, seeds in zip(rows, values, strict=True):
            ax.plot([row] * len(seeds), seeds, "k.", markersize=4)
        ax.set_xticks(list(rows), names)
        ax.set_ylabel(label)
        count = len(table.get("seeds", [])) or max((len(v) for v in values), default=0)
        ax.set_title(f"{label} (mean ± std, {count} seed{'s' * (count != 1)})")
        ax.grid(axis="y", alpha=0.3)
    if gradnorm:
        _draw_weights(flat[-1], gradnorm)
    figure.suptitle(title or table.get("title", "E2E-GRec variants"))
    figure.tight_layout()
    return figure


def _draw_weights(ax: Any, gradnorm: Mapping[str, Any]) -> None:
    """Each task's weight over the steps, per GradNorm variant (E2E solid)."""
    for variant, run in gradnorm.items():
        steps = run.get("step")
        for task, weights in run.get("weights", {}).items():
            xs = steps if steps and len(steps) == len(weights) else range(len(weights))
            style = "-" if variant == "E2E" else "--"
            marker = "." if len(weights) < 20 else None  # a short run stays visible
            ax.plot(
                list(xs), list(weights), style, marker=marker, label=f"{variant} {task}"
            )
    ax.set_xlabel("training step")
    ax.set_ylabel("task weight w")
    ax.set_title("GradNorm task weights")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
