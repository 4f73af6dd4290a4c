"""Render a plan for people: an aligned text table, or a Mermaid flowchart.

Examples:
    >>> from strata.engine.ops import Map
    >>> from strata.engine.pipeline import Pipeline
    >>> from strata.engine.testing import ListSource
    >>> p = Pipeline("demo")
    >>> _ = p.step("numbers", ListSource([1, 2]))
    >>> _ = p.step("text", Map(str), "numbers", shards=2, key=int)
    >>> print(p.describe())
    pipeline 'demo': 2 steps
      numbers  source     strata.engine.testing:ListSource
      text     streaming  strata.engine.ops:Map             x2 by int  <- numbers
    >>> print(p.describe(mermaid=True))
    flowchart LR
      s0[["numbers<br/>ListSource"]]
      s1("text<br/>Map x2")
      s0 --> s1
"""

from __future__ import annotations

from strata.engine.pipeline import Step, StepKind
from strata.engine.plan import Plan


def describe_text(plan: Plan) -> str:
    """One line per step, in run order: id, kind, function, sharding, inputs."""
    rows = []
    for step in plan.steps:
        rows.append(
            [
                step.id,
                step.kind.value,
                step.location,
                _sharding(step),
                _wiring(step, plan),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = [f"pipeline '{plan.name}': {len(plan.steps)} steps"]
    for row in rows:
        cells = [
            cell.ljust(width)
            for cell, width in zip(row, widths, strict=False)
            if width  # a column empty on every row takes no room
        ]
        lines.append(("  " + "  ".join([*cells, row[-1]])).rstrip())
    return "\n".join(lines)


def describe_mermaid(plan: Plan) -> str:
    """A Mermaid ``flowchart``: sources as subroutines, batch steps as boxes."""
    ids = {step.id: f"s{n}" for n, step in enumerate(plan.steps)}
    lines = ["flowchart LR"]
    for step in plan.steps:
        name = step.location.rpartition(":")[2]
        label = f"{escape_mermaid(step.id)}<br/>{escape_mermaid(name)}" + (
            f" x{step.shards}" if step.shards > 1 else ""
        )
        if step.id in plan.recorded:
            label += "<br/>(outputs)"
        shape = {
            StepKind.SOURCE: '[["{}"]]',
            StepKind.STREAMING: '("{}")',
            StepKind.BATCH: '["{}"]',
        }[step.kind]
        lines.append(f"  {ids[step.id]}{shape.format(label)}")
    for edge in plan.edges:
        producer = plan.step(edge.producer)
        port = escape_mermaid(edge.port)
        arrow = f"-- {port} -->" if len(producer.ports) > 1 else "-->"
        lines.append(f"  {ids[edge.producer]} {arrow} {ids[edge.consumer]}")
    return "\n".join(lines)


def escape_mermaid(text: str) -> str:
    """``text`` safe inside a quoted Mermaid label: entity codes for ``#"<>&``.

    Examples:
        >>> escape_mermaid('load "a" <b> #1 & c')
        'load #quot;a#quot; #lt;b#gt; #35;1 #amp; c'
    """
    text = text.replace("#", "#35;")  # first: the codes below begin with '#'
    for char, code in (('"', "#quot;"), ("<", "#lt;"), (">", "#gt;"), ("&", "#amp;")):
        text = text.replace(char, code)
    return text


def _sharding(step: Step) -> str:
    if step.shards == 1:
        return ""
    key = (
        step.key if isinstance(step.key, str) else getattr(step.key, "__name__", "key")
    )
    return f"x{step.shards} by {key}"


def _wiring(step: Step, plan: Plan) -> str:
    parts = []
    if step.inputs:
        parts.append("<- " + ", ".join(step.inputs))
    if len(step.ports) > 1:
        parts.append("ports " + ", ".join(step.ports))
    if step.id in plan.recorded:
        parts.append("[outputs]")
    return "  ".join(parts)
