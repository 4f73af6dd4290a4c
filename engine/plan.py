r"""Validation: turn a :class:`~strata.engine.pipeline.Pipeline` into a checked :class:`Plan`.

Every check runs, and every problem is reported at once in one
:class:`~strata.engine.errors.PlanError`, each naming its step (Ray Data and Bytewax do the
same; fixing errors one run at a time is slow). Checks: step ids (valid, unique),
step functions, inputs and ports, cycles, sharding, a batch function's arity and
parameters, the declared item types of connected steps, and recorded steps.

Examples:
    >>> from strata.engine.pipeline import Pipeline
    >>> def load() -> int:
    ...     return 1
    >>> def train(a: int, b: int) -> int:
    ...     return a + b
    >>> p = Pipeline("broken")
    >>> _ = p.step("load", load)
    >>> _ = p.step("load", load)
    >>> _ = p.step("train", train, "lod", "train")
    >>> try:
    ...     p.validate()
    ... except PlanError as error:
    ...     print(*error.problems, sep="\n")
    id in step 'load': expected a unique step id, got 2 steps named 'load'. Hint: ...
    input 'lod' in step 'train': expected the id of a declared step, got no step 'lod'. Hint: did you mean 'load'?
    inputs in step 'train': expected no cycle, got the cycle train -> train. Hint: ...
"""  # noqa: E501

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass

from strata.engine.errors import PlanError, format_error
from strata.engine.pipeline import Pipeline, Step, StepKind, split_ref
from strata.engine.typecheck import check_signature, item_type_problem

_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*\Z")


@dataclass(frozen=True, slots=True)
class Edge:
    """Port ``port`` of step ``producer`` feeds input ``input`` of ``consumer``."""

    producer: str
    port: str
    consumer: str
    input: int


@dataclass(frozen=True, slots=True)
class Plan:
    """A validated pipeline: steps in a topological order, and the edges between."""

    name: str
    steps: tuple[Step, ...]
    edges: tuple[Edge, ...]
    recorded: tuple[str, ...]

    def step(self, step_id: str) -> Step:
        """Return the step with this id."""
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(step_id)

    def inputs_of(self, step_id: str) -> tuple[Edge, ...]:
        """The edges into ``step_id``, by input position."""
        edges = (e for e in self.edges if e.consumer == step_id)
        return tuple(sorted(edges, key=lambda e: e.input))

    def outputs_of(self, step_id: str, port: str) -> tuple[Edge, ...]:
        """The edges out of one port of ``step_id``, in plan order."""
        return tuple(e for e in self.edges if e.producer == step_id and e.port == port)


def build_plan(pipeline: Pipeline) -> Plan:
    """Validate ``pipeline`` and return its plan.

    Raises:
        PlanError: With every problem found.
    """
    problems = list(_problems(pipeline))
    if problems:
        raise PlanError(pipeline.name, problems)
    by_id = {s.id: s for s in pipeline.steps}
    edges = tuple(_edges(pipeline.steps, by_id))
    order = _topological(pipeline.steps, edges)
    return Plan(pipeline.name, order, edges, pipeline.recorded)


def _problems(pipeline: Pipeline) -> Iterator[str]:
    steps = pipeline.steps
    by_id: dict[str, Step] = {}
    for step in steps:
        by_id.setdefault(step.id, step)
    if not steps:
        yield format_error("steps", pipeline.name, "at least one step", "none")
    seen: set[str] = set()
    for step in steps:
        if step.id in seen:
            count = sum(s.id == step.id for s in steps)
            yield format_error(
                "id",
                step.id,
                "a unique step id",
                f"{count} steps named '{step.id}'",
                "rename one; ids name state, metrics and errors.",
            )
            continue
        seen.add(step.id)
        yield from _step_problems(step, by_id)
    yield from _cycle_problems(steps, by_id)
    yield from _recorded_problems(pipeline, by_id)


def _step_problems(step: Step, by_id: dict[str, Step]) -> Iterator[str]:
    if not _ID.match(step.id):
        yield format_error(
            "id",
            step.id,
            "letters, digits, '_' or '-'",
            repr(step.id),
            "'.' separates a step from its port in input references.",
        )
    if isinstance(step.fn, type):
        yield format_error(
            "function",
            step.id,
            "a function or an operator instance",
            f"the class {step.fn.__qualname__}",
            f"instantiate it: {step.fn.__qualname__}(...).",
        )
        return
    if step.kind is StepKind.BATCH and not callable(step.fn):
        yield format_error(
            "function",
            step.id,
            "a function or an operator (open/process/finish)",
            f"{type(step.fn).__qualname__} object",
        )
        return
    yield from _port_problems(step)
    yield from _input_problems(step, by_id)
    yield from _shard_problems(step)
    if step.kind is StepKind.BATCH:
        yield from check_signature(step)
    elif step.params:
        yield format_error(
            "params",
            step.id,
            "no parameters for an operator",
            ", ".join(sorted(step.params)),
            "configure the operator object itself: MyOperator(k=4).",
        )
    for index, ref in enumerate(step.inputs):
        producer_id, port = split_ref(ref)
        producer = by_id.get(producer_id)
        if producer is not None and _port_of(producer, port) is not None:
            problem = item_type_problem(producer, step, index)
            if problem:
                yield problem


