"""``strata plot FILE.json --out FILE.png|.svg``: a run's curves, or a benchmark's bars.

Two kinds of JSON are drawn:

* a run report (``strata run JOB --report FILE.json``): the training loss and, when
  the report has them, the validation loss (left) and the accuracies (middle) per
  epoch, from the outputs a trainer's summary records (``loss_curve`` and
  ``curves``); and each step's busy and backpressured seconds (right);
* a ``jobs/geo_bench.py`` run report: latency CDFs per configuration and a map of
  where each region's reads were served (:mod:`strata.operators.cli.plot_geo`);
* a pytest-benchmark file (``pytest benchmarks/... --benchmark-json FILE.json``):
  per benchmark, one bar chart per measure its ``extra_info`` gives every
  contender (``strata_epoch_s``, ``pyg_csr_epoch_s``, ``dgl_epoch_s``: Strata
  against its peers); a file without contenders gets one chart of median times.

matplotlib is an optional extra: ``pip install 'strata-gnn[plot]'``.

Exit status: 0 on success, 2 for a bad argument or a missing matplotlib.

Examples:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="strata plot")
    >>> PlotCommand().configure(parser)
    >>> args = parser.parse_args(["run.json", "--out", "curves.png"])
    >>> str(args.file), str(args.out)
    ('run.json', 'curves.png')
    >>> contenders({"strata_epoch_s": 1.0, "dgl_epoch_s": 2.0, "strata_over_dgl": 0.5})
    {'epoch_s': {'strata': 1.0, 'dgl': 2.0}}
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from strata.operators.cli.plot_geo import check_geo_report, draw_geo, is_geo_report

EXIT_OK, EXIT_USAGE = 0, 2
FORMATS = (".png", ".svg", ".pdf")
MISSING = (
    "strata plot: needs matplotlib, which is not installed. "
    "Hint: pip install 'strata-gnn[plot]' (or pip install matplotlib)."
)


class PlotCommand:
    """``strata plot``: an :class:`strata.engine.command.Command`."""

    name = "plot"
    help = "draw a run report's curves, or a benchmark JSON's bars (matplotlib)"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add ``FILE``, ``--out`` and ``--title``."""
        parser.add_argument(
            "file", type=Path, help="a run report or a pytest-benchmark JSON file"
        )
        parser.add_argument(
            "--out", type=Path, required=True, help="the picture (.png, .svg, .pdf)"
        )
        parser.add_argument("--title", help="the figure's title (default: the job)")

    def run(self, args: argparse.Namespace) -> int:
        """Read the file, draw, save; return the exit status."""
        from strata.engine.checks import check_output_file
        from strata.engine.errors import UsageError

        try:
            check_output_file(
                args.out, argument="--out", where="strata plot", stdout=False
            )
            if args.out.suffix not in FORMATS:
                raise UsageError.build(
                    "--out",
                    "strata plot",
                    f"a file ending in {', '.join(FORMATS)}",
                    repr(str(args.out)),
                )
            data = _read(args.file)
            if is_geo_report(data):
                check_geo_report(data, "strata plot")
        except UsageError as error:
            print(f"strata plot: {error}", file=sys.stderr)
            return EXIT_USAGE
        try:
            import matplotlib

            matplotlib.use("Agg")  # files only: no display needed
            from matplotlib import pyplot as plt
        except ImportError:
            print(MISSING, file=sys.stderr)
            return EXIT_USAGE
        from strata.operators.cli.plot_recsys import draw_recsys, recsys_table

        recsys = recsys_table(data)
        if recsys is not None:
            figure = draw_recsys(plt, recsys, args.title)
        elif "benchmarks" in data:
            figure = draw_benchmarks(plt, data, args.title)
        elif is_geo_report(data):
            figure = draw_geo(plt, data, args.title)
        else:
            figure = draw_run(plt, data, args.title)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(args.out, dpi=120, bbox_inches="tight")
        plt.close(figure)
        print(f"wrote {args.out}", file=sys.stderr)
        return EXIT_OK


