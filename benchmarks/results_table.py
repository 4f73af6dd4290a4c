"""Gather every benchmark's acceptance rows into one table and one chart.

Each suite writes ``benchmarks/results/<topic>.json`` from its own measurements::

    {"topic": "full_graph", "rows": [{"work": ..., "metric": ..., "better": "lower",
      "strata": 0.31, "strata_spread": [0.30, 0.33], "peer": "DGL 2.1.0",
      "peer_value": 0.82, "peer_spread": [0.80, 0.85], "ratio": 0.378,
      "target": "<= 0.5", "met": true, "command": "pytest ...", "note": "..."}]}

``ratio`` is always ``strata / peer_value``; ``better`` says which way wins
(``lower`` for times, ``higher`` for throughputs, ``band`` for a prediction that
must land inside the target's ``a..b``). This script checks every row, then writes
``RESULTS.md`` (the table) and ``ratios.png`` (the chart: how many times better
than the peer each Strata figure is, with its target), and with ``--readme`` puts
the table between the README's ``<!-- results:begin -->`` and ``<!-- results:end -->``.

    .venv/bin/python benchmarks/results_table.py --readme README.md
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
BETTER = ("lower", "higher", "band")


@dataclass(frozen=True)
class Row:
    """One acceptance figure: Strata's median beside one peer's, from one run."""

    topic: str
    work: str
    metric: str
    better: str
    strata: float
    strata_spread: tuple[float, float] | None
    peer: str
    peer_value: float
    peer_spread: tuple[float, float] | None
    ratio: float
    target: str
    met: bool
    command: str
    note: str

    @property
    def advantage(self) -> float:
        """How many times better than the peer (> 1: Strata wins)."""
        if self.better == "lower":
            return self.peer_value / self.strata if self.strata else math.inf
        return self.ratio


def _spread(value: object, where: str) -> tuple[float, float] | None:
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 2):
        raise ValueError(f"{where}: expected [min, max], got {value!r}")
    return float(value[0]), float(value[1])


def load_rows(folder: Path = RESULTS) -> list[Row]:
    """Every row of every ``<topic>.json`` in ``folder``, checked.

    Raises:
        ValueError: naming the file, the row and the field that is wrong.
    """
    rows: list[Row] = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or "rows" not in data:
            continue  # a raw run dump (ingest_*.json), not a results file
        topic = str(data.get("topic", path.stem))
        for i, raw in enumerate(data["rows"]):
            where = f"{path.name} row {i}"
            missing = {"work", "better", "strata", "peer", "peer_value", "target"}
            missing -= raw.keys()
            if missing:
                raise ValueError(f"{where}: missing fields {sorted(missing)}")
            if raw["better"] not in BETTER:
                raise ValueError(
                    f"{where}: better must be one of {BETTER}, got {raw['better']!r}"
                )
            strata, peer = float(raw["strata"]), float(raw["peer_value"])
            ratio = float(raw.get("ratio", strata / peer if peer else math.inf))
            rows.append(
                Row(
                    topic=topic,
                    work=str(raw["work"]),
                    metric=str(raw.get("metric", "")),
                    better=str(raw["better"]),
                    strata=strata,
                    strata_spread=_spread(raw.get("strata_spread"), where),
                    peer=str(raw["peer"]),
                    peer_value=peer,
                    peer_spread=_spread(raw.get("peer_spread"), where),
                    ratio=ratio,
                    target=str(raw["target"]),
                    met=bool(raw.get("met", False)),
                    command=str(raw.get("command", "")),
                    note=str(raw.get("note", "")),
                )
            )
    return rows


def _figure(value: float, spread: tuple[float, float] | None) -> str:
    text = f"{value:.4g}"
    if spread is not None:
        text += f" [{spread[0]:.4g}, {spread[1]:.4g}]"
    return text


def markdown(rows: list[Row], *, notes: bool = True) -> str:
    """The results table: one line per figure, with its command.

    ``notes=False`` leaves out each row's note and the bracketed detail of its
    work (the README's compact form; RESULTS.md keeps them).
    """
    lines = [
        "| topic | work | metric | Strata median [min, max] | peer | peer median "
        "[min, max] | ratio | target | met | command |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [
            r.topic,
            r.work + (f" ({r.note})" if r.note else "")
            if notes
            else _short(r.work, 90),
            r.metric,
            _figure(r.strata, r.strata_spread),
            r.peer,
            _figure(r.peer_value, r.peer_spread),
            f"{r.ratio:.3g}x",
            r.target,
            "yes" if r.met else "**no**",
            f"`{r.command}`" if r.command else "",
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _target_advantage(row: Row) -> float | None:
    """The target as an advantage (times better than the peer), when it is a bound."""
    match = re.fullmatch(r"\s*(<=|>=)\s*([0-9.]+)\s*x?\s*", row.target)
    if match is None:
        return None
    bound = float(match.group(2))
    if row.better == "lower":
        return 1 / bound if bound else None
    return bound


def _short(text: str, width: int) -> str:
    text = re.sub(r"\s*\([^()]*\)", "", text)  # drop the bracketed detail
    return text if len(text) <= width else text[: width - 1] + "…"


def _label(row: Row) -> str:
    cpu = ", CPU time" if row.metric.startswith("CPU") else ""
    return f"{_short(row.work, 58)}{cpu}\nvs {_short(row.peer, 40)}"


def _colour(row: Row) -> str:
    if row.met:
        return "#2b8a3e"
    # A context row (a floor, not a target) is grey, not a miss.
    return "#adb5bd" if row.target.startswith("none") else "#c92a2a"


def chart(rows: list[Row], out: Path) -> None:
    """Bars of each figure's advantage over its peer (log scale), targets as ticks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    shown = [
        r
        for r in rows
        if r.better != "band" and ".." not in r.target and r.strata > 0 and r.peer_value
    ]
    if not shown:
        return
    fig, ax = plt.subplots(figsize=(11, 0.6 * len(shown) + 1.4))
    labels = [_label(r) for r in shown]
    values = [r.advantage for r in shown]
    colours = [_colour(r) for r in shown]
    y = list(range(len(shown)))
    ax.barh(y, values, color=colours)
    for i, r in enumerate(shown):
        target = _target_advantage(r)
        if target is not None:
            ax.plot([target, target], [i - 0.4, i + 0.4], color="black", lw=2)
    ax.axvline(1.0, color="grey", lw=1, ls="--")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(
        "times better than the peer (log scale; green: met, red: missed, "
        "grey: context; tick: target)"
    )
    ax.set_title("Strata against its peers, same run, 2-core CPU machine")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def replace_section(readme: Path, table: str) -> None:
    """Put ``table`` between the README's results markers (they must exist)."""
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{readme}: expected the markers {BEGIN} and {END}")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{BEGIN}\n{table}{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--readme", type=Path, help="README to update in place")
    args = parser.parse_args(argv)
    try:
        rows = load_rows(args.results)
    except ValueError as error:
        print(f"results_table: {error}", file=sys.stderr)
        return 2
    table = markdown(rows)
    (args.results / "RESULTS.md").write_text(table)
    chart(rows, args.results / "ratios.png")
    if args.readme is not None:
        replace_section(args.readme, markdown(rows, notes=False))
    met = sum(r.met for r in rows)
    print(f"{len(rows)} figures, {met} targets met -> {args.results / 'RESULTS.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