def _port_problems(step: Step) -> Iterator[str]:
    bad = [p for p in step.ports if not isinstance(p, str) or not _ID.match(p)]
    if not step.ports or bad or len(set(step.ports)) != len(step.ports):
        yield format_error(
            "ports",
            step.id,
            "distinct names of letters, digits, '_' or '-'",
            repr(step.ports),
        )


def _input_problems(step: Step, by_id: dict[str, Step]) -> Iterator[str]:
    for ref in step.inputs:
        producer_id, port = split_ref(ref) if isinstance(ref, str) else ("", None)
        producer = by_id.get(producer_id)
        if producer is None:
            close = difflib.get_close_matches(producer_id, list(by_id), n=1)
            hint = f"did you mean '{close[0]}'?" if close else None
            yield format_error(
                f"input {ref!r}",
                step.id,
                "the id of a declared step",
                f"no step {producer_id!r}",
                hint,
            )
        elif _port_of(producer, port) is None:
            ports = ", ".join(producer.ports)
            got = f"port {port!r}" if port else "no port"
            yield format_error(
                f"input {ref!r}",
                step.id,
                f"one of step '{producer_id}' ports ({ports})",
                got,
                f"write '{producer_id}.<port>'.",
            )


def _port_of(producer: Step, port: str | None) -> str | None:
    if port is None:
        return producer.ports[0] if len(producer.ports) == 1 else None
    return port if port in producer.ports else None


def _shard_problems(step: Step) -> Iterator[str]:
    if not isinstance(step.shards, int) or step.shards < 1:
        yield format_error("shards", step.id, "an int >= 1", repr(step.shards))
    elif step.shards > 1 and step.kind is not StepKind.STREAMING:
        yield format_error(
            "shards",
            step.id,
            "1 for a batch function or a source",
            str(step.shards),
            "only streaming steps with inputs run as several shards.",
        )
    elif step.shards > 1 and step.key is None:
        yield format_error(
            "key",
            step.id,
            "a key (column name or function) with shards > 1",
            "None",
            "the key routes each item, or row, to one shard.",
        )
    key: object = step.key  # declared as a Key, but callers may pass anything
    if key is not None and not (isinstance(key, str) or callable(key)):
        yield format_error(
            "key", step.id, "a column name or a function", type(key).__name__
        )


def _cycle_problems(steps: tuple[Step, ...], by_id: dict[str, Step]) -> Iterator[str]:
    reported: set[frozenset[str]] = set()
    state: dict[str, int] = {}  # 1: on the DFS stack, 2: done
    path: list[str] = []

    def visit(step_id: str) -> Iterator[list[str]]:
        state[step_id] = 1
        path.append(step_id)
        for ref in by_id[step_id].inputs:
            producer = split_ref(ref)[0] if isinstance(ref, str) else ""
            if producer not in by_id:
                continue
            if state.get(producer) == 1:
                yield [*path[path.index(producer) :], producer]
            elif producer not in state:
                yield from visit(producer)
        path.pop()
        state[step_id] = 2

    for step in steps:
        if step.id in state:
            continue
        for cycle in visit(step.id):
            members = frozenset(cycle)
            if members not in reported:
                reported.add(members)
                # Inputs point upstream; print the loop in data-flow order.
                flow = " -> ".join(reversed(cycle))
                yield format_error(
                    "inputs",
                    cycle[0],
                    "no cycle",
                    f"the cycle {flow}",
                    "a step cannot consume its own output; loop inside an operator.",
                )


def _recorded_problems(pipeline: Pipeline, by_id: dict[str, Step]) -> Iterator[str]:
    for step_id in pipeline.recorded:
        step = by_id.get(step_id)
        if step is None:
            yield format_error(
                "record", step_id, "the id of a declared step", f"no step {step_id!r}"
            )
        elif step.kind is not StepKind.BATCH:
            yield format_error(
                "record",
                step_id,
                "a batch function returning a mapping",
                f"a {step.kind.value} step",
                "add a batch step that summarises the stream, and record that.",
            )


def _edges(steps: tuple[Step, ...], by_id: dict[str, Step]) -> Iterator[Edge]:
    for step in steps:
        for index, ref in enumerate(step.inputs):
            producer_id, port = split_ref(ref)
            resolved = _port_of(by_id[producer_id], port)
            assert resolved is not None  # validated
            yield Edge(producer_id, resolved, step.id, index)


def _topological(steps: tuple[Step, ...], edges: tuple[Edge, ...]) -> tuple[Step, ...]:
    # Kahn's algorithm, taking ready steps in declaration order so plans are stable.
    indegree = {s.id: 0 for s in steps}
    for edge in edges:
        indegree[edge.consumer] += 1
    order: list[Step] = []
    ready = [s for s in steps if indegree[s.id] == 0]
    while ready:
        step = ready.pop(0)
        order.append(step)
        for edge in edges:
            if edge.producer == step.id:
                indegree[edge.consumer] -= 1
                if indegree[edge.consumer] == 0:
                    ready.append(next(s for s in steps if s.id == edge.consumer))
    return tuple(order)