def draw_run(plt: Any, report: Mapping[str, Any], title: str | None = None) -> Any:
    """A run report's figure: loss, metrics per epoch; busy and blocked per step."""
    outputs = report.get("outputs", {})
    curves: dict[str, list[float | None]] = dict(outputs.get("curves", {}))
    loss = outputs.get("loss_curve")
    if loss:
        curves = {"loss": loss, **curves}
    losses = {k: v for k, v in curves.items() if k.endswith("loss")}
    scores = {k: v for k, v in curves.items() if not k.endswith("loss")}
    panels = [p for p in (losses, scores) if p] + [report.get("steps", {})]
    figure, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.8))
    axes = list(axes) if len(panels) > 1 else [axes]
    for ax, series in zip(axes, panels[:-1], strict=False):
        for name, values in series.items():
            ys = [math.nan if v is None else v for v in values]
            ax.plot(range(1, len(ys) + 1), ys, label=name)
        ax.set_xlabel("epoch")
        ax.set_ylabel("loss" if series is losses else "score")
        ax.legend()
        ax.grid(alpha=0.3)
    _draw_steps(axes[-1], report.get("steps", {}))
    status = report.get("status", "ok")
    heading = title or f"{report.get('job', 'run')} ({report.get('executor', '?')})"
    if status != "ok":
        heading += f": {status}"
    elif isinstance(outputs.get("test_accuracy"), int | float):
        heading += f": test accuracy {outputs['test_accuracy']:.3f}"
    figure.suptitle(heading)
    figure.tight_layout()
    return figure


def _draw_steps(ax: Any, steps: Mapping[str, Mapping[str, Any]]) -> None:
    names = list(steps)
    busy = [float(steps[n].get("busy_s", 0.0)) for n in names]
    blocked = [float(steps[n].get("blocked_s", 0.0)) for n in names]
    rows = range(len(names))
    ax.barh(rows, busy, label="busy")
    ax.barh(rows, blocked, left=busy, label="backpressured")
    ax.set_yticks(list(rows), names)
    ax.invert_yaxis()  # the first step on top
    ax.set_xlabel("seconds")
    ax.set_title("steps")
    ax.legend()


def contenders(info: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Per measure, each contender's value, from a benchmark's ``extra_info``.

    The measures are those of the ``strata_<measure>`` keys (ratios,
    ``strata_over_*``, aside); a contender is a prefix ``<name>_`` that has every
    one of them.
    """
    numbers = {
        k: float(v)
        for k, v in info.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    measures = [
        k.removeprefix("strata_")
        for k in numbers
        if k.startswith("strata_") and not k.startswith("strata_over_")
    ]
    if not measures:
        return {}
    names = {k[: -len(m) - 1] for k in numbers for m in measures if k.endswith(f"_{m}")}
    names = {n for n in names if all(f"{n}_{m}" in numbers for m in measures)}
    order = ["strata", *sorted(names - {"strata"})]
    return {m: {n: numbers[f"{n}_{m}"] for n in order} for m in measures}


def draw_benchmarks(plt: Any, data: Mapping[str, Any], title: str | None = None) -> Any:
    """A pytest-benchmark file's figure: Strata against its peers, as bars."""
    charts: list[tuple[str, dict[str, float]]] = []
    for bench in data["benchmarks"]:
        for measure, values in contenders(bench.get("extra_info", {})).items():
            charts.append((f"{bench['name']}\n{measure}", values))
    if not charts:  # no peers: each benchmark's median time
        medians = {b["name"]: float(b["stats"]["median"]) for b in data["benchmarks"]}
        charts.append(("median seconds", medians))
    columns = min(3, len(charts))
    rows = math.ceil(len(charts) / columns)
    figure, axes = plt.subplots(
        rows, columns, figsize=(4.5 * columns, 3.5 * rows), squeeze=False
    )
    flat = [ax for row in axes for ax in row]
    for ax, (name, values) in zip(flat, charts, strict=False):
        colors = ["tab:orange" if k == "strata" else "tab:blue" for k in values]
        ax.bar(list(values), list(values.values()), color=colors)
        ax.set_title(name, fontsize=9)
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    for ax in flat[len(charts) :]:
        ax.set_visible(False)
    figure.suptitle(title or "Strata and its peers")
    figure.tight_layout()
    return figure


def _read(path: Path) -> dict[str, Any]:
    from strata.engine.errors import UsageError

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        got = f"{str(path)!r} ({getattr(error, 'strerror', None) or error})"
        raise UsageError.build(
            "FILE", "strata plot", "a readable JSON file", got
        ) from error
    kinds = ("benchmarks", "steps", "recsys")  # recsys: operators/cli/plot_recsys
    if not isinstance(data, dict) or not any(kind in data for kind in kinds):
        raise UsageError.build(
            "FILE",
            "strata plot",
            "a run report (strata run --report) or a pytest-benchmark JSON file",
            repr(str(path)),
        )
    return data
