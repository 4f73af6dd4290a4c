"""The type checks the engine can make before running: arity and item types.

A batch function's signature must accept its inputs positionally and its parameters
by name. Item types are compared only where both sides declare plain classes: an
operator through its generic base (``class Count(Operator[pa.RecordBatch, int])``),
a function through its annotations. Anything vaguer (``Any``, type variables,
generics other than ``list``/``Sequence`` of a class) is not checked.

Examples:
    >>> from strata.engine.pipeline import Step
    >>> def scale(x: float, factor: float) -> float:
    ...     return x * factor
    >>> list(check_signature(Step("scale", scale, ("a",), {"factor": 2.0})))
    []
    >>> print(*check_signature(Step("scale", scale, ("a", "b"), {"factor": 2.0})))
    inputs in step 'scale': expected 1 input for strata.engine.typecheck:scale(x, *, factor), got 2 (a, b).
"""  # noqa: E501

from __future__ import annotations

import collections.abc
import inspect
import types
import typing
from collections.abc import Iterator
from typing import Any

from strata.engine.errors import format_error
from strata.engine.operator import Operator
from strata.engine.pipeline import Step, StepKind

_POSITIONAL = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
)
_SEQUENCES = (list, collections.abc.Sequence, collections.abc.Iterable)


def check_signature(step: Step) -> Iterator[str]:
    """Yield problems binding a batch step's inputs and parameters to its function."""
    try:
        signature = inspect.signature(step.fn)
    except (TypeError, ValueError):  # builtins without a signature: nothing to check
        return
    params = signature.parameters.values()
    positional = [
        p for p in params if p.kind in _POSITIONAL and p.name not in step.params
    ]
    required = [p for p in positional if p.default is inspect.Parameter.empty]
    variadic = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    count = len(step.inputs)
    if count < len(required) or (count > len(positional) and not variadic):
        low, high = len(required), len(positional)
        wanted = str(low) if low == high else f"{low} to {high}"
        plural = "" if wanted == "1" else "s"
        shown = ", ".join(p.name for p in positional)
        keywords = ", ".join(sorted(step.params))
        signature_text = (
            f"{step.location}({shown}{', *, ' + keywords if keywords else ''})"
        )
        got = f"{count} ({', '.join(step.inputs)})" if count else "0"
        yield format_error(
            "inputs",
            step.id,
            f"{wanted} input{plural} for {signature_text}",
            got,
            None if count else "list the input step ids after the function.",
        )
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        unknown = sorted(set(step.params) - set(signature.parameters))
        if unknown:
            yield format_error(
                "params",
                step.id,
                f"parameters of {step.location} ({', '.join(signature.parameters)})",
                ", ".join(unknown),
            )


def item_type_problem(producer: Step, consumer: Step, index: int) -> str | None:
    """Return a problem if ``producer`` declares items ``consumer`` cannot take."""
    produced = _output_type(producer)
    expected = _input_type(consumer, index)
    if produced is None or expected is None:
        return None
    if producer.kind is not StepKind.BATCH and consumer.kind is StepKind.BATCH:
        # A batch function receives a streaming input as a list of its items.
        origin = typing.get_origin(expected) or expected
        if isinstance(origin, type) and not issubclass(list, origin):
            return format_error(
                f"input '{consumer.inputs[index]}'",
                consumer.id,
                f"a list parameter (step '{producer.id}' streams items)",
                f"{_name(expected)}",
                f"annotate it as list[{_name(produced)}]."
                if _union_members(produced)
                else "annotate it as a list.",
            )
        args = typing.get_args(expected)
        if origin not in _SEQUENCES or len(args) != 1:
            return None
        expected = args[0]
    if _compatible(produced, expected):
        return None
    return format_error(
        f"input '{consumer.inputs[index]}'",
        consumer.id,
        f"items of type {_name(expected)}",
        f"{_name(produced)} from step '{producer.id}'",
    )


def _output_type(step: Step) -> Any:
    if len(step.ports) != 1:
        return None
    if step.kind is StepKind.BATCH:
        return _hints(step.fn).get("return")
    return _operator_args(step.fn)[1]


def _input_type(step: Step, index: int) -> Any:
    if step.kind is not StepKind.BATCH:
        return _operator_args(step.fn)[0] if len(step.inputs) == 1 else None
    try:
        params = inspect.signature(step.fn).parameters.values()
    except (TypeError, ValueError):
        return None
    names = [
        p.name for p in params if p.kind in _POSITIONAL and p.name not in step.params
    ]
    if index >= len(names):
        return None
    return _hints(step.fn).get(names[index])


def _operator_args(op: object) -> tuple[Any, Any]:
    for cls in type(op).__mro__:
        for base in getattr(cls, "__orig_bases__", ()):
            if typing.get_origin(base) is Operator:
                args = typing.get_args(base)
                if len(args) == 2:
                    return args[0], args[1]
    return None, None


def _hints(fn: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # unresolvable forward references: skip the check, do not fail
        return {}


def _compatible(produced: Any, expected: Any) -> bool:
    expected_options = _union_members(expected)
    produced_options = _union_members(produced)
    if expected_options is None or produced_options is None:
        return True
    return all(
        any(issubclass(p, e) for e in expected_options) for p in produced_options
    )


def _union_members(annotation: Any) -> list[type] | None:
    """Plain classes of an annotation, or None when it is too vague to check."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [_union_members(a) for a in typing.get_args(annotation)]
        if any(m is None for m in members):
            return None
        return [cls for m in members if m is not None for cls in m]
    if annotation is None or annotation is type(None):
        return [type(None)]
    origin = typing.get_origin(annotation) or annotation
    if origin is Any or origin is object or not isinstance(origin, type):
        return None  # (Any is a class since Python 3.11)
    return [origin]


def _name(annotation: Any) -> str:
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__qualname__
    return str(annotation).replace("typing.", "")
